"""Best-of-N downstream: sample once, judge once, score per RM, exact best-of-k curves.

Stage functions (called by the thin scripts in workflow_scripts/):
  - `stages.select_questions` / `stages.sample_bon`: N samples per evaluation question for one shard;
  - `stages.merge_samples`: deterministic merge of the shards (sorted by question_id, sample_idx);
  - `stages.judge_bon`: every unique sample judged once (rubric aspects, cached);
  - `stages.score_bon`: one RM scores every sample;
  - `curves.bon_table`: per-question best-of-k curves per RM (+ oracle and random) and the tidy table;
  - `curves.write_bon_measures`: the curves as the downstream contract's measure table.
The estimators (`first_k`, `first_k_tieavg`, `expected`) and their NaN rules are described in
`curves.py`. `enabled` and `figure_signal` are the registry's hooks (`prbench.downstream.REGISTRY`).
"""
from __future__ import annotations

from typing import Mapping

from ...config import entry_with_defaults
from .curves import (  # noqa: F401 (the package's public names)
    ALL_SUBSETS,
    CURVE_COLUMNS,
    CURVE_MEASURES,
    ESTIMATORS,
    ORACLE,
    RANDOM,
    TABLE_COLUMNS,
    best_of_k,
    bon_curves,
    bon_table,
    cell,
    curve_measures,
    expected_weights,
    first_k_tieavg_weights,
    first_k_weights,
    question_curves,
    random_weights,
    selection_weights,
    win_vs_random,
    write_bon_measures,
)
from .stages import (  # noqa: F401
    aspects_by_question,
    judge_bon,
    merge_samples,
    sample_bon,
    score_bon,
    select_questions,
    shard_rows,
)


def enabled(config: Mapping) -> bool:
    """BoN runs whenever the config has a `bon` section."""
    return "bon" in config


def figure_signal(config: Mapping) -> dict:
    """BoN's headline signal: `bon.headline_estimator` (default `expected`) at the largest k, used by
    the figures, the leaderboard and the correlation verdict's headline cells."""
    bon = entry_with_defaults(config["bon"], "bon")
    estimator = bon["headline_estimator"]
    if estimator not in ESTIMATORS:
        raise ValueError(f"config key bon.headline_estimator: {estimator!r} is not one of {list(ESTIMATORS)}")
    return {"estimator": estimator, "k": int(max(bon["ks"]))}
