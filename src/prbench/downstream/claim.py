"""The learning claim of a trained-policy method (PPO, GRPO), fixed in the config before a run.

`<method>.claim` names one RM and a number of training seeds (`rm`, `seeds`): that RM's run is
trained with max(`<method>.seeds`, `claim.seeds`) seeds, the method's other RMs with
`<method>.seeds`. The claim is that training with the RM helps the user and not only the RM:

1. the judge-score difference to the base policy, pooled over the seeds as `tables/<method>.csv`
   pools them (`prbench.downstream.evaluation.paired_diff`: per question the mean over the seeds
   minus the base answer's score, a percentile bootstrap over questions), has its 95% interval
   above 0; and
2. the reward rise (`prbench.downstream.reward_rise.reward_rise`: the last quarter's rollouts
   against the first quarter's, every seed's log pooled, Welch's 95% interval) has its interval
   above 0.

`tables/<method>_claim.csv` has one row per training seed (its own estimates, whichever way they
come out) and a `pooled` row, the only one the criterion is decided on (`holds`). The pooled row's
numbers are the RM's `all` row of `tables/<method>.csv` (the same functions and bootstrap seed).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from ..io import write_csv
from ..seeding import stable_seed
from .evaluation import paired_diff, read_judged
from .reward_rise import reward_rise

POOLED = "pooled"
CLAIM_COLUMNS = ["policy", "rm", "seed", "training_seed", "n_questions", "diff_base", "diff_ci_low",
                 "diff_ci_high", "reward_rise", "reward_rise_ci_low", "reward_rise_ci_high", "holds"]


def holds(diff_ci_low: float, rise_ci_low: float) -> bool:
    """The criterion: both intervals' lower ends above 0 (a NaN end never holds)."""
    return bool(diff_ci_low > 0) and bool(rise_ci_low > 0)


def claim_rows(judged: Mapping[int, Sequence[str]], train_logs: Mapping[int, Sequence[str]], policy: str,
               rm: str, n_boot: int, seed: int, training_seeds: Mapping[int, int] | None = None) -> pd.DataFrame:
    """The claim table of one (policy, RM): judged / train_logs map each training seed (replicate 0..n-1)
    to its eval_judged.jsonl and train_log.csv files (one, or one per subset with ppo.per_subset);
    training_seeds gives each replicate's RNG seed for the `training_seed` column. Every bootstrap uses
    the table's seed for this (policy, RM), so the pooled row equals tables/<method>.csv's."""
    if sorted(judged) != sorted(train_logs):
        raise ValueError(f"{policy}/{rm}: judged answers for seeds {sorted(judged)} but training logs for "
                         f"{sorted(train_logs)}")
    if not judged:
        raise ValueError(f"{policy}/{rm}: no training seed to decide the claim on")
    boot_seed = stable_seed(seed, "ppo-table-diff", policy, rm)
    training_seeds = training_seeds or {}
    rows, frames = [], []
    for rep in sorted(judged):
        df = read_judged(judged[rep], policy, rm).assign(replicate=rep)
        frames.append(df)
        rise = reward_rise(train_logs[rep])
        rows.append({"policy": policy, "rm": rm, "seed": str(rep), "training_seed": training_seeds.get(rep),
                     "n_questions": int(df["question_id"].nunique()), **paired_diff(df, n_boot, boot_seed),
                     **dict(zip(["reward_rise", "reward_rise_ci_low", "reward_rise_ci_high"], rise)),
                     "holds": None})
    pooled = pd.concat(frames, ignore_index=True)
    d = paired_diff(pooled, n_boot, boot_seed)
    rise = reward_rise([p for rep in sorted(train_logs) for p in train_logs[rep]])
    rows.append({"policy": policy, "rm": rm, "seed": POOLED, "training_seed": None,
                 "n_questions": int(pooled["question_id"].nunique()), **d,
                 **dict(zip(["reward_rise", "reward_rise_ci_low", "reward_rise_ci_high"], rise)),
                 "holds": holds(d["diff_ci_low"], rise[1])})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS).astype({"training_seed": "Int64", "holds": "boolean"})


def write_claim_table(runs: Sequence[Sequence], judged: Sequence[str], train_logs: Sequence[str], out_csv: str,
                      n_boot: int, seed: int, training_seeds: Mapping[int, int] | None = None) -> pd.DataFrame:
    """tables/<method>_claim.csv from parallel lists: runs (policy, rm, subset, replicate) of one
    (policy, RM) per policy, their eval_judged.jsonl and train_log.csv."""
    by_key: dict[tuple[str, str], tuple[dict, dict]] = {}
    for (policy, rm, _subset, rep), j, t in zip(runs, judged, train_logs, strict=True):
        js, ts = by_key.setdefault((policy, rm), ({}, {}))
        js.setdefault(int(rep), []).append(j)
        ts.setdefault(int(rep), []).append(t)
    tables = [claim_rows(js, ts, policy, rm, n_boot, seed, training_seeds)
              for (policy, rm), (js, ts) in sorted(by_key.items())]
    df = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=CLAIM_COLUMNS)
    write_csv(out_csv, df)
    return df
