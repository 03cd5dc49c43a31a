"""perf/rm_judge_agreement.py: the numbers behind the choice of the demo's PPO claim RM, against a
direct computation (scipy's Pearson per question, best-of-4 by argmax per block)."""
import importlib.util

import numpy as np
import pandas as pd
import pytest
from helpers import REPO
from scipy import stats

spec = importlib.util.spec_from_file_location("rm_judge_agreement", REPO / "perf" / "rm_judge_agreement.py")
agree = importlib.util.module_from_spec(spec)
spec.loader.exec_module(agree)


def _frames(seed=0, questions=5, n=16):
    rng = np.random.default_rng(seed)
    judge = rng.integers(0, 3, size=(questions, n)) / 2
    rm = 2 * judge + rng.normal(size=(questions, n))
    rm[0] = 1.0  # a constant RM on question 0: no correlation there
    rows = [(f"q{q}", j) for q in range(questions) for j in range(n)]
    order = rng.permutation(len(rows))  # the files' order does not matter
    jd = pd.DataFrame([dict(question_id=q, sample_idx=j, score=judge[int(q[1:]), j]) for q, j in rows]).iloc[order]
    sc = pd.DataFrame([dict(question_id=q, sample_idx=j, score=rm[int(q[1:]), j]) for q, j in rows]).iloc[order]
    return jd, sc, judge, rm


def test_agreement_matches_a_direct_computation():
    jd, sc, judge, rm = _frames()
    got = agree.agreement(jd, sc)
    corr = [stats.pearsonr(rm[q], judge[q]).statistic for q in range(1, 5)]
    gains = [judge[q, b:b + 4][np.argmax(rm[q, b:b + 4])] - judge[q, b:b + 4].mean()
             for q in range(5) for b in range(0, 16, 4)]
    assert got["within_corr"] == pytest.approx(np.mean(corr), rel=1e-12)
    assert got["best_of_4_gain"] == pytest.approx(np.mean(gains), rel=1e-12)
    assert got["sd_judge"] == pytest.approx(np.mean([np.std(judge[q], ddof=1) for q in range(5)]), rel=1e-12)
    assert got["questions"] == 5


def test_no_shared_sample_is_an_error():
    jd, sc, _, _ = _frames()
    with pytest.raises(ValueError, match="no sample"):
        agree.agreement(jd, sc.assign(question_id="other"))
