"""The learning claim fixed in the config (`ppo.claim`, `grpo.claim`; prbench.downstream.claim): the
claim's RM gets claim.seeds training seeds and the other RMs `seeds`; tables/<method>_claim.csv gives
each seed's estimates and the pooled row the criterion is decided on, equal to the method table's row."""
import copy

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import REPO, dry_run, method_rms
from scipy import stats as sps
from test_policy_diff import _rollout_log
from test_seeds import _judged

from prbench.config import ConfigError
from prbench.downstream import claim_seeds
from prbench.downstream.claim import claim_rows, holds, write_claim_table
from prbench.downstream.evaluation import paired_diff, policy_table_rows
from prbench.downstream.reward_rise import reward_rise
from prbench.io import read_jsonl
from prbench.seeding import replicate_seed, stable_seed
from prbench.validation import check_config


def test_claim_seeds_raise_only_the_claims_rm():
    section = {"seeds": 1, "claim": {"rm": "a", "seeds": 3}}
    assert claim_seeds(section, "a") == 3 and claim_seeds(section, "b") == 1
    assert claim_seeds({"seeds": 4, "claim": {"rm": "a", "seeds": 3}}, "a") == 4  # never fewer than `seeds`
    assert claim_seeds({"claim": {"rm": "a"}}, "a") == 3  # the schema's default
    assert claim_seeds({"seeds": 2, "claim": None}, "a") == 2 and claim_seeds(None, "a") == 1


def test_holds_needs_both_lower_ends_above_zero():
    assert holds(0.001, 0.01)
    assert not holds(0.0, 0.5) and not holds(0.5, -0.01) and not holds(float("nan"), 1.0)
    assert not holds(1.0, float("nan"))


def _seed_files(tmp_path, rng, n_seeds=3, n_q=40, gain=0.3, rise=0.8):
    base = rng.integers(0, 3, n_q).astype(float) / 2
    judged, logs = {}, {}
    for r in range(n_seeds):
        scores = np.clip(base + rng.normal(gain, 0.4, n_q), 0, 1).round(2)
        scores[r] = np.nan  # an unscored answer: left out of that seed's pairs, never 0
        judged[r] = [_judged(tmp_path / f"j{r}.jsonl", scores, base)]
        per_step = [rng.normal(rise * s / 15, 1.0, 32) for s in range(16)]
        logs[r] = [_rollout_log(tmp_path / f"log{r}.csv", per_step)]
    return judged, logs


def test_claim_rows_per_seed_and_pooled_equal_the_method_table(tmp_path):
    judged, logs = _seed_files(tmp_path, np.random.default_rng(5))
    t = claim_rows(judged, logs, "pol", "rm", 300, 7, training_seeds={r: replicate_seed(7, "ppo-seed", r)
                                                                     for r in judged})
    assert t["seed"].tolist() == ["0", "1", "2", "pooled"]
    assert t["training_seed"].tolist()[:3] == [7, stable_seed(7, "ppo-seed", 1), stable_seed(7, "ppo-seed", 2)]
    boot = stable_seed(7, "ppo-table-diff", "pol", "rm")
    for r in range(3):
        row = t.iloc[r]
        d = paired_diff(pd.DataFrame(read_jsonl(judged[r][0])), 300, boot)
        assert (row.diff_base, row.diff_ci_low, row.diff_ci_high) == pytest.approx(
            (d["diff_base"], d["diff_ci_low"], d["diff_ci_high"]))
        assert (row.reward_rise, row.reward_rise_ci_low, row.reward_rise_ci_high) == pytest.approx(
            reward_rise(logs[r]))
        assert pd.isna(row.holds)  # a seed's row reports; the pooled row decides
    # the seed's diff by hand: the mean over the scored questions of (trained - base)
    one = pd.DataFrame(read_jsonl(judged[1][0]))
    ok = one["score"].notna()
    assert t.iloc[1].diff_base == pytest.approx((one.score[ok] - one.base_score[ok]).mean())
    # pooled = the method table's `all` row for this RM (the same functions and bootstrap seed)
    table = policy_table_rows({("pol", "rm", r): judged[r] for r in judged}, 300, 7,
                              train_logs={("pol", "rm", r): {"": logs[r][0]} for r in logs})
    all_row = table[table.subset == "all"].iloc[0]
    pooled = t.iloc[3]
    for col in ["diff_base", "diff_ci_low", "diff_ci_high", "reward_rise", "reward_rise_ci_low",
                "reward_rise_ci_high"]:
        assert pooled[col] == pytest.approx(all_row[col], rel=1e-12), col
    assert pooled.n_questions == all_row.n_questions == 40
    # the pooled reward rise against scipy over every seed's listed rollouts is in test_policy_diff; here
    # the claim holds: both pooled lower ends are above 0
    assert pooled.diff_ci_low > 0 and pooled.reward_rise_ci_low > 0 and bool(pooled.holds)


def test_claim_fails_when_the_reward_does_not_rise(tmp_path):
    judged, logs = _seed_files(tmp_path, np.random.default_rng(6), rise=0.0)
    pooled = claim_rows(judged, logs, "pol", "rm", 300, 0).iloc[-1]
    assert pooled.diff_ci_low > 0 and pooled.reward_rise_ci_low <= 0
    assert not pooled.holds


def test_claim_fails_when_the_judge_score_does_not_move(tmp_path):
    judged, logs = _seed_files(tmp_path, np.random.default_rng(7), gain=0.0)
    pooled = claim_rows(judged, logs, "pol", "rm", 300, 0).iloc[-1]
    assert pooled.diff_ci_low <= 0 < pooled.reward_rise_ci_low
    assert not pooled.holds


def test_write_claim_table_groups_runs_and_names_a_missing_seed(tmp_path):
    judged, logs = _seed_files(tmp_path, np.random.default_rng(8))
    runs = [["pol", "rm", "", r] for r in range(3)]
    out = tmp_path / "ppo_claim.csv"
    df = write_claim_table(runs, [judged[r][0] for r in range(3)], [logs[r][0] for r in range(3)], str(out), 200, 0)
    back = pd.read_csv(out, dtype={"seed": str})
    assert back["seed"].tolist() == ["0", "1", "2", "pooled"]
    assert back["holds"].isna().sum() == 3 and back["holds"].iloc[-1] == df["holds"].iloc[-1]
    with pytest.raises(ValueError, match=r"pol/rm: judged answers for seeds \[0, 1\] but training logs for \[0\]"):
        claim_rows({0: judged[0], 1: judged[1]}, {0: logs[0]}, "pol", "rm", 100, 0)


def test_pooled_rise_is_welch_over_all_seeds_rollouts(tmp_path):
    """The pooled interval is scipy's Welch interval over the seeds' listed first- and last-quarter rollouts."""
    rng = np.random.default_rng(9)
    logs, firsts, lasts = {}, [], []
    for r in range(3):
        per_step = [rng.normal(0.05 * s, 1.0, 16) for s in range(8)]
        logs[r] = [_rollout_log(tmp_path / f"l{r}.csv", per_step)]
        firsts += per_step[:2]
        lasts += per_step[-2:]
    judged, _ = _seed_files(tmp_path / "..", rng)
    t = claim_rows(judged, logs, "pol", "rm", 100, 0)
    a, b = np.concatenate(firsts), np.concatenate(lasts)
    ci = sps.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert (t.iloc[-1].reward_rise_ci_low, t.iloc[-1].reward_rise_ci_high) == pytest.approx((ci.low, ci.high))


def test_a_claim_names_one_of_the_methods_rms():
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    bad = copy.deepcopy(cfg)
    bad["ppo"]["claim"] = {"rm": "untrained", "seeds": 3}  # a downstream RM, but not one of ppo.rms
    with pytest.raises(ConfigError, match=r"config key ppo\.claim\.rm: 'untrained' is not one of the RMs ppo "
                                          r"trains with"):
        check_config(bad)
    bad["ppo"]["enabled"] = False  # a method that does not run: its claim decides nothing, no error
    check_config(bad)


@pytest.mark.dag
def test_the_demos_claim_adds_seeds_for_its_rm_only(tmp_path):
    """configs/demo.yaml's claims: the claim's RM trains and is evaluated claim.seeds times, the other RMs
    once; the claim table reads exactly the claim RM's runs; a method without a claim has neither."""
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    run = dry_run(workdir=tmp_path / "wd", configfile=REPO / "configs" / "demo.yaml")
    pol = list(cfg["policies"])[0]
    by_rule = {}
    for j in run.jobs:
        by_rule.setdefault(j.rule, []).append(j)
    claims = [m for m in ("ppo", "grpo") if cfg[m].get("claim")]
    assert "ppo" in claims  # the demo's PPO claim (perf/ppo_tune/README.md, "The demo's learning claim")
    for method in {"ppo", "grpo"} - set(claims):  # no claim: no extra seed, no claim table
        train_rule = {"ppo": "train_ppo", "grpo": "train_grpo"}[method]
        assert not by_rule.get(f"{train_rule}_seed")
        assert not [j for j in by_rule["claim_table"] if j.wildcards["method"] == method]
    for method in claims:
        train_rule = {"ppo": "train_ppo", "grpo": "train_grpo"}[method]
        claim = cfg[method]["claim"]
        rm, n = claim["rm"], claim["seeds"]
        assert n >= 3 and cfg[method]["seeds"] == 1
        seeds = sorted((j.wildcards["rm"], int(j.wildcards["rep"])) for j in by_rule[f"{train_rule}_seed"])
        assert seeds == [(rm, r) for r in range(1, n)]
        assert {j.wildcards["rm"] for j in by_rule[train_rule]} == set(method_rms(cfg, method))
        evals = {o for j in by_rule["eval_policy_seed"] for o in j.output if f"results/{method}/" in o}
        assert evals == {f"results/{method}/{pol}/{rm}/seed{r}/eval_judged.jsonl" for r in range(1, n)}
        (table,) = [j for j in by_rule["claim_table"] if j.wildcards["method"] == method]
        dirs = [f"results/{method}/{pol}/{rm}/{'' if r == 0 else f'seed{r}/'}" for r in range(n)]
        assert set(table.input) == {d + f for d in dirs for f in ("eval_judged.jsonl", "train_log.csv")}
        assert table.output == (f"results/tables/{method}_claim.csv",)
