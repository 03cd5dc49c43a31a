"""The learning claim of a trained-policy method (PPO, GRPO), fixed in the config before a run.

`<method>.claim` names one RM and a number of training seeds (`rm`, `seeds`): that RM's run is
trained with max(`<method>.seeds`, `claim.seeds`) seeds, the method's other RMs with
`<method>.seeds`. The claim is that training with the RM helps the user and not only the RM:

1. the judge-score difference to the base policy, pooled over the seeds, has its 95% interval above
   0 (`pooled_judge_diff`); and
2. the reward rise (`prbench.downstream.reward_rise`: the last quarter's rollouts against the first
   quarter's), pooled over the seeds, has its 95% interval above 0 (`pooled_rise`).

Both pooled intervals count the training seeds as a random factor: a new seed trains another
policy, and a gain the seeds do not share is not the setting's. The judge-score side is a design of
questions crossed with seeds in which the base answers (and with them much of a question's noise)
are the same for every seed. Its variance is the two-way random-effects ANOVA's for a grand mean,
(MS_question + MS_seed - MS_residual) / (questions x seeds): the spread of each question's mean over
the seeds, over the number of questions (what a bootstrap over questions gives), plus the seeds' main
effect over the number of seeds, left out where its estimate is below 0 (so the interval is never
narrower than the questions-only one), with Satterthwaite's degrees of freedom (at least seeds - 1).
The reward side shares nothing between seeds (each trains on its own rollouts), so its interval is
the one-sample t interval over the seeds' rises (seeds - 1 degrees). Both are Student t intervals;
one seed gives the paired t interval over questions and the seed's Welch interval.

`tables/<method>_claim.csv` has one row per training seed (its own estimates, whichever way they
come out) and a `pooled` row, the only one the criterion is decided on (`holds`). The pooled
judge-score difference is the RM's `all` row of `tables/<method>.csv` (per question the mean over
the seeds that scored it minus the base answer's score); that table's interval resamples questions
only, so it is narrower wherever the seeds' gains differ. The pooled reward rise is the mean of the
seeds' rises (the table pools every seed's rollouts).
"""
from __future__ import annotations

import logging
import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..io import write_csv
from .evaluation import read_judged
from .reward_rise import reward_rise_moments, t_interval

log = logging.getLogger("prbench.downstream.claim")

POOLED = "pooled"
CLAIM_COLUMNS = ["policy", "rm", "seed", "training_seed", "n_questions", "diff_base", "diff_ci_low",
                 "diff_ci_high", "reward_rise", "reward_rise_ci_low", "reward_rise_ci_high", "holds"]


def holds(diff_ci_low: float, rise_ci_low: float) -> bool:
    """The criterion: both intervals' lower ends above 0 (a NaN end never holds)."""
    return bool(diff_ci_low > 0) and bool(rise_ci_low > 0)


def pooled_judge_diff(y: pd.DataFrame, ci: float = 0.95) -> dict:
    """The judge-score side of the claim: y has one row per question and one column per training seed,
    the seed's judge score minus the base answer's on that question (NaN where either is unscored).
    diff_base is the mean over questions of each question's mean over the seeds that scored it; its
    interval is the t interval of the module docstring. The seeds' main effect is estimated on the
    questions every seed scored."""
    y = y.astype(float).dropna(how="all")
    per_q = y.mean(axis=1).to_numpy()
    n_q, n_s = len(per_q), y.shape[1]
    est = float(per_q.mean()) if n_q else float("nan")
    if n_q < 2:
        return {"diff_base": est, "diff_ci_low": float("nan"), "diff_ci_high": float("nan")}
    parts = [(float(per_q.var(ddof=1)) / n_q, n_q - 1)]  # (variance term, its degrees of freedom)
    full = y.dropna().to_numpy()
    n_c = len(full)
    if n_s > 1 and n_c < 2:
        log.warning("%d training seeds but %d question(s) scored by every seed: the seeds' main effect cannot "
                    "be estimated, and the pooled interval counts the questions only", n_s, n_c)
    elif n_s > 1:
        rows, cols, grand = full.mean(axis=1), full.mean(axis=0), full.mean()
        ms_seed = n_c * float(cols.var(ddof=1))
        ms_res = float(((full - rows[:, None] - cols[None, :] + grand) ** 2).sum()) / ((n_c - 1) * (n_s - 1))
        if ms_seed > ms_res:  # the seeds' main effect, (ms_seed - ms_res) / n_c, over n_s seeds; none below 0
            parts += [(ms_seed / (n_c * n_s), n_s - 1), (-ms_res / (n_c * n_s), (n_c - 1) * (n_s - 1))]
    var = sum(v for v, _ in parts)
    # Satterthwaite's degrees, at least those of the seeds' part (its negative term can push them lower)
    dof = max(var ** 2 / sum(v ** 2 / d for v, d in parts), float(min(d for _, d in parts))) if var > 0 else math.inf
    _, lo, hi = t_interval(est, math.sqrt(var), dof, ci)
    return {"diff_base": est, "diff_ci_low": lo, "diff_ci_high": hi}


def pooled_rise(seeds: Sequence[tuple[float, float, float]], ci: float = 0.95) -> tuple[float, float, float]:
    """The reward side of the claim: (rise, low, high) from each seed's (rise, standard error, degrees of
    freedom) (`reward_rise_moments`), as the module docstring says; NaN if any seed's is."""
    est = np.array([s[0] for s in seeds], dtype=float)
    se = np.array([s[1] for s in seeds], dtype=float)
    dof = np.array([s[2] for s in seeds], dtype=float)
    n = len(est)
    if not n or not (np.isfinite(est).all() and np.isfinite(se).all()):
        return float("nan"), float("nan"), float("nan")
    if n == 1:
        var, df = float(se[0]) ** 2, float(dof[0])
    else:  # the seeds' rises, each with its own noise and the seed's own gain: their spread is the error
        var, df = float(est.var(ddof=1)) / n, n - 1
    return t_interval(float(est.mean()), math.sqrt(var), df, ci)


def claim_rows(judged: Mapping[int, Sequence[str]], train_logs: Mapping[int, Sequence[str]], policy: str,
               rm: str, training_seeds: Mapping[int, int] | None = None, ci: float = 0.95) -> pd.DataFrame:
    """The claim table of one (policy, RM): judged / train_logs map each training seed (replicate 0..n-1)
    to its eval_judged.jsonl and train_log.csv files (one, or one per subset with ppo.per_subset);
    training_seeds gives each replicate's RNG seed for the `training_seed` column."""
    if sorted(judged) != sorted(train_logs):
        raise ValueError(f"{policy}/{rm}: judged answers for seeds {sorted(judged)} but training logs for "
                         f"{sorted(train_logs)}")
    if not judged:
        raise ValueError(f"{policy}/{rm}: no training seed to decide the claim on")
    training_seeds = training_seeds or {}
    rows, diffs, rises = [], {}, []
    for rep in sorted(judged):
        df = read_judged(judged[rep], policy, rm)
        diffs[rep] = (df["score"].astype(float) - df["base_score"].astype(float)).set_axis(df["question_id"])
        rise = reward_rise_moments(train_logs[rep])
        rises.append(rise)
        rows.append({"policy": policy, "rm": rm, "seed": str(rep), "training_seed": training_seeds.get(rep),
                     "n_questions": int(df["question_id"].nunique()),
                     **pooled_judge_diff(diffs[rep].to_frame(), ci),
                     **dict(zip(["reward_rise", "reward_rise_ci_low", "reward_rise_ci_high"], t_interval(*rise, ci))),
                     "holds": None})
    y = pd.DataFrame(diffs)  # questions x seeds, aligned by question_id
    d = pooled_judge_diff(y, ci)
    rise = pooled_rise(rises, ci)
    rows.append({"policy": policy, "rm": rm, "seed": POOLED, "training_seed": None, "n_questions": len(y), **d,
                 **dict(zip(["reward_rise", "reward_rise_ci_low", "reward_rise_ci_high"], rise)),
                 "holds": holds(d["diff_ci_low"], rise[1])})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS).astype({"training_seed": "Int64", "holds": "boolean"})


def write_claim_table(runs: Sequence[Sequence], judged: Sequence[str], train_logs: Sequence[str], out_csv: str,
                      training_seeds: Mapping[int, int] | None = None) -> pd.DataFrame:
    """tables/<method>_claim.csv from parallel lists: runs (policy, rm, subset, replicate) of one
    (policy, RM) per policy, their eval_judged.jsonl and train_log.csv."""
    by_key: dict[tuple[str, str], tuple[dict, dict]] = {}
    for (policy, rm, _subset, rep), j, t in zip(runs, judged, train_logs, strict=True):
        js, ts = by_key.setdefault((policy, rm), ({}, {}))
        js.setdefault(int(rep), []).append(j)
        ts.setdefault(int(rep), []).append(t)
    tables = [claim_rows(js, ts, policy, rm, training_seeds) for (policy, rm), (js, ts) in sorted(by_key.items())]
    df = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=CLAIM_COLUMNS)
    write_csv(out_csv, df)
    return df
