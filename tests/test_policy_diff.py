"""tables/{ppo,grpo}.csv: the paired difference to the base policy (diff_base, diff_ci_low/high) and
the reward rise of the training log (reward_rise, reward_rise_ci_low/high), checked against values
computed here by hand or with numpy directly."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from prbench.downstream.evaluation import TABLE_COLUMNS, outcome, policy_table_rows
from prbench.downstream.reward_adapter import AdapterStats, reward_spread
from prbench.downstream.reward_rise import quarters, reward_rise, reward_rise_rows, welch_interval
from prbench.io import write_jsonl
from prbench.seeding import stable_seed

NAN = float("nan")
T_975_DF2 = 4.302652729911275  # Student t quantile 0.975 at 2 degrees of freedom (tables)


def _judged(path, subset, pairs, prefix=""):
    write_jsonl(path, [{"question_id": f"{prefix}{subset}{i}", "subset": subset, "answer": "x", "score": s,
                        "base_score": b, "outcome": outcome(s, b)} for i, (s, b) in enumerate(pairs)])


def _numpy_paired_ci(d, n_boot, seed):
    d = np.asarray(d, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))
    boots = d[idx].mean(axis=1)
    return float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def test_diff_base_is_the_mean_paired_difference_with_a_question_bootstrap(tmp_path):
    # base scores vary a lot between questions, the trained policy adds about 0.2 to each: the paired
    # CI is narrow and above 0, an unpaired one (trained and base means resampled apart) would not be
    pairs = [(0.2, 0.0), (1.2, 1.0), (0.5, 0.333), (0.9, 0.667), (0.4, 0.333), (1.0, 1.0), (NAN, 0.5), (0.6, NAN)]
    _judged(tmp_path / "j.jsonl", "A", pairs)
    t = policy_table_rows({("pol", "rm"): tmp_path / "j.jsonl"}, 500, 7).set_index("subset").loc["all"]
    d = [0.2, 0.2, 0.167, 0.233, 0.067, 0.0]  # by hand: the 6 questions with both scores
    assert t["diff_base"] == pytest.approx(sum(d) / 6)
    lo, hi = _numpy_paired_ci(d, 500, stable_seed(7, "ppo-table-diff", "pol", "rm"))
    assert (t["diff_ci_low"], t["diff_ci_high"]) == pytest.approx((lo, hi))
    assert 0 < t["diff_ci_low"] < t["diff_base"] < t["diff_ci_high"] < 0.25
    assert t["mean"] - t["base_mean"] != pytest.approx(t["diff_base"])  # unpaired means use other questions
    # no training logs given: the reward-rise columns are there and NaN
    assert list(t.index) == [c for c in TABLE_COLUMNS if c != "subset"] and math.isnan(t["reward_rise"])


def test_diff_base_per_subset_and_over_seeds(tmp_path):
    _judged(tmp_path / "s0.jsonl", "A", [(1.0, 0.0), (0.0, 0.0), (1.0, 1.0)])
    _judged(tmp_path / "s0b.jsonl", "B", [(0.0, 1.0), (0.5, 1.0)])
    _judged(tmp_path / "s1.jsonl", "A", [(0.0, 0.0), (NAN, 0.0), (1.0, 1.0)])
    _judged(tmp_path / "s1b.jsonl", "B", [(1.0, 1.0), (0.5, 1.0)])
    runs = {("pol", "rm", 0): [tmp_path / "s0.jsonl", tmp_path / "s0b.jsonl"],
            ("pol", "rm", 1): [tmp_path / "s1.jsonl", tmp_path / "s1b.jsonl"]}
    t = policy_table_rows(runs, 200, 0).set_index("subset")
    # per question: mean over the seeds that scored it, minus the (shared) base score
    a = [(1.0 + 0.0) / 2 - 0.0, 0.0 - 0.0, 1.0 - 1.0]  # A1: only seed 0 scored it
    b = [(0.0 + 1.0) / 2 - 1.0, 0.5 - 1.0]
    assert t.loc["A", "diff_base"] == pytest.approx(np.mean(a))
    assert t.loc["B", "diff_base"] == pytest.approx(np.mean(b))
    assert t.loc["all", "diff_base"] == pytest.approx(np.mean(a + b))  # question-weighted
    lo, hi = _numpy_paired_ci(b, 200, stable_seed(0, "ppo-table-diff", "pol", "rm", "B"))
    assert (t.loc["B", "diff_ci_low"], t.loc["B", "diff_ci_high"]) == pytest.approx((lo, hi))
    pd.testing.assert_frame_equal(policy_table_rows(runs, 200, 0).set_index("subset"), t)  # seeded


def _log(path, rewards, steps=None):
    steps = list(range(1, len(rewards) + 1)) if steps is None else steps
    pd.DataFrame({"step": steps, "reward": rewards, "kl": 0.0}).to_csv(path, index=False)
    return path


def test_reward_rise_is_last_quarter_minus_first_with_welch_interval(tmp_path):
    # 8 steps written out of order, plus a step without a reward (GRPO's reused generation batch)
    rewards = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    steps = [8, 1, 2, 3, 4, 5, 6, 7]
    shuffled = [7.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    path = _log(tmp_path / "log.csv", shuffled + [NAN], steps + [9])
    first, last = quarters(sorted(rewards) + [NAN])
    assert list(first) == [0.0, 1.0] and list(last) == [6.0, 7.0]
    rise, lo, hi = reward_rise([path])
    # by hand: means 0.5 and 6.5, variances 0.5 each, se = sqrt(0.5/2 + 0.5/2), Welch df = 2
    half = T_975_DF2 * math.sqrt(0.5)
    assert (rise, lo, hi) == pytest.approx((6.0, 6.0 - half, 6.0 + half))
    # a falling reward gives a negative rise
    assert reward_rise([_log(tmp_path / "down.csv", rewards[::-1])])[0] == pytest.approx(-6.0)
    # degenerate cases: constant reward (no spread), one step per quarter, fewer than 2 steps
    assert welch_interval(np.zeros(3), np.ones(3)) == (1.0, 1.0, 1.0)
    rise, lo, hi = reward_rise([_log(tmp_path / "short.csv", [1.0, 2.0, 4.0])])
    assert rise == 3.0 and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(v) for v in reward_rise([_log(tmp_path / "one.csv", [1.0])]))
    pd.DataFrame({"step": [1]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="lacks column"):
        reward_rise([tmp_path / "bad.csv"])


def _rollout_log(path, per_step):
    """A train_log.csv whose steps log what the trainers log: the step mean, reward_sd and reward_n
    of the step's rollouts, the moments summed as AdapterStats / reward_spread do."""
    rows = []
    for i, r in enumerate(per_step, 1):
        st = AdapterStats(rewards=list(r))
        sd, n = reward_spread(*st.reward_moments())
        rows.append({"step": i, "reward": float(np.mean(r)), "reward_sd": sd, "reward_n": n, "kl": 0.0})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_reward_rise_interval_is_welch_over_the_rollouts_of_each_quarter(tmp_path, caplog):
    rng = np.random.default_rng(3)
    # two seeds' logs, 10 and 13 steps (quarters of 2 and 3 steps), rollouts per step vary (GRPO's
    # generation batches, the last PPO batch), a drift and a bimodal reward as the demo's RMs give
    logs, firsts, lasts = [], [], []
    for k, n_steps in enumerate((10, 13)):
        per_step = [np.where(rng.random(int(rng.integers(5, 40))) < 0.4 + 0.03 * s, 2.5, -3.5)
                    + rng.normal(0, 0.3, 1) for s in range(n_steps)]
        logs.append(_rollout_log(tmp_path / f"seed{k}.csv", per_step))
        q = n_steps // 4
        firsts += per_step[:q]
        lasts += per_step[-q:]
    a, b = np.concatenate(firsts), np.concatenate(lasts)
    ref = sps.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    rise, lo, hi = reward_rise(logs)
    assert (rise, lo, hi) == pytest.approx((b.mean() - a.mean(), ref.low, ref.high), rel=1e-9, abs=1e-9)
    assert not [r for r in caplog.records if "lack the rollouts' reward spread" in r.message]
    # a log from before reward_sd / reward_n: the step means' interval, with a warning naming the log
    old_log = _log(tmp_path / "old.csv", [float(x.mean()) for x in firsts[:2] + lasts[:2]])
    with caplog.at_level("WARNING", logger="prbench.downstream.reward_rise"):
        got = reward_rise([old_log])
    assert got == pytest.approx(welch_interval([firsts[0].mean()], [lasts[1].mean()]), nan_ok=True)
    assert any("old.csv" in r.message and "step means" in r.message for r in caplog.records)
    # one rollout in a step: no SD, the step-level interval
    assert reward_spread(*AdapterStats(rewards=[1.0]).reward_moments())[1] == 1
    assert math.isnan(reward_spread(*AdapterStats(rewards=[1.0]).reward_moments())[0])


def test_reward_rise_pools_seeds_and_gives_subset_rows_only_for_per_subset_runs(tmp_path):
    up = _log(tmp_path / "up.csv", [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0])
    up2 = _log(tmp_path / "up2.csv", [1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0])
    rows = reward_rise_rows({("pol", "pooled", 0): {"": up}, ("pol", "pooled", 1): {"": up2},
                             ("pol", "split", 0): {"A": up, "B": up2}}).set_index(["rm", "subset"])
    # pooled over the two logs: first quarters {0, 0, 1, 1}, last quarters {2, 2, 3, 3}
    assert rows.loc[("pooled", "all"), "reward_rise"] == pytest.approx(2.5 - 0.5)
    assert ("pooled", "A") not in rows.index
    assert rows.loc[("split", "all"), "reward_rise"] == pytest.approx(2.0)
    assert rows.loc[("split", "A"), "reward_rise"] == pytest.approx(2.0)
    assert rows.loc[("split", "B"), "reward_rise"] == pytest.approx(2.0)
    assert rows.loc[("split", "A"), "reward_rise_ci_low"] == 2.0  # no spread within a quarter
    # in the table: the `all` row carries a run-over-every-subset's rise, its subset rows are NaN
    _judged(tmp_path / "j.jsonl", "A", [(1.0, 0.0), (0.0, 0.0)])
    _judged(tmp_path / "k.jsonl", "B", [(1.0, 0.0), (0.0, 1.0)], prefix="k")
    t = policy_table_rows({("pol", "pooled", 0): [tmp_path / "j.jsonl", tmp_path / "k.jsonl"]}, 50, 0,
                          train_logs={("pol", "pooled", 0): {"": up}}).set_index("subset")
    assert t.loc["all", "reward_rise"] == pytest.approx(2.0)
    assert t.loc[["A", "B"], "reward_rise"].isna().all()
    assert sorted(t.reset_index().columns) == sorted(TABLE_COLUMNS)


def test_training_figure_legend_gives_the_reward_rise(tmp_path, monkeypatch):
    from prbench.analysis import figures

    saved = []
    monkeypatch.setattr(figures, "_save", lambda fig, png, pdf: saved.append(fig))
    path = _log(tmp_path / "log.csv", [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    figures.plot_training([("pol", "rm", str(path))], tmp_path / "p.png", tmp_path / "p.pdf")
    legend = saved[0].axes[-1].get_legend()
    # 6 -/+ 4.3027 * sqrt(0.5) (the Welch interval by hand above)
    assert [t.get_text() for t in legend.get_texts()] == ["rm: rise +6 [+2.96, +9.04]"]


def test_training_figure_puts_every_run_on_one_scale(tmp_path, monkeypatch):
    """The CHANGE panel: reward minus the first quarter's mean, in SDs of the first quarter's
    rollouts, so RMs with other scales share an axis; left out for logs without the spread."""
    from prbench.analysis import figures
    from prbench.downstream.reward_rise import log_steps, reward_change

    rng = np.random.default_rng(0)
    small = [rng.normal(0.1 * s, 1.0, 16) for s in range(8)]
    large = [rng.normal(50 - 4 * s, 10.0, 16) for s in range(8)]  # a length RM's scale
    paths = [_rollout_log(tmp_path / "small.csv", small), _rollout_log(tmp_path / "large.csv", large)]
    first = np.concatenate(small[:2])
    want = (np.array([x.mean() for x in small]) - first.mean()) / first.std(ddof=1)
    np.testing.assert_allclose(reward_change(log_steps(paths[0])), want, rtol=1e-5)
    saved = []
    monkeypatch.setattr(figures, "_save", lambda fig, png, pdf: saved.append(fig))
    figures.plot_training([("pol", "small", str(paths[0])), ("pol", "large", str(paths[1]))],
                          tmp_path / "p.png", tmp_path / "p.pdf")
    titles = [ax.get_title() for ax in saved[0].axes]
    assert titles == ["pol: reward", f"pol: {figures.CHANGE}", "pol: kl"]
    lines = {ln.get_label().split(":")[0]: ln.get_ydata() for ln in saved[0].axes[1].get_lines()}
    np.testing.assert_allclose(lines["small"], want, rtol=1e-5)
    assert lines["large"][-1] < -1  # falling by more than one SD of its first quarter
    # logs without reward_sd / reward_n: no such panel
    old = _log(tmp_path / "old.csv", [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    figures.plot_training([("pol", "rm", str(old))], tmp_path / "p.png", tmp_path / "p.pdf")
    assert [ax.get_title() for ax in saved[1].axes] == ["pol: reward", "pol: kl"]
