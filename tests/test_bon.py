"""Best-of-k estimators (exact expectation vs brute force, ties, NaN), curves, table, stage I/O."""
import itertools
import logging

import numpy as np
import pandas as pd
import pytest

from prbench.downstream import bon
from prbench.io import read_jsonl, write_jsonl
from prbench.rms.base import RewardModel, ScoreOutput


def brute_force_expected(r, g, k):
    """Mean over all k-subsets of the judge score of the subset's RM-best (tied best: mean judge)."""
    r = np.where(np.isnan(r), -np.inf, r)
    vals = []
    for sub in itertools.combinations(range(len(r)), k):
        sub = list(sub)
        top = max(r[i] for i in sub)
        vals.append(np.mean([g[i] for i in sub if r[i] == top]))
    return float(np.mean(vals))


@pytest.mark.parametrize("seed", range(6))
def test_expected_matches_brute_force_with_ties_and_nan(seed):
    rng = np.random.default_rng(seed)
    n = 9
    r = rng.integers(0, 4, size=n).astype(float)  # heavy RM-score ties
    if seed % 2:
        r[rng.choice(n, 2, replace=False)] = np.nan  # failures rank lowest (and tie with each other)
    g = rng.integers(0, 5, size=n) / 2.0
    for k in range(1, n + 1):
        assert bon.best_of_k("expected", r, g, k) == pytest.approx(brute_force_expected(r, g, k), abs=1e-12)
        w = bon.expected_weights(r, k)
        assert w.sum() == pytest.approx(1.0) and (w >= 0).all()


def test_expected_without_ties_is_order_statistic():
    r = np.array([0.3, 0.1, 0.9, 0.5])
    g = np.array([1.0, 2.0, 3.0, 4.0])
    assert bon.best_of_k("expected", r, g, 4) == 3.0  # best RM sample always selected
    assert bon.best_of_k("expected", r, g, 1) == pytest.approx(g.mean())
    # k=2: sorted by r: g = [2, 1, 4, 3]; weights C(i-1,1)/C(4,2) = 0,1,2,3 / 6
    assert bon.best_of_k("expected", r, g, 2) == pytest.approx((1 * 1 + 2 * 4 + 3 * 3) / 6)


def test_first_k_ties_go_to_the_earliest_sample_and_nan_ranks_lowest():
    r = np.array([1.0, 2.0, 2.0, 5.0])
    g = np.array([0.0, 1.0, 2.0, 9.0])
    assert bon.best_of_k("first_k", r, g, 1) == 0.0
    assert bon.best_of_k("first_k", r, g, 3) == 1.0  # tie between samples 1 and 2: the earlier one
    assert bon.best_of_k("first_k", r, g, 4) == 9.0
    r_tie_late = np.array([0.0, 3.0, 1.0, 3.0])
    assert bon.best_of_k("first_k", r_tie_late, np.array([5.0, 1.0, 7.0, 8.0]), 4) == 1.0
    assert bon.best_of_k("first_k", [np.nan] * 4, g, 4) == 0.0  # all failures tie: sample 0
    r_nan = np.array([np.nan, 0.1, np.nan, -3.0])
    assert bon.best_of_k("first_k", r_nan, g, 2) == 1.0
    assert bon.best_of_k("first_k", r_nan, g, 1) == 0.0


def test_first_k_tieavg_averages_tied_judge_scores():
    r = np.array([1.0, 2.0, 2.0, 5.0])
    g = np.array([0.0, 1.0, 2.0, 9.0])
    assert bon.best_of_k("first_k_tieavg", r, g, 1) == 0.0
    assert bon.best_of_k("first_k_tieavg", r, g, 3) == 1.5  # tie between samples 1 and 2: averaged
    assert bon.best_of_k("first_k_tieavg", r, g, 4) == 9.0
    assert bon.best_of_k("first_k_tieavg", [np.nan, 0.1, np.nan, -3.0], g, 2) == 1.0
    assert bon.best_of_k("expected", [np.nan] * 4, g, 2) == pytest.approx(g.mean())  # all tied: random


def test_win_vs_random_counts_ties_half():
    g = np.array([0.0, 1.0, 1.0, 2.0])
    # the best sample beats 3 of 4 random draws and ties itself: (3 + 0.5) / 4
    w = np.array([0.0, 0.0, 0.0, 1.0])
    assert bon.win_vs_random(w, g) == pytest.approx(3.5 / 4)
    assert bon.win_vs_random(np.full(4, 0.25), g) == pytest.approx(0.5)


def test_bad_k_raises():
    with pytest.raises(ValueError, match="k=5"):
        bon.expected_weights([1, 2, 3], 5)


def _world(n_q=12, n=8, seed=0):
    rng = np.random.default_rng(seed)
    samples, judged, good, length, nanrm = [], [], [], [], []
    for q in range(n_q):
        qid = f"S{q % 2}/q{q:02d}"
        for s in range(n):
            g = float(rng.integers(0, 5) / 2)
            samples.append({"question_id": qid, "subset": f"S{q % 2}", "sample_idx": s, "answer": "x" * (s + 1)})
            judged.append({"question_id": qid, "sample_idx": s, "score": g, "ratings": [], "failures": 0})
            good.append({"question_id": qid, "sample_idx": s, "score": g + rng.normal(0, 0.3)})
            length.append({"question_id": qid, "sample_idx": s, "score": float(rng.normal())})
            nanrm.append({"question_id": qid, "sample_idx": s, "score": None if s % 3 == 0 else g})
    return samples, judged, {"good": good, "noise": length, "flaky": nanrm}


def test_curves_oracle_dominates_and_good_rm_rises():
    samples, judged, rms = _world()
    ks = [1, 2, 4, 8]
    curves, table = bon.bon_curves(samples, judged, rms, ks, 8, "pol", seed=0, n_boot=200)
    assert set(curves) == {"good", "noise", "flaky", "_oracle", "_random"}
    for df in curves.values():
        assert list(df.columns) == bon.CURVE_COLUMNS
    ora = curves["_oracle"].set_index(["question_id", "estimator", "k"])["judge_score"]
    for name in ("good", "noise", "flaky"):
        cur = curves[name].set_index(["question_id", "estimator", "k"])["judge_score"]
        assert (ora.loc[cur.index] >= cur - 1e-12).all()
    t = table[table.subset == bon.ALL_SUBSETS].set_index(["rm", "estimator", "k"])  # the pooled rows
    good = [t.loc[("good", "expected", k), "mean"] for k in ks]
    assert good == sorted(good) and good[-1] > good[0]
    # k = 1 under `expected` is a uniformly random sample for every RM
    assert t.loc[("good", "expected", 1), "mean"] == pytest.approx(t.loc[("random", "expected", 1), "mean"])
    assert t.loc[("random", "expected", 4), "win_rate"] == pytest.approx(0.5)
    assert t.loc[("flaky", "expected", 2), "rm_failures"] == sum(1 for r in rms["flaky"] if r["score"] is None)
    assert list(table.columns) == bon.TABLE_COLUMNS
    assert (table["ci_low"] <= table["mean"] + 1e-12).all() and (table["mean"] <= table["ci_high"] + 1e-12).all()
    # deterministic
    _, table2 = bon.bon_curves(samples, judged, rms, ks, 8, "pol", seed=0, n_boot=200)
    pd.testing.assert_frame_equal(table, table2)


def test_per_subset_rows_as_the_authors_report_them():
    """Per (RM, estimator, k): the pooled row (subset `all`, unchanged: the bootstrap seeded by the
    policy only) then one row per subset, each the mean of its subset's questions' curve values, with
    the subset's counts; the subsets' counts add up to the pooled ones."""
    from prbench.seeding import stable_seed
    from prbench.stats import bootstrap_ci

    samples, judged, rms = _world()
    ks = [1, 2, 8]
    curves, table = bon.bon_curves(samples, judged, rms, ks, 8, "pol", seed=0, n_boot=100)
    assert set(table["subset"]) == {"all", "S0", "S1"}
    assert len(table) == 3 * len(table[table.subset == "all"])
    for rm, name in (("good", "good"), ("flaky", "flaky"), ("oracle", "_oracle"), ("random", "_random")):
        for est in bon.ESTIMATORS:
            for k in ks:
                cur = curves[name].query("estimator == @est and k == @k")
                rows = table[(table.rm == rm) & (table.estimator == est) & (table.k == k)].set_index("subset")
                assert list(rows.index) == ["all", "S0", "S1"]
                for sub in ("S0", "S1"):
                    js = cur[cur.subset == sub]["judge_score"].to_numpy()
                    js = js[~np.isnan(js)]
                    want = bootstrap_ci(js, n_boot=100, seed=stable_seed(0, "bon", "pol", sub))
                    assert (rows.loc[sub, "mean"], rows.loc[sub, "ci_low"], rows.loc[sub, "ci_high"]) == want
                    assert rows.loc[sub, "n_questions"] == len(js) == 6
                all_js = cur["judge_score"].to_numpy()
                assert rows.loc["all", "mean"] == pytest.approx(all_js.mean())
                assert (rows.loc["all", "ci_low"], rows.loc["all", "ci_high"]) == \
                    bootstrap_ci(all_js, n_boot=100, seed=stable_seed(0, "bon", "pol"))[1:]
                for col in ("rm_failures", "judge_dropped", "judge_nan_samples", "judge_failed_samples"):
                    assert rows.loc["S0", col] + rows.loc["S1", col] == rows.loc["all", col], col
    flaky = table[(table.rm == "flaky") & (table.k == 1) & (table.estimator == "expected")].set_index("subset")
    by_sub = {s: sum(1 for r in rms["flaky"] if r["score"] is None and r["question_id"].startswith(s))
              for s in ("S0", "S1")}
    assert flaky.loc["S0", "rm_failures"] == by_sub["S0"] and flaky.loc["S1", "rm_failures"] == by_sub["S1"]


def _nan_world(g_qa2=None):
    """3 questions x 4 samples; question qa's sample 2 has judge score g_qa2 (None: unparseable).
    RM pick2 ranks that sample first in qa, RM pick1 ranks sample 1 first."""
    G = {"qa": [1.0, 2.0, g_qa2, 0.0], "qb": [0.5, 1.5, 1.0, 2.0], "qc": [2.0, 0.0, 1.0, 1.0]}
    R = {"pick2": {"qa": [0, 1, 5, 2], "qb": [0, 1, 2, 3], "qc": [3, 2, 1, 0]},
         "pick1": {"qa": [0, 5, 1, 2], "qb": [3, 2, 1, 0], "qc": [0, 1, 2, 3]}}
    samples = [{"question_id": q, "subset": "S", "sample_idx": s, "answer": f"{q}{s}"} for q in G for s in range(4)]
    judged = [{"question_id": q, "sample_idx": s, "score": g} for q in G for s, g in enumerate(G[q])]
    rms = {rm: [{"question_id": q, "sample_idx": s, "score": float(v)} for q in G for s, v in enumerate(R[rm][q])]
           for rm in R}
    return samples, judged, rms


def test_nan_judgement_drops_only_the_cells_that_need_it(caplog):
    samples, judged, rms = _nan_world()
    caplog.set_level(logging.WARNING, logger="prbench.downstream.bon")
    curves, table = bon.bon_curves(samples, judged, rms, [1, 2, 4], 4, "pol", n_boot=0)
    t = table[table.subset == bon.ALL_SUBSETS].set_index(["rm", "estimator", "k"])  # the pooled rows
    assert (table["judge_nan_samples"] == 1).all()  # one subset: its rows count what the pooled ones do
    # first_k: pick2 selects the unjudged sample of qa only at k=4 -> that one cell is dropped
    assert [t.loc[("pick2", "first_k", k), "n_questions"] for k in (1, 2, 4)] == [3, 3, 2]
    assert [t.loc[("pick2", "first_k", k), "judge_dropped"] for k in (1, 2, 4)] == [0, 0, 1]
    assert t.loc[("pick2", "first_k", 4), "mean"] == pytest.approx((2.0 + 2.0) / 2)  # qb s3, qc s0
    # pick1 never selects it under first_k: nothing dropped; the random reference (sample 0) neither
    assert (t.loc["pick1"].xs("first_k", level="estimator")["judge_dropped"] == 0).all()
    assert (t.loc["random"].xs("first_k", level="estimator")["judge_dropped"] == 0).all()
    # the rest of qa's curve stays, with the unjudged sample out of the win-rate reference pool
    qa = curves["pick2"].query("question_id == 'qa' and estimator == 'first_k'").set_index("k")
    assert qa.loc[1, "judge_score"] == 1.0 and qa.loc[2, "judge_score"] == 2.0 and np.isnan(qa.loc[4, "judge_score"])
    assert qa.loc[2, "win_vs_random"] == pytest.approx(5 / 6)  # 2.0 vs {1.0, 2.0, 0.0}, tie = half
    # expected: qa's pool is its 3 judged samples; k=4 > 3 is dropped for every selector
    qe = curves["pick2"].query("question_id == 'qa' and estimator == 'expected'").set_index("k")["judge_score"]
    assert qe[1] == pytest.approx(1.0) and qe[2] == pytest.approx(2.0 / 3) and np.isnan(qe[4])
    assert all(t.loc[(rm, "expected", 4), "judge_dropped"] == 1 for rm in ("pick1", "pick2", "oracle"))
    assert t.loc[("random", "expected", 4), "judge_dropped"] == 0  # uniform over the judged pool
    assert "1 of 12 samples (in 1 of 3 questions) have no judge score" in caplog.text
    assert t.loc[("pick2", "first_k_tieavg", 4), "judge_dropped"] == 1
    assert "pick2: 3 (question, estimator, k) cells dropped" in caplog.text  # the 3 estimators at k=4
    # the other questions' curves are exactly those of the same world with qa's sample judged
    full, _ = bon.bon_curves(*_nan_world(1.5), [1, 2, 4], 4, "pol", n_boot=0)
    for name in curves:
        a, b = (c[c.question_id != "qa"].reset_index(drop=True) for c in (curves[name], full[name]))
        pd.testing.assert_frame_equal(a, b)


def test_bon_csv_reports_dropped_cells(tmp_path):
    samples, judged, rms = _nan_world()
    for name, rows in [("samples", samples), ("judged", judged)] + list(rms.items()):
        write_jsonl(tmp_path / f"{name}.jsonl", rows)
    bon.bon_table({"pol": {"samples": tmp_path / "samples.jsonl", "judged": tmp_path / "judged.jsonl",
                           "rm_scores": {rm: tmp_path / f"{rm}.jsonl" for rm in rms}, "curves_dir": tmp_path / "c"}},
                  tmp_path / "bon.csv", ks=[1, 4], n=4, seed=0, n_boot=20)
    saved = pd.read_csv(tmp_path / "bon.csv")
    assert list(saved.columns) == bon.TABLE_COLUMNS
    rows = saved[(saved.rm == "pick2") & (saved.estimator == "first_k") & (saved.k == 4)]
    assert list(rows["subset"]) == ["all", "S"]  # the pooled row, then one per subset
    for _, row in rows.iterrows():
        assert (row["n_questions"], row["judge_dropped"], row["judge_nan_samples"]) == (2, 1, 1)
    assert pd.read_csv(tmp_path / "c" / "pick2.csv")["judge_score"].isna().sum() == 3  # 3 estimators at k=4


def test_all_unjudged_and_missing_rows_raise():
    samples, judged, rms = _world(n_q=4, n=4)
    with pytest.raises(ValueError, match="every sample's judge score is NaN"):
        bon.bon_curves(samples, [dict(j, score=None) for j in judged], rms, [1], 4, "pol", n_boot=0)
    with pytest.raises(ValueError, match="rm_scores/good.jsonl: missing 1"):
        bon.bon_curves(samples, judged, {"good": rms["good"][1:]}, [1], 4, "pol", n_boot=0)


def test_select_shard_merge(tmp_path):
    rows = [{"question_id": f"{s}-{i}", "subset": s, "question": "q?", "profile": []}
            for i in range(5) for s in ("A", "B")]
    sel = bon.select_questions(rows, 3)
    assert [r["question_id"] for r in sel] == ["A-0", "B-0", "A-1", "B-1", "A-2", "B-2"]
    shards = [bon.shard_rows(sel, i, 4) for i in range(4)]
    assert sum(shards, []) == sel
    with pytest.raises(ValueError, match="duplicate question_id"):
        bon.select_questions(rows + rows[:1], None)
    paths = []
    for i, part in enumerate(shards[::-1]):  # shards written in any order
        p = tmp_path / f"{i}.jsonl"
        write_jsonl(p, [{"question_id": r["question_id"], "subset": r["subset"], "sample_idx": j, "answer": "a"}
                        for r in part for j in (1, 0)])
        paths.append(str(p))
    bon.merge_samples(paths, tmp_path / "m.jsonl", n=2)
    merged = read_jsonl(tmp_path / "m.jsonl")
    assert [(r["question_id"], r["sample_idx"]) for r in merged] == sorted(
        (r["question_id"], j) for r in sel for j in (0, 1))
    with pytest.raises(ValueError, match="exactly bon.n=3"):
        bon.merge_samples(paths, tmp_path / "m2.jsonl", n=3)


class KeywordRM(RewardModel):
    """Scores answers by how many profile words they reuse; NaN for empty answers."""

    name = "kw"
    use_profile = True

    def score(self, requests):
        out = []
        for r in requests:
            if not r.answer:
                out.append(np.nan)
                continue
            words = set(" ".join(r.profile).lower().split())
            out.append(float(sum(w in words for w in r.answer.lower().split())))
        arr = np.array(out)
        return ScoreOutput(arr, int(np.isnan(arr).sum()))


class CountingJudge:
    judge_id = "counting"

    def __init__(self):
        self.calls = 0

    def judge(self, items):
        from prbench.judge import JudgeResult

        self.calls += len(items)
        return [JudgeResult(float(len(it.answer) % 3), [len(it.answer) % 3], 0) for it in items]


def test_stage_functions_end_to_end(tmp_path):
    prompts = [{"question_id": f"q{i}", "subset": "S", "question": f"question {i}?", "profile": ["i love jazz music"]}
               for i in range(3)]
    write_jsonl(tmp_path / "prompts.jsonl", prompts)
    answers = ["jazz music rocks", "", "hello", "love jazz"]
    samples = [{"question_id": p["question_id"], "subset": "S", "sample_idx": j, "answer": a}
               for p in prompts for j, a in enumerate(answers)]
    write_jsonl(tmp_path / "samples.jsonl", samples)
    keys = [{"pair_id": p["question_id"], "question_id": p["question_id"], "subset": "S",
             "rubric_aspects": [{"aspect": "likes jazz", "evidence": "", "reason": ""}], "narrative": ""}
            for p in prompts]
    write_jsonl(tmp_path / "keys.jsonl", keys)
    rep = bon.score_bon(tmp_path / "samples.jsonl", tmp_path / "prompts.jsonl", {"name": "kw"},
                        tmp_path / "kw.jsonl", rm=KeywordRM())
    assert rep["failures"] == 3
    scores = read_jsonl(tmp_path / "kw.jsonl")
    assert scores[0]["score"] == 2.0 and scores[1]["score"] is None
    judge = CountingJudge()
    bon.judge_bon(tmp_path / "samples.jsonl", tmp_path / "prompts.jsonl", tmp_path / "keys.jsonl", {}, 0,
                  tmp_path / "cache", tmp_path / "judged.jsonl", judge=judge)
    assert judge.calls == len(samples)  # question text differs per question: all unique
    bon.judge_bon(tmp_path / "samples.jsonl", tmp_path / "prompts.jsonl", tmp_path / "keys.jsonl", {}, 0,
                  tmp_path / "cache", tmp_path / "judged2.jsonl", judge=judge)
    assert judge.calls == len(samples)  # second run: all from the cache
    assert read_jsonl(tmp_path / "judged.jsonl") == read_jsonl(tmp_path / "judged2.jsonl")
    df = bon.bon_table({"pol": {"samples": tmp_path / "samples.jsonl", "judged": tmp_path / "judged.jsonl",
                                "rm_scores": {"kw": tmp_path / "kw.jsonl"}, "curves_dir": tmp_path / "curves"}},
                       tmp_path / "bon.csv", ks=[1, 2, 4], n=4, seed=0, n_boot=50)
    assert (tmp_path / "curves" / "kw.csv").exists() and (tmp_path / "curves" / "_oracle.csv").exists()
    assert set(df["rm"]) == {"kw", "oracle", "random"}
    assert df[(df.rm == "kw") & (df.estimator == "first_k_tieavg") & (df.k == 4)]["mean"].iloc[0] == pytest.approx(
        # samples 0 and 3 tie on 2 keywords: mean judge of len % 3 = (16 % 3 + 9 % 3) / 2
        0.5)
    # the authors' rule: the tie goes to the earliest sample (sample 0, 16 % 3 = 1)
    assert df[(df.rm == "kw") & (df.estimator == "first_k") & (df.k == 4)]["mean"].iloc[0] == pytest.approx(1.0)
