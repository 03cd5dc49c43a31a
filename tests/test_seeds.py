"""Replicates (issue 22, "Seeds"): BoN sample sets (`bon.sample_sets`) and PPO / GRPO training seeds
(`ppo.seeds`, `grpo.seeds`). The measure table carries `replicate`; the tables average over the
replicates; replicate 0 keeps the single-replicate paths and seed; the DAG gains one job per extra
replicate under set{r}/ and seed{r}/."""
import copy

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import REPO, config_rms, dry_run, method_rms
from test_bon import _world

from prbench import downstream
from prbench.downstream import bon
from prbench.downstream.evaluation import outcome, policy_table_rows
from prbench.io import read_jsonl, write_jsonl
from prbench.seeding import replicate_seed, stable_seed

nan = float("nan")


def _judged(path, scores, base):
    rows = [{"question_id": f"q{i}", "subset": "A" if i % 2 else "B", "answer": "x", "score": s, "base_score": b,
             "outcome": outcome(s, b), "judge_failures": int(not np.isfinite(s)) + int(not np.isfinite(b))}
            for i, (s, b) in enumerate(zip(scores, base))]
    write_jsonl(path, rows)
    return path


def test_replicate_seeds():
    assert replicate_seed(7, "ppo-seed", 0) == 7  # replicate 0: the run's own seed, unchanged
    assert replicate_seed(7, "ppo-seed", 1) == stable_seed(7, "ppo-seed", 1)
    seeds = {replicate_seed(7, t, r) for t in ("ppo-seed", "grpo-seed", "bon-sample-set") for r in (1, 2)}
    assert len(seeds) == 6 and 7 not in seeds
    with pytest.raises(ValueError, match="replicate -1"):
        replicate_seed(7, "ppo-seed", -1)


def test_judged_measures_carry_the_replicate(tmp_path):
    base = [1.0, 1.0, 1.0, 1.0]
    s0 = _judged(tmp_path / "s0.jsonl", [2.0, 0.0, 1.0, nan], base)
    s1 = _judged(tmp_path / "s1.jsonl", [0.0, 2.0, 1.0, 1.0], base)
    df = downstream.judged_measures("ppo", {("pol", "rm", 0): s0, ("pol", "rm", 1): [s1]})
    assert list(df.columns) == downstream.MEASURE_COLUMNS
    assert downstream.MEASURE_COLUMNS.index("replicate") == downstream.MEASURE_COLUMNS.index("k") + 1
    assert df.groupby("replicate").size().to_dict() == {0: 8, 1: 8}  # 4 questions x (judge_score, win_rate)
    js = df[df.measure == "judge_score"].pivot(index="question_id", columns="replicate", values="value")
    np.testing.assert_array_equal(js[1].to_numpy(), [0.0, 2.0, 1.0, 1.0])
    assert np.isnan(js.loc["q3", 0])  # unscored stays NaN, never 0
    # a (policy, rm) key is replicate 0: the single-seed table is unchanged but for the column of zeros
    single = downstream.judged_measures("ppo", {("pol", "rm"): s0})
    pd.testing.assert_frame_equal(single, df[df.replicate == 0].reset_index(drop=True))
    downstream.write_measures(tmp_path / "m.csv", df)
    back = downstream.read_measures(tmp_path / "m.csv", "ppo")
    assert back["replicate"].tolist() == df["replicate"].tolist()
    assert back["replicate"].dtype.kind == "i"


def test_rows_without_replicate_are_replicate_zero_and_bad_ones_are_named(tmp_path):
    rows = [{"policy": "p", "rm": "r", "method": "m", "estimator": "", "measure": "judge_score", "k": None,
             "question_id": "q", "subset": "S", "value": 1.0}]
    assert downstream.measure_frame(rows)["replicate"].tolist() == [0]
    p = tmp_path / "bad.csv"
    downstream.write_measures(p, rows)
    pd.read_csv(p).assign(replicate=-1).to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"bad\.csv: column 'replicate' must hold integers >= 0"):
        downstream.read_measures(p)
    pd.read_csv(p).drop(columns=["replicate"]).to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"bad\.csv: downstream measure table lacks column\(s\) \['replicate'\]"):
        downstream.read_measures(p)


def test_policy_table_is_the_mean_over_seeds(tmp_path):
    base = [1.0, 1.0, 1.0, 1.0]
    s0 = _judged(tmp_path / "s0.jsonl", [2.0, 0.0, 1.0, 0.5], base)
    s1 = _judged(tmp_path / "s1.jsonl", [0.0, 2.0, 1.0, nan], base)
    one = policy_table_rows({("pol", "rm"): s0}, 100, 0)
    pd.testing.assert_frame_equal(one, policy_table_rows({("pol", "rm", 0): s0}, 100, 0))
    two = policy_table_rows({("pol", "rm", 0): s0, ("pol", "rm", 1): s1}, 100, 0)
    row = two[two.subset == "all"].iloc[0]
    assert row["n_questions"] == 4
    # each question's mean over the seeds that scored it, then the mean over questions
    assert row["mean"] == pytest.approx(np.mean([1.0, 1.0, 1.0, 0.5]))
    assert row["base_mean"] == pytest.approx(1.0)
    # pooled comparisons: seed 0 W L T L, seed 1 L W T (NaN left out) -> 2 wins of 7
    assert row["win_rate"] == pytest.approx(2 / 7) and row["tie_rate"] == pytest.approx(2 / 7)
    assert row["judge_failures"] == 1
    assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    assert set(two["subset"]) == {"all", "A", "B"}


def _write_set(tmp_path, name, seed):
    samples, judged, rms = _world(n_q=10, n=4, seed=seed)
    d = tmp_path / name
    d.mkdir()
    write_jsonl(d / "samples.jsonl", samples)
    write_jsonl(d / "judged.jsonl", judged)
    paths = {}
    for rm, rows in rms.items():
        write_jsonl(d / f"{rm}.jsonl", rows)
        paths[rm] = d / f"{rm}.jsonl"
    return {"samples": d / "samples.jsonl", "judged": d / "judged.jsonl", "rm_scores": paths,
            "curves_dir": d / "curves"}


def _drop_scores(path, every):
    """Blank every `every`-th row's score (a judge parse failure / an RM failure); returns how many."""
    rows = read_jsonl(path)
    for i, r in enumerate(rows):
        if i % every == 1:
            r["score"] = None
    write_jsonl(path, rows)
    return sum(r["score"] is None for r in rows)


def test_bon_table_over_sample_sets(tmp_path):
    s0, s1 = _write_set(tmp_path, "set0", 0), _write_set(tmp_path, "set1", 1)
    # set 1 has judge failures and more RM failures than set 0: every count differs between the sets
    judge_nan = [0, _drop_scores(s1["judged"], 7)]
    flaky_nan = [sum(r["score"] is None for r in read_jsonl(s["rm_scores"]["flaky"])) for s in (s0, s1)]
    flaky_nan[1] = _drop_scores(s1["rm_scores"]["flaky"], 5)
    assert judge_nan[1] > 0 and flaky_nan[1] > flaky_nan[0] > 0
    ks = [1, 2, 4]
    single = bon.bon_table({"pol": s0}, tmp_path / "one.csv", ks=ks, n=4, seed=0, n_boot=50)
    listed = bon.bon_table({"pol": [s0]}, tmp_path / "one_list.csv", ks=ks, n=4, seed=0, n_boot=50)
    pd.testing.assert_frame_equal(single, listed)  # one set: the single-set table, unchanged
    second = bon.bon_table({"pol": s1}, tmp_path / "second.csv", ks=ks, n=4, seed=0, n_boot=50)
    both = bon.bon_table({"pol": [s0, s1]}, tmp_path / "two.csv", ks=ks, n=4, seed=0, n_boot=50)
    assert len(both) == len(single) and list(both.columns) == list(single.columns)
    assert (tmp_path / "set1" / "curves" / "good.csv").exists()
    # recomputed from the curve files: per question, the mean over the sets where the cell is defined
    for rm, est, k in [("good", "expected", 2), ("flaky", "first_k", 4), ("oracle", "first_k_tieavg", 2)]:
        name = {"oracle": "_oracle"}.get(rm, rm)
        per_set = []
        for s in (s0, s1):
            c = pd.read_csv(s["curves_dir"] / f"{name}.csv")
            per_set.append(c[(c.estimator == est) & (c.k == k)].set_index("question_id")["judge_score"])
        want = pd.concat(per_set, axis=1).mean(axis=1, skipna=True).dropna()
        row = both[(both.rm == rm) & (both.estimator == est) & (both.k == k)].iloc[0]
        assert row["mean"] == pytest.approx(want.mean()) and row["n_questions"] == len(want)
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
        # counts summed over the sets: RM and judge failures counted in the input files, the dropped
        # questions as each set's own table has them
        assert row["rm_failures"] == (sum(flaky_nan) if rm == "flaky" else 0)
        assert row["judge_nan_samples"] == sum(judge_nan) == row["judge_failed_samples"]
        dropped = [t[(t.rm == rm) & (t.estimator == est) & (t.k == k)].iloc[0]["judge_dropped"]
                   for t in (single, second)]
        assert row["judge_dropped"] == sum(dropped)
    assert (both["judge_dropped"] > 0).any()
    # bon_measures: one replicate per set, values = each set's curve
    m = bon.write_bon_measures({("pol", "good", 0): s0["curves_dir"] / "good.csv",
                                ("pol", "good", 1): s1["curves_dir"] / "good.csv"}, tmp_path / "bon_m.csv")
    assert sorted(set(m["replicate"])) == [0, 1]
    got = m[(m.replicate == 1) & (m.estimator == "expected") & (m.measure == "judge_score") & (m.k == 2)]
    c1 = pd.read_csv(s1["curves_dir"] / "good.csv")
    np.testing.assert_allclose(got["value"].to_numpy(),
                               c1[(c1.estimator == "expected") & (c1.k == 2)]["judge_score"].to_numpy())


@pytest.mark.dag
def test_two_seeds_per_subset_dag(tmp_path):
    """ppo.per_subset with ppo.seeds 2, grpo.seeds 2, bon.sample_sets 2: one extra training, evaluation
    and sample set per run under seed1/ and set1/, seeded apart, read by the tables; seed 0 keeps its paths."""
    cfg = copy.deepcopy(yaml.safe_load((REPO / "configs" / "demo.yaml").read_text()))
    cfg["ppo"].update(per_subset=True, seeds=2)
    cfg["grpo"]["seeds"] = 2
    for method in ("ppo", "grpo"):  # every run 2 seeds here; a claim's extra seeds: tests/test_claim.py
        cfg[method].pop("claim", None)
    cfg["bon"]["sample_sets"] = 2
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run = dry_run(workdir=tmp_path / "wd", configfile=path)
    pol, subsets = list(cfg["policies"])[0], cfg["data"]["personalized"]["subsets"]
    rms, grpo_rms = method_rms(cfg, "ppo"), method_rms(cfg, "grpo")  # ppo.rms, grpo.rms
    everyone = config_rms(cfg)  # BoN: every RM, the family's members included
    by_rule = {}
    for j in run.jobs:
        by_rule.setdefault(j.rule, []).append(j)
    seed_runs = {(j.wildcards["rm"], j.wildcards["subset"]) for j in by_rule["train_ppo_subset_seed"]}
    assert seed_runs == {(r, s) for r in rms for s in subsets}
    assert {o for j in by_rule["train_ppo_subset"] for o in j.output if o.endswith("/model")} == {
        f"results/ppo/{pol}/{r}/{s}/model" for r in rms for s in subsets}  # seed 0: today's path
    assert {o for j in by_rule["train_ppo_subset_seed"] for o in j.output if o.endswith("/model")} == {
        f"results/ppo/{pol}/{r}/{s}/seed1/model" for r in rms for s in subsets}
    assert {o for j in by_rule["train_grpo_seed"] for o in j.output if o.endswith("/model")} == {
        f"results/grpo/{pol}/{r}/seed1/model" for r in grpo_rms}
    evals = {o for j in by_rule["eval_policy_subset_seed"] + by_rule["eval_policy_seed"] for o in j.output}
    assert evals == ({f"results/ppo/{pol}/{r}/{s}/seed1/eval_judged.jsonl" for r in rms for s in subsets}
                     | {f"results/grpo/{pol}/{r}/seed1/eval_judged.jsonl" for r in grpo_rms})
    ppo_judged = {f"results/ppo/{pol}/{r}/{s}/{d}eval_judged.jsonl"
                  for r in rms for s in subsets for d in ("", "seed1/")}
    (table,) = by_rule["ppo_table"]
    # every run's judged answers and its training log (the reward rise), seed 1 included
    assert set(table.input) == ppo_judged | {p.replace("eval_judged.jsonl", "train_log.csv") for p in ppo_judged}
    measures = {j.wildcards["method"]: set(j.input) for j in by_rule["judged_measures"]}
    assert measures["ppo"] == ppo_judged
    assert measures["grpo"] == {f"results/grpo/{pol}/{r}/{d}eval_judged.jsonl" for r in grpo_rms
                                for d in ("", "seed1/")}
    # BoN: a second sample set, sampled, judged and scored by every RM, read by both BoN tables
    assert len(by_rule["sample_bon_set"]) == cfg["bon"]["shards"]
    assert {j.output[0] for j in by_rule["merge_samples_set"]} == {f"results/bon/{pol}/set1/samples.jsonl"}
    assert {j.output[0] for j in by_rule["judge_bon_set"]} == {f"results/bon/{pol}/set1/judged.jsonl"}
    set1 = {o for rule, jobs in by_rule.items() if rule == "score_bon_set" or rule.startswith("score_bon_family_")
            for j in jobs for o in j.output if "/set1/" in o}
    assert set1 == {f"results/bon/{pol}/set1/rm_scores/{r}.jsonl" for r in everyone}
    (bm,) = by_rule["bon_measures"]
    assert set(bm.input) == {f"results/bon/{pol}/{d}curves/{r}.csv" for r in everyone for d in ("", "set1/")}
    (bt,) = by_rule["bon_table"]
    assert f"results/bon/{pol}/set1/judged.jsonl" in bt.input and f"results/bon/{pol}/judged.jsonl" in bt.input
