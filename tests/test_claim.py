"""The learning claim fixed in the config (`ppo.claim`, `grpo.claim`; prbench.downstream.claim): the
claim's RM gets claim.seeds training seeds and the other RMs `seeds`; tables/<method>_claim.csv gives
each seed's estimates and the pooled row the criterion is decided on, whose intervals count the
training seeds as a random factor (checked against statsmodels' ANOVA, scipy's t tests, and their
coverage in worlds whose seeds differ)."""
import copy
from pathlib import Path

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
from prbench.downstream.claim import claim_rows, holds, pooled_judge_diff, pooled_rise, write_claim_table
from prbench.downstream.evaluation import policy_table_rows
from prbench.downstream.reward_rise import reward_rise, reward_rise_moments
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


def test_claim_rows_per_seed_and_pooled(tmp_path):
    judged, logs = _seed_files(tmp_path, np.random.default_rng(5))
    t = claim_rows(judged, logs, "pol", "rm", training_seeds={r: replicate_seed(7, "ppo-seed", r) for r in judged})
    assert t["seed"].tolist() == ["0", "1", "2", "pooled"]
    assert t["training_seed"].tolist()[:3] == [7, stable_seed(7, "ppo-seed", 1), stable_seed(7, "ppo-seed", 2)]
    for r in range(3):
        row = t.iloc[r]
        one = pd.DataFrame(read_jsonl(judged[r][0]))
        diffs = (one.score - one.base_score).dropna()  # an unscored answer is left out, never 0
        assert len(diffs) == 39 and row.n_questions == 40
        ci = sps.ttest_1samp(diffs, 0.0).confidence_interval(0.95)  # one seed: the paired t interval
        assert (row.diff_base, row.diff_ci_low, row.diff_ci_high) == pytest.approx((diffs.mean(), ci.low, ci.high))
        assert (row.reward_rise, row.reward_rise_ci_low, row.reward_rise_ci_high) == pytest.approx(
            reward_rise(logs[r]))
        assert pd.isna(row.holds)  # a seed's row reports; the pooled row decides
    # pooled: the method table's `all` estimate (per question the mean over the seeds that scored it)
    table = policy_table_rows({("pol", "rm", r): judged[r] for r in judged}, 300, 7,
                              train_logs={("pol", "rm", r): {"": logs[r][0]} for r in logs})
    all_row = table[table.subset == "all"].iloc[0]
    pooled = t.iloc[3]
    assert pooled.diff_base == pytest.approx(all_row.diff_base, rel=1e-12)
    assert pooled.n_questions == all_row.n_questions == 40
    assert pooled.reward_rise == pytest.approx(np.mean([reward_rise(logs[r])[0] for r in range(3)]))
    assert pooled.diff_ci_low > 0 and pooled.reward_rise_ci_low > 0 and bool(pooled.holds)


def _anova_interval(y: np.ndarray):
    """The pooled judge-score interval of a complete questions x seeds table, from statsmodels' two-way
    ANOVA (questions and seeds as factors, no interaction): the questions' part plus the seeds' main
    effect, Satterthwaite's degrees."""
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    Q, S = y.shape
    df = pd.DataFrame({"y": y.ravel(), "q": np.repeat(np.arange(Q), S), "s": np.tile(np.arange(S), Q)})
    aov = sm.stats.anova_lm(ols("y ~ C(q) + C(s)", data=df).fit())
    ms = aov["sum_sq"] / aov["df"]
    ms_q, ms_s, ms_r = ms["C(q)"], ms["C(s)"], ms["Residual"]
    parts = [(ms_q / (Q * S), Q - 1)]
    if ms_s > ms_r:  # the seeds' main effect estimated above 0
        parts += [(ms_s / (Q * S), S - 1), (-ms_r / (Q * S), (Q - 1) * (S - 1))]
    var = sum(v for v, _ in parts)
    dof = max(var ** 2 / sum(v ** 2 / d for v, d in parts), min(d for _, d in parts))
    half = sps.t.ppf(0.975, dof) * np.sqrt(var)
    return y.mean() - half, y.mean() + half


@pytest.mark.parametrize("seed_sd", [0.0, 0.15])
def test_pooled_judge_interval_is_the_two_way_anova_one(seed_sd):
    rng = np.random.default_rng(11)
    y = (rng.normal(0, 0.2, (30, 1)) + rng.normal(0, seed_sd, (1, 3)) + rng.normal(0.05, 0.3, (30, 3)))
    got = pooled_judge_diff(pd.DataFrame(y))
    low, high = _anova_interval(y)
    assert (got["diff_base"], got["diff_ci_low"], got["diff_ci_high"]) == pytest.approx((y.mean(), low, high))
    q_only = sps.ttest_1samp(y.mean(axis=1), 0.0).confidence_interval(0.95)
    if seed_sd:  # the seeds' spread widens the interval past the questions-only t interval
        assert got["diff_ci_high"] - got["diff_ci_low"] > 1.5 * (q_only.high - q_only.low)
    # seeds whose means are equal (MS_seed 0, below MS_residual): the questions-only t interval, never narrower
    flat = y - y.mean(axis=0, keepdims=True) + y.mean()
    got = pooled_judge_diff(pd.DataFrame(flat))
    ci = sps.ttest_1samp(flat.mean(axis=1), 0.0).confidence_interval(0.95)
    assert (got["diff_ci_low"], got["diff_ci_high"]) == pytest.approx((ci.low, ci.high))


def test_pooled_judge_interval_with_an_unscored_cell(caplog):
    """A question a seed did not score: its mean over the other seeds enters the questions' part, and the
    seeds' main effect is estimated on the questions every seed scored."""
    rng = np.random.default_rng(13)
    y = rng.normal(0, 0.2, (25, 1)) + np.array([[0.0, 0.2, -0.1]]) + rng.normal(0.05, 0.3, (25, 3))
    y[4, 1] = np.nan
    got = pooled_judge_diff(pd.DataFrame(y))
    per_q = np.nanmean(y, axis=1)
    full = np.delete(y, 4, axis=0)
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    df = pd.DataFrame({"y": full.ravel(), "q": np.repeat(np.arange(24), 3), "s": np.tile(np.arange(3), 24)})
    aov = sm.stats.anova_lm(ols("y ~ C(q) + C(s)", data=df).fit())
    ms = aov["sum_sq"] / aov["df"]
    assert ms["C(s)"] > ms["Residual"]
    parts = [(per_q.var(ddof=1) / 25, 24), (ms["C(s)"] / 72, 2), (-ms["Residual"] / 72, 46)]
    var = sum(v for v, _ in parts)
    dof = max(var ** 2 / sum(v ** 2 / d for v, d in parts), 2)
    half = sps.t.ppf(0.975, dof) * np.sqrt(var)
    assert (got["diff_base"], got["diff_ci_low"], got["diff_ci_high"]) == pytest.approx(
        (per_q.mean(), per_q.mean() - half, per_q.mean() + half))
    # two seeds but one question scored by both: the seeds' effect cannot be estimated, and that is said
    two = pd.DataFrame({"a": [0.1, np.nan, 0.3], "b": [0.2, 0.4, np.nan]})
    with caplog.at_level("WARNING", logger="prbench.downstream.claim"):
        got = pooled_judge_diff(two)
    assert "cannot be estimated" in caplog.text
    ci = sps.ttest_1samp([0.15, 0.4, 0.3], 0.0).confidence_interval(0.95)
    assert (got["diff_ci_low"], got["diff_ci_high"]) == pytest.approx((ci.low, ci.high))
    assert all(np.isnan([pooled_judge_diff(pd.DataFrame({"a": [0.2]}))[k] for k in ("diff_ci_low", "diff_ci_high")]))


def test_pooled_intervals_cover_in_worlds_whose_seeds_differ():
    """Simulated at the level the data are made: questions shared by the seeds (their base answers), a
    training seed's own gain (its main effect), and noise per question and seed. The questions-only
    interval (what the table's bootstrap gives) misses the true gain far more often than 5% when the
    seeds' gains differ; the claim's pooled intervals stay near their level, both sides."""
    rng = np.random.default_rng(12)
    worlds, Q, S, delta = 2000, 60, 3, 0.03
    miss, miss_q, miss_rise = 0, 0, 0
    for _ in range(worlds):
        y = (delta + rng.normal(0, 0.15, (Q, 1)) + rng.normal(0, 0.03, (1, S)) + rng.normal(0, 0.1, (Q, S)))
        d = pooled_judge_diff(pd.DataFrame(y))
        miss += not d["diff_ci_low"] < delta < d["diff_ci_high"]
        q_only = sps.ttest_1samp(y.mean(axis=1), 0.0).confidence_interval(0.95)
        miss_q += not q_only.low < delta < q_only.high
        # the reward side: each seed's rise with its Welch error (200 degrees), the seeds' own rises spread
        se = rng.uniform(0.05, 0.1, S)
        rises = [(delta + g + rng.normal(0, s), s, 200.0) for g, s in zip(rng.normal(0, 0.1, S), se)]
        est, lo, hi = pooled_rise(rises)
        miss_rise += not lo < delta < hi
    print(f"missed: pooled {miss}, questions only {miss_q}, reward side {miss_rise} of {worlds}")
    mc = 3 * np.sqrt(0.05 * 0.95 / worlds)
    for m in (miss, miss_rise):  # near the level on both sides: not too narrow, not too wide
        assert 0.05 - mc <= m / worlds <= 0.05 + mc, (miss, miss_rise)
    assert miss_q / worlds > 0.1, miss_q


def test_pooled_rise_is_the_t_interval_over_the_seeds_rises():
    rises = [(0.30, 0.10, 100.0), (0.25, 0.12, 80.0), (0.33, 0.09, 120.0)]
    ci = sps.ttest_1samp([0.30, 0.25, 0.33], 0.0).confidence_interval(0.95)
    assert pooled_rise(rises) == pytest.approx((np.mean([0.30, 0.25, 0.33]), ci.low, ci.high))
    assert all(np.isnan(pooled_rise([(0.3, 0.1, 50.0), (float("nan"), float("nan"), float("nan"))])))
    # one seed: its own Welch interval
    assert pooled_rise(rises[:1]) == pytest.approx((0.30, *(0.30 + np.array([-1, 1]) * sps.t.ppf(0.975, 100) * 0.1)))


def test_claim_fails_when_the_reward_does_not_rise(tmp_path):
    judged, logs = _seed_files(tmp_path, np.random.default_rng(6), rise=0.0)
    pooled = claim_rows(judged, logs, "pol", "rm").iloc[-1]
    assert pooled.diff_ci_low > 0 and pooled.reward_rise_ci_low <= 0
    assert not pooled.holds


def test_claim_fails_when_the_judge_score_does_not_move(tmp_path):
    judged, logs = _seed_files(tmp_path, np.random.default_rng(7), gain=0.0)
    pooled = claim_rows(judged, logs, "pol", "rm").iloc[-1]
    assert pooled.diff_ci_low <= 0 < pooled.reward_rise_ci_low
    assert not pooled.holds


def test_write_claim_table_groups_runs_and_names_a_missing_seed(tmp_path):
    judged, logs = _seed_files(tmp_path, np.random.default_rng(8))
    runs = [["pol", "rm", "", r] for r in range(3)]
    out = tmp_path / "ppo_claim.csv"
    df = write_claim_table(runs, [judged[r][0] for r in range(3)], [logs[r][0] for r in range(3)], str(out))
    back = pd.read_csv(out, dtype={"seed": str})
    assert back["seed"].tolist() == ["0", "1", "2", "pooled"]
    assert back["holds"].isna().sum() == 3 and back["holds"].iloc[-1] == df["holds"].iloc[-1]
    with pytest.raises(ValueError, match=r"pol/rm: judged answers for seeds \[0, 1\] but training logs for \[0\]"):
        claim_rows({0: judged[0], 1: judged[1]}, {0: logs[0]}, "pol", "rm")


def test_pooled_rise_reads_each_seeds_welch_moments(tmp_path):
    """The pooled reward side is built from each seed's rise and Welch error (`reward_rise_moments`), which
    are scipy's Welch test over the seed's listed first- and last-quarter rollouts."""
    rng = np.random.default_rng(9)
    logs, moments = {}, []
    for r in range(3):
        per_step = [rng.normal(0.05 * s, 1.0, 16) for s in range(8)]
        logs[r] = [_rollout_log(tmp_path / f"l{r}.csv", per_step)]
        res = sps.ttest_ind(np.concatenate(per_step[-2:]), np.concatenate(per_step[:2]), equal_var=False)
        rise, se, dof = reward_rise_moments(logs[r])
        assert (se, dof) == pytest.approx((rise / res.statistic, res.df))
        moments.append((rise, se, dof))
    (tmp_path / "j").mkdir()
    judged, _ = _seed_files(tmp_path / "j", rng)
    t = claim_rows(judged, logs, "pol", "rm")
    assert tuple(t.iloc[-1][["reward_rise", "reward_rise_ci_low", "reward_rise_ci_high"]]) == pytest.approx(
        pooled_rise(moments))


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


def test_the_tuning_sweeps_pool_reads_the_claims_rows(tmp_path, monkeypatch):
    """perf/ppo_tune/sweep.py's `pool` (the rounds' pooled seeds) calls the claim's own table."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sweep", REPO / "perf" / "ppo_tune" / "sweep.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    judged, logs = _seed_files(tmp_path, np.random.default_rng(14))
    for r in range(3):
        (tmp_path / f"run{r}").mkdir()
        Path(judged[r][0]).rename(tmp_path / f"run{r}" / "eval_model.jsonl")
        Path(logs[r][0]).rename(tmp_path / f"run{r}" / "train_log.csv")
    seeds = [10, 11, 12]
    monkeypatch.setattr(sweep, "run_dir", lambda row, seed: str(tmp_path / f"run{seed - 10}"))
    t = sweep.pool({"reward": "heads_k4_p050_n128_e30", "method": "ppo", "name": "x"}, seeds)
    direct = claim_rows({r: [tmp_path / f"run{r}" / "eval_model.jsonl"] for r in range(3)},
                        {r: [tmp_path / f"run{r}" / "train_log.csv"] for r in range(3)}, "demo_policy",
                        "heads_k4_p050_n128_e30", dict(enumerate(seeds)))
    pd.testing.assert_frame_equal(t, direct)
    assert t["training_seed"].tolist()[:3] == seeds
