"""The wiring between the analysis' statistics checked against values derived independently of the
code under test (issue 35): each test recomputes its number by hand or with pandas / scipy from the
files the stage reads, never from a file the stage wrote about itself.

- pairwise ties carry half credit (`credit` 0.5 in the pairs files) into every benchmark score,
  pooled, per subset / section and official (`prbench.analysis.inputs._read_pairs`);
- a baseline with an official score is compared through that score, not its pooled accuracy
  (`comparison.headline_benchmarks`), RewardBench's formula written out by hand below;
- the question bootstrap resamples within each subset (`scores.Units.weights`).
"""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from synthetic_analysis import write_world

from prbench.analysis.comparison import headline_benchmarks
from prbench.analysis.correlation import collect, correlate
from prbench.analysis.scores import Units, evaluate_scores

RMS = [f"rm{i}" for i in range(6)]
# RewardBench subsets given to the general baseline's sections (prompt counts of the `filtered` split;
# math-prm, 447 prompts, weighs as the six hep-* subsets together: 6 x 164 = 984)
REAL = {"chat-sub": ["alpacaeval-easy", "mt-bench-med"], "chat_hard-sub": ["llmbar-natural"],
        "safety-sub": ["donotanswer", "xstest-should-respond"], "reasoning-sub": ["math-prm", "hep-go"]}
PROMPTS = {"alpacaeval-easy": 100, "mt-bench-med": 40, "llmbar-natural": 100, "donotanswer": 136,
           "xstest-should-respond": 250, "math-prm": 984, "hep-go": 164}
SECTIONS = {"chat": ["alpacaeval-easy", "mt-bench-med"], "chat_hard": ["llmbar-natural"],
            "safety": ["donotanswer", "xstest-should-respond"], "reasoning": ["math-prm", "hep-go"]}


def _pairs(world) -> pd.DataFrame:
    frames = []
    for rm, bench, path in world["pair_files"]:
        frames.append(pd.read_json(path, lines=True).assign(rm=rm, bench=bench))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Pairs with `credit` (ties at 0.5); the general baseline in RewardBench's real subset names."""
    root = tmp_path_factory.mktemp("credit")
    w = write_world(root, rms=RMS, pairs_per_subset=30, eval_per_subset=5, general_pairs=84, ppo=False, credit=True)
    for _, bench, path in w["pair_files"]:
        if bench != "general":
            continue
        rows = [json.loads(ln) for ln in Path(path).read_text().splitlines()]
        seen = {}
        for r in rows:
            names = REAL[r["subset"]]
            j = seen[r["subset"]] = seen.get(r["subset"], -1) + 1
            r["subset"] = names[j % len(names)]
        Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return w


@pytest.fixture(scope="module")
def evaluated(world):
    col = collect(world["rms"], world["pair_files"], world["downstream"], bench_kinds={"general": "rewardbench"})
    bench, down = evaluate_scores(col, n_boot=0, seed=0)
    return col, bench, down


def _point(bench, **key):
    (e,) = [e for e in bench if all(e.score.key[k] == v for k, v in key.items())]
    return e.point


def test_the_world_has_ties_with_half_credit(world):
    df = _pairs(world)
    ties = df[df["tie"]]
    assert len(ties) >= 5 and (ties["credit"] == 0.5).all() and (~ties["correct"]).all()
    assert ((df["credit"] == 1.0) == df["correct"]).all()


def test_benchmark_scores_are_mean_credit_with_half_for_ties(world, evaluated):
    """Every pooled, per-subset and per-section score is the mean of the pairs' `credit` (pandas, from
    the pairs files); strict correctness would give another number wherever an RM has a tie."""
    _, bench, _ = evaluated
    df = _pairs(world)
    differs = 0
    for b, level, col_name in (("personalized", "overall", None), ("personalized", "subset", "subset"),
                               ("general", "overall", None), ("general", "section", "section")):
        sub = df[df["bench"] == b]
        groups = [("overall", sub)] if col_name is None else list(sub.groupby(col_name))
        for g, part in groups:
            want = part.groupby("rm")["credit"].mean().reindex(RMS).to_numpy()
            strict = part.groupby("rm")["correct"].mean().reindex(RMS).to_numpy()
            got = _point(bench, benchmark=b, level=level, group=str(g))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=f"{b} {level} {g}")
            differs += int(np.any(np.abs(want - strict) > 1e-9))
    assert differs >= 3  # the check can tell half credit from strict correctness


def test_correlations_use_the_credit_accuracies(world):
    """The stage's coefficient for personalized accuracy vs BoN judge score (expected, k=16) equals
    scipy's Spearman of mean credit (pairs files) against the curve files' means."""
    col = collect(world["rms"], world["pair_files"], world["downstream"])
    res = correlate(col, n_boot=10, n_perm=20, seed=0, power_sims=0)
    df = _pairs(world)
    x = df[df["bench"] == "personalized"].groupby("rm")["credit"].mean().reindex(RMS).to_numpy()
    bon = {}
    for _, rm, path in world["bon_files"]:
        c = pd.read_csv(path)
        bon[rm] = c[(c.estimator == "expected") & (c.k == 16)]["judge_score"].mean()
    y = [bon[rm] for rm in RMS]
    t = res.table
    row = t[(t.benchmark == "personalized") & (t.level == "overall") & (t.downstream == "bon")
            & (t.estimator == "expected") & (t.measure == "judge_score") & (t.k == 16)
            & (t.coefficient == "spearman")]
    assert row["value"].iloc[0] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    inp = res.inputs
    acc = inp[(inp.kind == "benchmark") & (inp.benchmark == "personalized") & (inp.level == "overall")]
    np.testing.assert_allclose(acc.set_index("rm").loc[RMS, "value"].to_numpy(), x, atol=1e-12)


def _rewardbench_by_hand(pairs: pd.DataFrame) -> np.ndarray:
    """RewardBench's official score per RM: per section the prompt-weighted mean of its subsets'
    accuracies (mean credit), then the plain mean of the four sections."""
    out = []
    for rm in RMS:
        part = pairs[pairs["rm"] == rm]
        acc = part.groupby("subset")["credit"].mean()
        secs = [sum(PROMPTS[s] * acc[s] for s in subs) / sum(PROMPTS[s] for s in subs) for subs in SECTIONS.values()]
        out.append(np.mean(secs))
    return np.array(out)


def test_baseline_headline_is_its_official_score(world, evaluated):
    """headline_benchmarks picks the general baseline's official RewardBench score (by hand here),
    which differs from its pooled accuracy, and the personalized benchmark's pooled accuracy."""
    _, bench, _ = evaluated
    df = _pairs(world)
    gen = df[df["bench"] == "general"]
    official = _rewardbench_by_hand(gen)
    pooled = gen.groupby("rm")["credit"].mean().reindex(RMS).to_numpy()
    assert np.max(np.abs(official - pooled)) > 0.01  # the two are distinguishable
    assert stats.spearmanr(official, pooled).statistic < 1  # ... even in their ranking of the RMs
    heads = headline_benchmarks(bench)
    by_bench = {e.score.key["benchmark"]: e for e in heads}
    assert sorted(by_bench) == ["general", "personalized"] and len(heads) == 2
    g = by_bench["general"]
    assert g.score.key["level"] == "official" and g.score.key["group"] == "overall"
    np.testing.assert_allclose(g.point, official, rtol=0, atol=1e-12)
    p = by_bench["personalized"]
    assert p.score.key["level"] == "overall"
    pers = df[df["bench"] == "personalized"].groupby("rm")["credit"].mean().reindex(RMS).to_numpy()
    np.testing.assert_allclose(p.point, pers, rtol=0, atol=1e-12)
    # without a kind that has an official score, the baseline's headline is its pooled accuracy
    col = collect(world["rms"], world["pair_files"], world["downstream"])
    heads = {e.score.key["benchmark"]: e for e in headline_benchmarks(evaluate_scores(col, 0, 0)[0])}
    assert heads["general"].score.key["level"] == "overall"
    np.testing.assert_allclose(heads["general"].point, pooled, rtol=0, atol=1e-12)


def test_bootstrap_resamples_questions_within_each_subset():
    """Every replicate's weights keep each subset's question count (multinomial within the subset),
    are whole counts, and draw every question of a subset equally often on average."""
    units = Units("personalized")
    sizes = {"A": 3, "B": 7, "C": 12}
    order = [s for i in range(12) for s in sizes if i < sizes[s]]  # subsets interleaved
    for i, s in enumerate(order):
        units.add(f"q{i}", s)
    w = units.weights(4000, seed=3)
    assert w.shape == (4000, len(order))
    assert np.array_equal(w, np.round(w)) and (w >= 0).all()
    subset = np.array(order)
    for s, n in sizes.items():
        cols = w[:, subset == s]
        assert (cols.sum(axis=1) == n).all(), s
        # multinomial(n, 1/n): each count has mean 1 and variance 1 - 1/n
        assert cols.mean() == pytest.approx(1.0, abs=0.03)
        assert cols.var() == pytest.approx(1 - 1 / n, abs=0.06)
    assert np.array_equal(w, units.weights(4000, seed=3))
    assert not np.array_equal(w, units.weights(4000, seed=4))


def test_run_tables_recomputed_from_the_run_files(world):
    """The checks tests/test_e2e.py runs on the demo-config run (tests/run_values.py), on this world
    written in the run's file layout: the rule's entry point writes correlations.csv and
    correlation_inputs.csv, the scoring stage's functions benchmark_accuracy.csv; each Spearman of
    personalized accuracy vs a BoN judge score, the inputs and the official scores are recomputed from
    the pairs files and results/downstream/bon.csv with pandas, scipy and RewardBench's formula."""
    import run_values as rv

    from prbench.analysis.correlation import run_correlations
    from prbench.io import read_jsonl
    from prbench.scoring.benchmark import accuracy_rows, add_official, summarize

    root = Path(world["root"])
    tables = root / "results" / "tables"
    run_correlations(world["rms"], world["pair_files"], world["downstream"], tables / "correlations.csv",
                     tables / "correlation_summary.md", tables / "correlation_inputs.csv", n_boot=10, n_perm=20,
                     rbo_p=0.9, ci=0.95, seed=0, bench_kinds={"general": "rewardbench"}, power_sims=0)
    rows = []
    for rm, bench, path in world["pair_files"]:
        results = read_jsonl(path)
        summary = summarize(results, rm, bench, 0, 0)
        add_official(summary, "rewardbench" if bench == "general" else None, results, 0, 0)
        rows += accuracy_rows(summary)
    pd.DataFrame(rows).to_csv(tables / "benchmark_accuracy.csv", index=False)

    assert rv.check_bon_spearman(root, RMS) >= 8  # expected and first_k at k = 2..16 (k=1 ties: NaN)
    rv.check_inputs(root, RMS, "general")
    both = rv.check_official_table(root, RMS, "general")
    assert np.max(np.abs(both[:, 0] - both[:, 1])) > 0.01  # official, not pooled, is what was checked
