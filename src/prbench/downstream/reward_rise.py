"""The reward rise of a trained-policy run (PPO, GRPO) from its per-step training log.

`reward_rise` = mean training reward (column `reward` of `train_log.csv`: the RM score the trainer
optimised, times `reward_scale`, a NaN score replaced by `nan_reward`) over the last quarter of the
logged steps minus the mean over the first quarter. A quarter is floor(n / 4) steps of the n steps
that logged a finite reward (GRPO steps that reuse a generation batch log none), at least 1.

Its interval is Welch's t interval for the difference of the two quarters' means over their
rollouts: each step also logs the spread of its rollouts' rewards (`reward_sd`, ddof 1, and
`reward_n`), so a quarter's mean, variance and count are those of all its rollouts (the
rollout-weighted mean of the step means; within-step plus between-step sums of squares over
count - 1), exactly as if every rollout's reward were listed (`scipy.stats.ttest_ind`, checked in
tests/test_policy_diff.py). Given the run's policies, the rollouts of a step are independent draws
(their own prompts and noise; GRPO's come num_generations to a prompt, so there it also takes the
step's prompts as given), so this is the interval of "the last quarter's policies earn more than the
first quarter's" in this run; it leaves out the run-to-run spread of training itself
(training seeds, `ppo.seeds` / `grpo.seeds`, are pooled below). It is NaN when a quarter has fewer
than 2 rollouts, and the point when neither quarter varies. A log from before the spread was logged
(no `reward_sd` / `reward_n`, or a step of a quarter without them) gets the older, coarser interval
over the step means (each step one draw; NaN below 2 steps per quarter), with a warning naming it.

Several logs (training seeds; per-subset runs, `ppo.per_subset`) are pooled: each log contributes
its own first- and last-quarter steps, and the rise and the interval are over the pooled steps. Rewards
are on each RM's own scale: rises are not comparable across RMs. Used by
`prbench.downstream.evaluation.policy_table_rows` (`tables/{ppo,grpo}.csv`) and the training figure
(`prbench.analysis.figures.plot_training`).
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

log = logging.getLogger("prbench.downstream.reward_rise")

REWARD = "reward"  # the train_log.csv columns: the step's mean reward, its rollouts' SD and count
REWARD_SD, REWARD_N = "reward_sd", "reward_n"
RISE_COLUMNS = ["reward_rise", "reward_rise_ci_low", "reward_rise_ci_high"]


def quarters(rewards: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(first quarter, last quarter) of the finite rewards in step order: floor(n / 4) steps each,
    at least 1; two empty arrays with fewer than 2 finite rewards."""
    first, last = quarter_steps(pd.DataFrame({REWARD: np.asarray(rewards, dtype=float)}))
    return first[REWARD].to_numpy(), last[REWARD].to_numpy()


def quarter_steps(steps: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(first quarter, last quarter) of the rows of `steps` (step order) with a finite `reward`, as
    `quarters` counts them; two empty frames with fewer than 2 such rows."""
    finite = steps[np.isfinite(steps[REWARD].to_numpy(dtype=float))]
    if len(finite) < 2:
        return finite.iloc[:0], finite.iloc[:0]
    q = max(1, len(finite) // 4)
    return finite.iloc[:q], finite.iloc[-q:]


def log_steps(path: str | Path) -> pd.DataFrame:
    """Columns reward, reward_sd, reward_n of one train_log.csv in step order (NaN rows kept;
    reward_sd / reward_n NaN when the log predates them)."""
    df = pd.read_csv(path)
    missing = [c for c in ("step", REWARD) if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: training log lacks column(s) {missing}")
    df = df.sort_values("step", kind="stable")
    return pd.DataFrame({c: df[c].astype(float).to_numpy() if c in df.columns else np.full(len(df), np.nan)
                         for c in (REWARD, REWARD_SD, REWARD_N)})


def log_rewards(path: str | Path) -> np.ndarray:
    """The `reward` column of one train_log.csv in step order (NaN rows kept; `quarters` drops them)."""
    return log_steps(path)[REWARD].to_numpy()


def welch_moments(m1: float, v1: float, n1: float, m2: float, v2: float, n2: float) -> tuple[float, float, float]:
    """(m2 - m1, its standard error, Welch-Satterthwaite degrees of freedom) from two samples' means,
    variances (ddof 1) and sizes; the error NaN below 2 per sample, the degrees infinite at error 0."""
    diff = float(m2 - m1)
    if n1 < 2 or n2 < 2:
        return diff, float("nan"), float("nan")
    a, b = v1 / n1, v2 / n2
    se = math.sqrt(a + b)
    if se == 0.0:
        return diff, 0.0, math.inf
    return diff, se, (a + b) ** 2 / (a ** 2 / (n1 - 1) + b ** 2 / (n2 - 1))


def t_interval(est: float, se: float, dof: float, ci: float = 0.95) -> tuple[float, float, float]:
    """(est, low, high): est -+ Student's t quantile at `ci` with `dof` degrees times `se`; NaN ends for
    a NaN error, the point at error 0."""
    if not math.isfinite(se):
        return est, float("nan"), float("nan")
    if se == 0.0:
        return est, est, est
    from scipy import stats as sps  # here, not at import: the rules import this package at every parse

    half = float(sps.t.ppf(0.5 + ci / 2.0, dof)) * se
    return est, est - half, est + half


def welch_interval(first: np.ndarray, last: np.ndarray, ci: float = 0.95) -> tuple[float, float, float]:
    """(mean(last) - mean(first), low, high): Welch's t interval at `ci`, each value one draw."""
    return t_interval(*_welch_arrays(first, last), ci)


def _welch_arrays(first: np.ndarray, last: np.ndarray) -> tuple[float, float, float]:
    """`welch_moments` of two arrays, each value one draw (all NaN when either is empty)."""
    first, last = np.asarray(first, dtype=float), np.asarray(last, dtype=float)
    if not (len(first) and len(last)):
        return float("nan"), float("nan"), float("nan")
    var = [float(x.var(ddof=1)) if len(x) > 1 else float("nan") for x in (first, last)]
    return welch_moments(float(first.mean()), var[0], len(first), float(last.mean()), var[1], len(last))


def rollout_moments(steps: pd.DataFrame) -> tuple[float, float, float]:
    """(mean, variance with ddof 1, count) of all the rollouts of `steps`, from each step's mean
    `reward`, `reward_sd` and `reward_n`: within-step plus between-step sums of squares."""
    m, sd, n = (steps[c].to_numpy(dtype=float) for c in (REWARD, REWARD_SD, REWARD_N))
    total = float(n.sum())
    mean = float((n * m).sum() / total)
    ss = float(((n - 1) * sd ** 2).sum() + (n * (m - mean) ** 2).sum())
    return mean, ss / (total - 1) if total > 1 else float("nan"), total


def has_spread(steps: pd.DataFrame) -> bool:
    """Every step logged its rollouts' SD and a count of at least 2."""
    sd, n = steps[REWARD_SD].to_numpy(dtype=float), steps[REWARD_N].to_numpy(dtype=float)
    return bool(np.isfinite(sd).all() and (n >= 2).all())


def reward_change(steps: pd.DataFrame) -> np.ndarray:
    """Each step's `reward` minus the first quarter's mean, in SDs of the first quarter's rollouts
    (`rollout_moments`): the training figure's unit-free curve, comparable across RMs whose rewards
    have other scales. All NaN when the first quarter lacks reward_sd / reward_n, or does not vary."""
    first, _ = quarter_steps(steps)
    reward = steps[REWARD].to_numpy(dtype=float)
    if first.empty or not has_spread(first):
        return np.full(len(steps), np.nan)
    mean, var, _ = rollout_moments(first)
    return (reward - mean) / math.sqrt(var) if var > 0 else np.full(len(steps), np.nan)


def reward_rise(logs: Iterable[str | Path], ci: float = 0.95) -> tuple[float, float, float]:
    """(rise, low, high) over one or more train_log.csv files, pooled as the module docstring says."""
    return t_interval(*reward_rise_moments(logs), ci)


def reward_rise_moments(logs: Iterable[str | Path]) -> tuple[float, float, float]:
    """(rise, standard error, Welch degrees of freedom) of `reward_rise`."""
    paths = [str(p) for p in logs]
    firsts, lasts = [], []
    for path in paths:
        f, last = quarter_steps(log_steps(path))
        firsts.append(f)
        lasts.append(last)
    first = pd.concat(firsts) if firsts else pd.DataFrame(columns=[REWARD, REWARD_SD, REWARD_N])
    last = pd.concat(lasts) if lasts else first
    if first.empty or last.empty:
        return float("nan"), float("nan"), float("nan")
    if has_spread(first) and has_spread(last):
        return welch_moments(*rollout_moments(first), *rollout_moments(last))
    log.warning("training log(s) %s lack the rollouts' reward spread (reward_sd, reward_n: logs from before "
                "it was logged): the reward rise's interval is over the step means instead", ", ".join(paths))
    return _welch_arrays(first[REWARD].to_numpy(), last[REWARD].to_numpy())


def reward_rise_rows(train_logs: dict[tuple, dict[str, str | Path]], all_label: str = "all",
                     ci: float = 0.95) -> pd.DataFrame:
    """Rows (policy, rm, subset, reward_rise, reward_rise_ci_low, reward_rise_ci_high).

    train_logs: (policy, rm[, replicate]) -> {subset: train_log.csv}, subset "" for a run over every
    subset. Per (policy, rm) one row `all_label` over all its logs (every seed and subset), and one
    row per subset for per-subset runs only: a run trained on all subsets at once has no per-subset
    reward, and the table leaves its subset rows NaN."""
    grouped: dict[tuple[str, str], dict[str, list]] = {}
    for key, by_subset in train_logs.items():
        policy, rm = key[0], key[1]
        for subset, path in by_subset.items():
            grouped.setdefault((policy, rm), {}).setdefault(str(subset or ""), []).append(path)
    rows = []
    for (policy, rm), by_subset in sorted(grouped.items()):
        every = [p for paths in by_subset.values() for p in paths]
        rows.append({"policy": policy, "rm": rm, "subset": all_label,
                     **dict(zip(RISE_COLUMNS, reward_rise(every, ci)))})
        for subset, paths in by_subset.items():
            if subset:
                rows.append({"policy": policy, "rm": rm, "subset": subset,
                             **dict(zip(RISE_COLUMNS, reward_rise(paths, ci)))})
    return pd.DataFrame(rows, columns=["policy", "rm", "subset", *RISE_COLUMNS])
