"""Correlation stage on synthetic inputs in the exact file formats of the scoring, BoN and PPO stages."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import REPO, dry_run
from scipy import stats
from synthetic_analysis import measure_tables, write_world

from prbench.analysis.correlation import TABLE_COLUMNS, collect, correlate, run_correlations


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return write_world(tmp_path_factory.mktemp("world"), pairs_per_subset=30, eval_per_subset=15,
                       general_pairs=60)


@pytest.fixture(scope="module")
def result(world):
    col = collect(world["rms"], world["pair_files"], world["downstream"])
    return col, correlate(col, n_boot=200, n_perm=300, rbo_p=0.9, ci=0.95, seed=0)


def test_table_shape_and_columns(result):
    col, res = result
    t = res.table
    assert list(t.columns) == TABLE_COLUMNS
    # personalized overall + 3 subsets, general overall + 4 sections
    assert len(col.benchmarks) == 1 + 3 + 1 + 4
    # BoN: 2 estimators x (2 measures x 5 ks + 2 AUCs); PPO: 2 measures
    assert len(col.downstream) == 2 * (2 * 5 + 2) + 2
    assert len(t) == len(col.benchmarks) * len(col.downstream) * 5
    assert set(t["coefficient"]) == {"spearman", "kendall_tau_b", "weighted_tau", "ndcg", "rbo"}
    assert (t["n_rms"] == 7).all()
    ok = t.dropna(subset=["value"])
    assert ok["value"].between(-1, 1).all()
    assert ok.loc[ok["coefficient"].isin(["ndcg", "rbo"]), "value"].between(0, 1).all()
    assert (t["ci_low"] <= t["ci_high"]).all()
    # permutation p-values only for rho and tau
    assert t.loc[t["coefficient"].isin(["spearman", "kendall_tau_b"]), "p_perm"].notna().all()
    assert t.loc[~t["coefficient"].isin(["spearman", "kendall_tau_b"]), "p_perm"].isna().all()


def test_point_values_match_direct_computation(world, result):
    """Accuracies straight from the pairs files and downstream means straight from the curves files,
    correlated with scipy, give the table's point values."""
    _, res = result
    acc, bon, ppo = {}, {}, {}
    for rm, bench, path in world["pair_files"]:
        if bench == "personalized":
            acc[rm] = pd.read_json(path, lines=True)["correct"].mean()
    for _, rm, path in world["bon_files"]:
        c = pd.read_csv(path)
        bon[rm] = c[(c.estimator == "expected") & (c.k == 16)]["judge_score"].mean()
    for _, rm, path in world["ppo_files"]:
        ppo[rm] = pd.read_json(path, lines=True)["outcome"].mean()
    rms = world["rms"]
    x = [acc[r] for r in rms]
    t = res.table
    sel = (t.benchmark == "personalized") & (t.level == "overall")
    row = t[sel & (t.downstream == "bon") & (t.estimator == "expected") & (t.measure == "judge_score") & (t.k == 16)]
    got = row.set_index("coefficient")["value"]
    assert got["spearman"] == pytest.approx(stats.spearmanr(x, [bon[r] for r in rms]).statistic)
    assert got["kendall_tau_b"] == pytest.approx(stats.kendalltau(x, [bon[r] for r in rms]).statistic)
    assert got["weighted_tau"] == pytest.approx(stats.weightedtau(x, [bon[r] for r in rms]).statistic)
    row = t[sel & (t.downstream == "ppo") & (t.measure == "win_rate")].set_index("coefficient")["value"]
    assert row["spearman"] == pytest.approx(stats.spearmanr(x, [ppo[r] for r in rms]).statistic)
    # the inputs table carries the same per-RM values
    inp = res.inputs
    a = inp[(inp.kind == "benchmark") & (inp.benchmark == "personalized") & (inp.level == "overall")]
    np.testing.assert_allclose(a.set_index("rm").loc[rms, "value"], x)


def test_auc_is_normalised_area_over_log2_k(world, result):
    _, res = result
    c = pd.read_csv(world["bon_files"][0][2])
    c = c[c.estimator == "expected"]
    means = c.groupby("k")["judge_score"].mean()
    lk = np.log2(means.index.to_numpy(dtype=float))
    expected = np.trapezoid(means.to_numpy(), lk) / (lk[-1] - lk[0])
    inp = res.inputs
    got = inp[(inp.kind == "downstream") & (inp.rm == world["bon_files"][0][1]) & (inp.measure == "auc_judge_score")
              & (inp.estimator == "expected")]["value"]
    assert got.iloc[0] == pytest.approx(expected)


def test_signal_is_recovered(result):
    """In the synthetic world the personalized skill drives downstream quality: the personalized
    benchmark must correlate strongly with BoN at k=16, and the summary must name it best."""
    _, res = result
    t = res.table
    r = t[(t.benchmark == "personalized") & (t.level == "overall") & (t.downstream == "bon")
          & (t.estimator == "expected") & (t.measure == "judge_score") & (t.k == 16)].set_index("coefficient")
    assert r.loc["spearman", "value"] > 0.8
    assert r.loc["spearman", "p_perm"] < 0.05
    assert "| BoN expected judge_score k=16 | 7 | personalized |" in res.summary


def test_bootstrap_is_deterministic_and_seeded(world):
    col = collect(world["rms"], world["pair_files"], world["downstream"][:1])
    a = correlate(col, n_boot=50, n_perm=50, seed=3).table
    b = correlate(col, n_boot=50, n_perm=50, seed=3).table
    c = correlate(col, n_boot=50, n_perm=50, seed=4).table
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_series_equal(a["value"], c["value"])  # point estimates do not depend on the seed
    assert not np.allclose(a["ci_low"].to_numpy(), c["ci_low"].to_numpy(), equal_nan=True)


def _write_joint_world(root: Path, n_rms=5, n_q=40, seed=0):
    """Downstream score of each RM on a question == its correctness on that question's pair."""
    rng = np.random.default_rng(seed)
    rms = [f"rm{i}" for i in range(n_rms)]
    pair_files, bon_files = [], []
    for r, rm in enumerate(rms):
        correct = rng.random(n_q) < 0.3 + 0.1 * r
        rows = [{"pair_id": f"p{q}", "question_id": f"q{q}", "subset": "S", "section": "S",
                 "score_chosen": 1.0, "score_rejected": 0.0, "pref": 0, "correct": bool(correct[q]),
                 "tie": False, "failure": False} for q in range(n_q)]
        p = root / f"{rm}.pairs.jsonl"
        p.write_text("".join(json.dumps(x) + "\n" for x in rows))
        pair_files.append((rm, "personalized", str(p)))
        curve = pd.DataFrame([{"question_id": f"q{q}", "subset": "S", "estimator": "expected", "k": k,
                               "judge_score": float(correct[q]), "win_vs_random": float(correct[q])}
                              for q in range(n_q) for k in (1, 2)])
        c = root / f"{rm}.csv"
        curve.to_csv(c, index=False)
        bon_files.append(("pol", rm, str(c)))
    return rms, pair_files, bon_files


def _tables(root, bon_files):
    return measure_tables(root, bon_files)


def test_questions_are_resampled_jointly(tmp_path):
    """Benchmark accuracy and downstream mean are the same per-question numbers here, so with joint
    resampling every replicate has identical rankings: rho = 1 in every replicate (CI [1, 1])."""
    rms, pair_files, bon_files = _write_joint_world(tmp_path)
    res = correlate(collect(rms, pair_files, _tables(tmp_path, bon_files)), n_boot=300, n_perm=100, seed=0)
    t = res.table
    rho = t[(t.coefficient == "spearman") & (t.level == "overall") & (t.measure == "judge_score") & (t.k == 2)]
    assert rho["value"].iloc[0] == pytest.approx(1.0)
    assert rho["ci_low"].iloc[0] == pytest.approx(1.0) and rho["ci_high"].iloc[0] == pytest.approx(1.0)
    # the bootstrap does move the accuracies themselves
    inp = res.inputs
    acc = inp[(inp.kind == "benchmark") & (inp.level == "overall")]
    assert (acc["ci_high"] - acc["ci_low"] > 0.05).all()


def test_bad_input_names_file_and_field(tmp_path, world):
    bad = tmp_path / "bad.pairs.jsonl"
    bad.write_text(json.dumps({"pair_id": "x", "question_id": "q", "subset": "S", "section": "S"}) + "\n")
    with pytest.raises(ValueError, match=r"bad\.pairs\.jsonl.*correct"):
        collect(["rm0"], [("rm0", "personalized", str(bad))])
    curves = tmp_path / "curves.csv"
    pd.DataFrame({"question_id": ["q"], "k": [1]}).to_csv(curves, index=False)
    with pytest.raises(ValueError, match=r"curves\.csv.*estimator"):
        measure_tables(tmp_path, [("demo_policy", world["rms"][0], str(curves))])
    with pytest.raises(ValueError, match="not among the configured"):
        collect(["other"], world["pair_files"][:1])
    # a measure table without a contract column, with an unconfigured RM, or missing a run
    table = tmp_path / "m.csv"
    pd.read_csv(world["downstream"][0][1]).drop(columns=["subset"]).to_csv(table, index=False)
    with pytest.raises(ValueError, match=r"m\.csv.*subset"):
        collect(world["rms"], world["pair_files"], [("bon", str(table))])
    with pytest.raises(ValueError, match=r"bon\.csv.*not among the configured"):
        collect(world["rms"][:3], [f for f in world["pair_files"] if f[0] in world["rms"][:3]], world["downstream"])
    with pytest.raises(ValueError, match=r"bon\.csv: no bon measures for run\(s\) \['other_policy/"):
        collect(world["rms"], world["pair_files"], world["downstream"], runs=[("other_policy", world["rms"][0])])


def test_unparseable_scores_are_counted_not_zeroed(tmp_path):
    rms, pair_files, bon_files = _write_joint_world(tmp_path, n_rms=3, n_q=10)
    c = pd.read_csv(bon_files[0][2])
    c.loc[c["question_id"] == "q0", "judge_score"] = np.nan
    c.to_csv(bon_files[0][2], index=False)
    col = collect(rms, pair_files, _tables(tmp_path, bon_files))
    assert any("without a judge score" in n for n in col.notes)
    res = correlate(col, n_boot=20, n_perm=10)
    inp = res.inputs
    v = inp[(inp.rm == rms[0]) & (inp.measure == "judge_score") & (inp.k == 1)]["value"].iloc[0]
    per_q = c[(c.k == 1)]["judge_score"]
    assert v == pytest.approx(per_q.mean(skipna=True))  # NaN skipped, not counted as 0
    assert "Data notes" in res.summary


def test_run_correlations_writes_outputs_without_ppo(tmp_path, world):
    out = tmp_path / "tables"
    res = run_correlations(world["rms"], world["pair_files"], world["downstream"][:1], out / "c.csv", out / "s.md",
                           out / "i.csv", n_boot=30, n_perm=30, rbo_p=0.9, ci=0.9, seed=0)
    t = pd.read_csv(out / "c.csv")
    assert len(t) == len(res.table) and "ppo" not in set(t["downstream"])
    assert (out / "s.md").read_text().startswith("# Which benchmark")
    assert set(pd.read_csv(out / "i.csv")["kind"]) == {"benchmark", "downstream"}


@pytest.mark.dag
def test_rules_dry_run_with_ppo_disabled(tmp_path, world):
    """The analysis rules build a DAG from the demo config with ppo.enabled false and ask for no PPO file."""
    import yaml
    from synthetic_analysis import demo_config_for_world

    cfg = demo_config_for_world(yaml.safe_load((REPO / "configs" / "demo.yaml").read_text()))
    cfg["ppo"]["enabled"] = False
    cfg["grpo"]["enabled"] = False
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "Snakefile").write_text(
        f'report: "{REPO}/report/workflow.rst"\n'
        f'include: "{REPO}/rules/common.smk"\ninclude: "{REPO}/rules/analysis.smk"\n'
        "rule all:\n    input: ALL_TARGETS\n    default_target: True\n")
    out = dry_run(snakefile=tmp_path / "Snakefile", configfile=tmp_path / "cfg.yaml", workdir=world["root"]).out
    assert "rule correlations" in out and "fig_training" not in out
    assert "eval_judged" not in out
