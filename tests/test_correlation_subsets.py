"""correlation.per_subset: the coefficients per subset of the personalized benchmark
(correlations_by_subset.csv), exploratory beside the pooled headline: point values recomputed from the
files by hand for one subset, the pooled outputs (table, comparisons, verdict) unchanged by the key."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from synthetic_analysis import write_world

from prbench.analysis.correlation import SUBSET_COLUMNS, TABLE_COLUMNS, correlate_by_subset, run_correlations


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return write_world(tmp_path_factory.mktemp("world"), pairs_per_subset=24, eval_per_subset=12,
                       general_pairs=48)


@pytest.fixture(scope="module")
def by_subset(world):
    return correlate_by_subset(world["rms"], world["pair_files"], world["downstream"], n_boot=60, n_perm=60,
                               seed=0)


def test_rows_per_subset_and_their_benchmarks(world, by_subset):
    t = by_subset
    assert list(t.columns) == SUBSET_COLUMNS == ["subset", *TABLE_COLUMNS]
    subsets = sorted(set(t["subset"]))
    assert len(subsets) == 3
    for s in subsets:
        part = t[t.subset == s]
        # the subset's own personalized accuracy and each baseline's headline score, nothing else
        assert set(zip(part.benchmark, part.level, part.group)) == {("personalized", "subset", s),
                                                                     ("general", "overall", "overall")}
    assert t["q_null"].notna().any()


def test_point_values_recomputed_from_the_files_for_one_subset(world, by_subset):
    """Subset s: the accuracy over s's pairs and the BoN / PPO means over s's questions only,
    correlated with scipy, give the table's values."""
    s = sorted(set(by_subset["subset"]))[1]
    rms = world["rms"]
    acc, bon, ppo = {}, {}, {}
    for rm, bench, path in world["pair_files"]:
        if bench == "personalized":
            p = pd.read_json(path, lines=True)
            acc[rm] = p[p.subset == s]["correct"].mean()
    for _, rm, path in world["bon_files"]:
        c = pd.read_csv(path)
        bon[rm] = c[(c.subset == s) & (c.estimator == "expected") & (c.k == 16)]["judge_score"].mean()
    for _, rm, path in world["ppo_files"]:
        e = pd.read_json(path, lines=True)
        ppo[rm] = e[e.subset == s]["outcome"].mean()
    t = by_subset[(by_subset.subset == s) & (by_subset.benchmark == "personalized")]
    x = [acc[r] for r in rms]
    row = t[(t.downstream == "bon") & (t.estimator == "expected") & (t.measure == "judge_score") & (t.k == 16)]
    got = row.set_index("coefficient")["value"]
    assert got["spearman"] == pytest.approx(stats.spearmanr(x, [bon[r] for r in rms]).statistic)
    assert got["kendall_tau_b"] == pytest.approx(stats.kendalltau(x, [bon[r] for r in rms]).statistic)
    row = t[(t.downstream == "ppo") & (t.measure == "win_rate")].set_index("coefficient")["value"]
    assert row["spearman"] == pytest.approx(stats.spearmanr(x, [ppo[r] for r in rms]).statistic)
    assert np.isfinite(t["ci_low"]).any()


def test_the_key_leaves_the_pooled_outputs_and_the_verdict_alone(world, tmp_path):
    """per_subset true writes the exploratory table; correlations.csv, the comparisons (their verdicts
    on the pooled headline cells) and the summary are the same with it off, when the file has its
    header only."""
    outs = {}
    for flag in (False, True):
        out = tmp_path / str(flag)
        out.mkdir()
        run_correlations(world["rms"], world["pair_files"], world["downstream"], out / "c.csv", out / "s.md",
                         out / "i.csv", n_boot=40, n_perm=40, rbo_p=0.9, ci=0.95, seed=0,
                         out_comparisons=out / "cmp.csv", power_sims=0, per_subset=flag,
                         out_by_subset=out / "by_subset.csv")
        outs[flag] = out
    for name in ("c.csv", "s.md", "i.csv", "cmp.csv"):
        assert (outs[False] / name).read_bytes() == (outs[True] / name).read_bytes(), name
    assert pd.read_csv(outs[False] / "by_subset.csv").empty
    assert list(pd.read_csv(outs[False] / "by_subset.csv").columns) == SUBSET_COLUMNS
    sub = pd.read_csv(outs[True] / "by_subset.csv")
    assert len(sub) > 0 and set(sub["subset"]) != {"all"}
    cmp = pd.read_csv(outs[True] / "cmp.csv")
    assert not cmp["level_a"].isin(["subset"]).any()  # the comparisons read the headline scores only
