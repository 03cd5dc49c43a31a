"""perf/claim_power.py: the variance components behind the PPO claim's power, recovered from data made
with known components, read from the evaluation's judged files, and simulated worlds whose interval
width matches the design's analytic standard error."""
import importlib.util
import json

import numpy as np
import pytest
from helpers import REPO

spec = importlib.util.spec_from_file_location("claim_power", REPO / "perf" / "claim_power.py")
cp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cp)

TRUE = {"question": 0.002, "question_x_seed": 0.004, "question_x_answer": 0.03, "residual": 0.04, "seed": 0.0}


def _data(rng, Q=3000, S=3, J=8, comp=TRUE, delta=0.0):
    return (delta + rng.normal(0, np.sqrt(comp["question"]), (Q, 1, 1))
            + rng.normal(0, np.sqrt(comp["question_x_seed"]), (Q, S, 1))
            + rng.normal(0, np.sqrt(comp["question_x_answer"]), (Q, 1, J))
            + rng.normal(0, np.sqrt(comp["residual"]), (Q, S, J)))


def test_components_recover_the_generating_variances():
    got = cp.components(_data(np.random.default_rng(0)))
    for k in ("question_x_seed", "question_x_answer", "residual"):
        assert got[k] == pytest.approx(TRUE[k], rel=0.1), k
    assert got["question"] == pytest.approx(TRUE["question"], abs=0.0015)
    assert (got["Q"], got["S"], got["J"]) == (3000, 3, 8)
    # the answers' component is what the seeds share: swapping it into question x seed changes both estimates
    swapped = dict(TRUE, question_x_seed=0.03, question_x_answer=0.004)
    got2 = cp.components(_data(np.random.default_rng(1), comp=swapped))
    assert got2["question_x_seed"] == pytest.approx(0.03, rel=0.1)
    assert got2["question_x_answer"] == pytest.approx(0.004, rel=0.2)


def test_read_d_pairs_each_seed_with_the_base_answers(tmp_path):
    root = tmp_path / "results" / "ppo" / "demo_policy" / "rm_a"
    base = {"q1": [0.0, 0.5], "q2": [1.0, 0.0]}
    for s, sub in enumerate(["", "seed1", "seed2"]):
        (root / sub).mkdir(parents=True, exist_ok=True)
        rows = [{"question_id": q, "scores": [b[0] + s, b[1] + 2 * s], "base_scores": b} for q, b in base.items()]
        (root / sub / "eval_judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = cp.read_d(tmp_path, "demo_policy", "rm_a")
    assert d.shape == (2, 3, 2)
    assert d[:, :, 0].tolist() == [[0, 1, 2], [0, 1, 2]] and d[:, :, 1].tolist() == [[0, 2, 4], [0, 2, 4]]


@pytest.mark.parametrize("answers", [4, 16])
def test_simulated_interval_width_matches_the_analytic_standard_error(answers):
    """The questions-only bootstrap's width is the design's analytic standard error without a seeds' main
    effect; the claim's crossed interval is wider (it estimates the seeds' part with seeds - 1 degrees)."""
    comp = dict(TRUE, Q=90, S=3, J=4)
    var_q = (TRUE["question"] + TRUE["question_x_seed"] / 3
             + TRUE["question_x_answer"] / answers + TRUE["residual"] / (3 * answers))
    analytic = 2 * 1.96 * np.sqrt(var_q / 90)
    share, width = cp.simulate(comp, 0.0, answers, worlds=60, n_boot=500, boot_seed=3,
                               rng=np.random.default_rng(answers), rule="questions")
    assert width == pytest.approx(analytic, rel=0.08)
    assert 0.0 <= share <= 0.15  # no true difference: the side rarely holds
    share, width = cp.simulate(comp, 0.0, answers, worlds=200, n_boot=0, boot_seed=3,
                               rng=np.random.default_rng(answers))
    assert analytic < width < 1.4 * analytic and share <= 0.06


def test_read_d_keeps_the_judged_files_question_order(tmp_path):
    """The questions-only bootstrap resamples questions by position: the method table sees them in the first
    seed's file order, so read_d keeps it (questions missing from a seed are left out)."""
    root = tmp_path / "results" / "ppo" / "p" / "r"
    for sub, qs in (("", ["q9", "q1", "q5"]), ("seed1", ["q5", "q1", "q9", "q7"])):
        (root / sub).mkdir(parents=True, exist_ok=True)
        rows = [{"question_id": q, "scores": [int(q[1:])], "base_scores": [0]} for q in qs]
        (root / sub / "eval_judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cp.read_d(tmp_path, "p", "r")[:, 0, 0].tolist() == [9, 1, 5]
