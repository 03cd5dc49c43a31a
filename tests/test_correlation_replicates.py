"""Replicates (BoN sample sets, PPO / GRPO training seeds) in the correlation stage's bootstrap: each
draw resamples a run's replicates (sample sets once for all RMs, training seeds per RM), then the
questions, and averages the drawn replicates' question means. With one replicate the numbers are
exactly those of the question-only bootstrap (a committed snapshot: a change detector); the permutation tests and the
nulls see the replicate mean only."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic_analysis import write_world

from prbench.analysis.correlation import (
    ReplicatedScore,
    collect,
    correlate,
    evaluate_scores,
    run_correlations,
)
from prbench.downstream import read_measures, write_measures
from prbench.io import write_csv
from prbench.seeding import stable_seed

FIXTURES = Path(__file__).parent / "fixtures" / "single_replicate"
N_BOOT, N_PERM, SEED = 60, 60, 3


def _world(root):
    return write_world(root, pairs_per_subset=8, eval_per_subset=5, general_pairs=16)


def _ppo(world) -> str:
    return next(p for m, p in world["downstream"] if m == "ppo")


def _run(world, ppo_table, **kw):
    col = collect(world["rms"], world["pair_files"], [("ppo", ppo_table)])
    return col, correlate(col, n_boot=kw.get("n_boot", N_BOOT), n_perm=N_PERM, seed=SEED, power_sims=0)


def _two_seeds(src, dst, shift: dict) -> str:
    """Replicate 0 = the table's values - shift[rm], replicate 1 = values + shift[rm]: the same
    per-RM means, strongly disagreeing seeds."""
    df = read_measures(src, "ppo")
    d = df["rm"].map(shift)
    write_measures(dst, pd.concat([df.assign(value=df["value"] - d, replicate=0),
                                   df.assign(value=df["value"] + d, replicate=1)]))
    return str(dst)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return _world(tmp_path_factory.mktemp("world"))


@pytest.fixture(scope="module")
def single(world):
    return _run(world, _ppo(world))


@pytest.fixture(scope="module")
def doubled(world, tmp_path_factory):
    shift = {rm: (0.4 if i % 2 else -0.3) for i, rm in enumerate(world["rms"])}
    return _run(world, _two_seeds(_ppo(world), tmp_path_factory.mktemp("r2") / "ppo.csv", shift))


def _same(got: pd.DataFrame, name: str, tmp_path):
    """The table as the stage writes it (12 significant digits) equals the snapshot byte for byte."""
    path = tmp_path / f"{name}.csv"
    write_csv(path, got, float_format="%.12g")
    assert path.read_text() == (FIXTURES / f"{name}.csv").read_text(), name


def test_change_detector_one_replicate_gives_exactly_the_question_bootstrap(single, tmp_path):
    """Change detector, not an independent check: the snapshot was written by the stage itself,
    before replicates entered the bootstrap, on this world (`_world`, PPO only, n_boot 60, n_perm 60,
    seed 3); the tables are unchanged but for the inputs' two new columns. Any change of a number
    fails it, right or wrong; the values themselves are checked independently elsewhere
    (test_wiring_values.py, test_correlation_recompute.py, test_correlation_inference.py). A
    deliberate change of the statistics rewrites the files under tests/fixtures/single_replicate/."""
    col, res = single
    _same(res.table, "correlations", tmp_path)
    _same(res.comparisons, "comparisons", tmp_path)
    _same(res.inputs.drop(columns=["n_replicates", "replicate_sd"]), "inputs", tmp_path)
    down = res.inputs[res.inputs["kind"] == "downstream"]
    assert (down["n_replicates"] == 1).all() and down["replicate_sd"].isna().all()
    assert res.inputs.loc[res.inputs["kind"] == "benchmark", "n_replicates"].isna().all()
    assert not any(isinstance(s, ReplicatedScore) for s in col.downstream)
    assert res.replicates == "Replicates per run: PPO 1 training seed."


def test_disagreeing_seeds_widen_the_cis_but_not_the_points_or_nulls(single, doubled):
    (_, r1), (col2, r2) = single, doubled
    assert all(isinstance(s, ReplicatedScore) and not s.shared for s in col2.downstream)
    down1 = r1.inputs[r1.inputs["kind"] == "downstream"].reset_index(drop=True)
    down2 = r2.inputs[r2.inputs["kind"] == "downstream"].reset_index(drop=True)
    # same per-RM means (mean of the two seeds' question means)
    np.testing.assert_allclose(down2["value"], down1["value"], atol=1e-11)
    width1, width2 = down1["ci_high"] - down1["ci_low"], down2["ci_high"] - down2["ci_low"]
    assert (width2 > width1 + 0.2).all()
    assert (down2["n_replicates"] == 2).all()
    # SD of the two seeds' means: |(m + d) - (m - d)| / sqrt(2) = sqrt(2) |d|
    shift = np.array([0.4 if i % 2 else -0.3 for i in range(len(col2.rms))])
    js = down2[down2["measure"] == "judge_score"]
    np.testing.assert_allclose(js["replicate_sd"], np.sqrt(2) * np.abs(shift), rtol=1e-9)
    # the coefficients' CIs widen; points, permutation p, nulls and leave-one-out stay
    t1, t2 = r1.table, r2.table
    for c in ("value", "p_perm", "null_mean", "null_q95", "p_null", "q_null", "value_norm", "loo_min", "loo_max"):
        np.testing.assert_allclose(t2[c].astype(float), t1[c].astype(float), atol=1e-11, equal_nan=True, err_msg=c)
    ok = t1["ci_low"].notna() & t2["ci_low"].notna()
    w1 = (t1["ci_high"] - t1["ci_low"])[ok]
    w2 = (t2["ci_high"] - t2["ci_low"])[ok]
    assert w2.mean() > w1.mean() + 0.1
    # the paired comparisons: same differences and swap p-values, wider CIs
    c1, c2 = r1.comparisons, r2.comparisons
    for c in ("value_a", "value_b", "diff", "p_perm", "p_williams", "loo_min", "loo_max"):
        np.testing.assert_allclose(c2[c].astype(float), c1[c].astype(float), atol=1e-11, equal_nan=True, err_msg=c)
    assert ((c2["ci_high"] - c2["ci_low"]).mean() > (c1["ci_high"] - c1["ci_low"]).mean())
    assert "PPO 2 training seeds (per RM" in r2.replicates
    assert "question sampling and, for PPO, the variation between replicates" in r2.summary
    assert "question sampling only." in r1.summary


def _one_question(tmp_path, method: str, values: dict) -> list[tuple[str, str]]:
    """A measure table with one question and R replicates per RM: values {rm: [v_0 .. v_R-1]}."""
    rows = [{"policy": "pol", "rm": rm, "method": method, "estimator": "e", "measure": "judge_score",
             "k": 4 if method == "bon" else None, "replicate": j, "question_id": "q0", "subset": "s", "value": v}
            for rm, vs in values.items() for j, v in enumerate(vs)]
    path = tmp_path / f"{method}.csv"
    write_measures(path, rows)
    return [(method, str(path))]


def test_bootstrap_of_independent_seeds_is_the_mean_of_resampled_seeds(tmp_path):
    """One question per RM: a draw is the mean of R seeds drawn with replacement, per RM with its own
    stream; its variance is the plug-in (R-1)/R s^2 / R."""
    rng = np.random.default_rng(11)
    values = {rm: rng.normal(0, 1 + i, 5) for i, rm in enumerate(["a", "b", "c"])}
    col = collect(list(values), [], _one_question(tmp_path, "ppo", values))
    n_boot = 20000
    _, (ev,) = evaluate_scores(col, n_boot, seed=7)
    for r, (rm, v) in enumerate(values.items()):
        draw = np.random.default_rng(stable_seed(7, "correlation-replicates", "ppo", "pol", rm))
        counts = draw.multinomial(len(v), np.full(len(v), 1 / len(v)), size=n_boot)
        np.testing.assert_allclose(ev.boot[:, r], counts @ v / len(v), rtol=1e-10)
        np.testing.assert_allclose(ev.point[r], v.mean(), rtol=1e-10)
        assert ev.replicate_sd[r] == pytest.approx(np.std(v, ddof=1))
        plug_in = (len(v) - 1) / len(v) * np.var(v, ddof=1) / len(v)
        assert ev.boot[:, r].var() == pytest.approx(plug_in, rel=0.05)
    # independent per RM: the RMs' draws are uncorrelated
    z = (ev.boot - ev.boot.mean(0)) / ev.boot.std(0)
    assert abs(np.mean(z[:, 0] * z[:, 1])) < 0.05


def test_bon_sample_sets_are_resampled_once_for_all_rms(tmp_path):
    """Sample sets are shared by every RM: one draw of set indices per bootstrap draw, applied to all."""
    values = {"a": np.array([0.1, 0.9, 0.4]), "b": np.array([1.0, 2.0, 3.0])}
    col = collect(list(values), [], _one_question(tmp_path, "bon", values))
    _, (ev,) = evaluate_scores(col, 500, seed=2)
    assert ev.score.shared
    draw = np.random.default_rng(stable_seed(2, "correlation-replicates", "bon", "pol"))
    counts = draw.multinomial(3, np.full(3, 1 / 3), size=500)
    for r, v in enumerate(values.values()):
        np.testing.assert_allclose(ev.boot[:, r], counts @ v / 3, rtol=1e-10)


def test_nan_only_replicate_is_left_out_of_the_mean_and_the_draws(tmp_path):
    values = {"a": [1.0, np.nan, 3.0], "b": [0.0, 1.0, 2.0]}
    col = collect(list(values), [], _one_question(tmp_path, "ppo", values))
    _, (ev,) = evaluate_scores(col, 200, seed=0)
    assert ev.point.tolist() == [2.0, 1.0]
    assert ev.score.n_rep.tolist() == [2, 3]  # replicates with a value
    assert np.isfinite(ev.boot).all()  # never a draw of the NaN seed alone
    assert set(np.round(ev.boot[:, 0], 9)) <= {1.0, 2.0, 3.0}  # two of {1, 3} drawn: means 1, 2 or 3
    assert ev.replicate_sd[0] == pytest.approx(np.std([1.0, 3.0], ddof=1))


def test_end_to_end_two_sample_sets_and_two_seeds(world, tmp_path):
    """run_correlations on BoN with sample sets 0, 1 and PPO with seeds 0, 1: the written inputs table
    holds each RM's mean over replicates and their SD, the summary says how many there are."""
    rng = np.random.default_rng(5)
    tables = []
    for method, path in world["downstream"]:
        df = read_measures(path, method)
        if method == "bon":  # one BoN cell keeps the test fast
            df = df[(df["estimator"] == "expected") & (df["measure"] == "judge_score") & (df["k"] == 16)]
        noise = rng.normal(0, 0.2, len(df))
        write_measures(tmp_path / f"{method}.csv", pd.concat([df, df.assign(replicate=1, value=df["value"] + noise)]))
        tables.append((method, str(tmp_path / f"{method}.csv")))
    out = tmp_path / "out"
    res = run_correlations(world["rms"], world["pair_files"], tables, out / "c.csv", out / "s.md", out / "i.csv",
                           n_boot=40, n_perm=40, rbo_p=0.9, ci=0.95, seed=0, power_sims=0)
    inputs = pd.read_csv(out / "i.csv")
    assert list(inputs.columns[-2:]) == ["n_replicates", "replicate_sd"]
    ppo = read_measures(tables[1][1], "ppo")
    per_rep = ppo[ppo["measure"] == "win_rate"].groupby(["rm", "replicate"])["value"].mean().unstack()
    got = inputs[(inputs["downstream"] == "ppo") & (inputs["measure"] == "win_rate")].set_index("rm")
    np.testing.assert_allclose(got.loc[per_rep.index, "value"], per_rep.mean(1), rtol=1e-11)
    np.testing.assert_allclose(got.loc[per_rep.index, "replicate_sd"], per_rep.std(1, ddof=1), rtol=1e-9)
    assert (inputs.loc[inputs["kind"] == "downstream", "n_replicates"] == 2).all()
    assert res.replicates == ("Replicates per run: BoN 2 sample sets (shared by all RMs, resampled once per "
                              "bootstrap draw), PPO 2 training seeds (per RM, resampled per RM in each bootstrap "
                              "draw).")
