"""The reward rise of a trained-policy run (PPO, GRPO) from its per-step training log.

`reward_rise` = mean training reward (column `reward` of `train_log.csv`: the RM score the trainer
optimised, times `reward_scale`, a NaN score replaced by `nan_reward`) over the last quarter of the
logged steps minus the mean over the first quarter. A quarter is floor(n / 4) steps of the n steps
that logged a finite reward (GRPO steps that reuse a generation batch log none), at least 1. Its
interval is Welch's t interval for the difference of the two means, the steps of each quarter taken
as independent draws (they are not: consecutive steps share a policy, so the interval is a rough
guide; it is NaN when a quarter has fewer than 2 steps, and the point when neither quarter varies).

Several logs (training seeds, `ppo.seeds` / `grpo.seeds`; per-subset runs, `ppo.per_subset`) are
pooled: each log contributes its own first- and last-quarter steps, and the rise and the interval are
over the pooled steps. Rewards are on each RM's own scale: rises are not comparable across RMs.
Used by `prbench.downstream.evaluation.policy_table_rows` (`tables/{ppo,grpo}.csv`) and the
training figure (`prbench.analysis.figures.plot_training`).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

REWARD = "reward"  # the train_log.csv column
RISE_COLUMNS = ["reward_rise", "reward_rise_ci_low", "reward_rise_ci_high"]


def quarters(rewards: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(first quarter, last quarter) of the finite rewards in step order: floor(n / 4) steps each,
    at least 1; two empty arrays with fewer than 2 finite rewards."""
    r = np.asarray(rewards, dtype=float)
    r = r[np.isfinite(r)]
    if len(r) < 2:
        return np.empty(0), np.empty(0)
    q = max(1, len(r) // 4)
    return r[:q], r[-q:]


def log_rewards(path: str | Path) -> np.ndarray:
    """The `reward` column of one train_log.csv in step order (NaN rows kept; `quarters` drops them)."""
    df = pd.read_csv(path)
    missing = [c for c in ("step", REWARD) if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: training log lacks column(s) {missing}")
    return df.sort_values("step", kind="stable")[REWARD].astype(float).to_numpy()


def welch_interval(first: np.ndarray, last: np.ndarray, ci: float = 0.95) -> tuple[float, float, float]:
    """(mean(last) - mean(first), low, high): Welch's t interval at `ci`."""
    first, last = np.asarray(first, dtype=float), np.asarray(last, dtype=float)
    if not (len(first) and len(last)):
        return float("nan"), float("nan"), float("nan")
    diff = float(last.mean() - first.mean())
    n1, n2 = len(first), len(last)
    if n1 < 2 or n2 < 2:
        return diff, float("nan"), float("nan")
    v1, v2 = float(first.var(ddof=1)) / n1, float(last.var(ddof=1)) / n2
    se = math.sqrt(v1 + v2)
    if se == 0.0:
        return diff, diff, diff
    dof = (v1 + v2) ** 2 / (v1 ** 2 / (n1 - 1) + v2 ** 2 / (n2 - 1))
    half = float(sps.t.ppf(0.5 + ci / 2.0, dof)) * se
    return diff, diff - half, diff + half


def reward_rise(logs: Iterable[str | Path], ci: float = 0.95) -> tuple[float, float, float]:
    """(rise, low, high) over one or more train_log.csv files, pooled as the module docstring says."""
    firsts, lasts = [], []
    for path in logs:
        f, last = quarters(log_rewards(path))
        firsts.append(f)
        lasts.append(last)
    if not firsts:
        return float("nan"), float("nan"), float("nan")
    return welch_interval(np.concatenate(firsts), np.concatenate(lasts), ci)


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
