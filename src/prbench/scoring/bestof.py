"""Best-of-n benchmark items (RewardBench 2, `prbench.data.rewardbench2`): the rules that credit an
item from its answers' scores, and the scores a pairwise judge gives them.

An item's answers are its `chosen` then its `rejected` list; `scores` keeps that order, the first
`num_correct` being the correct answers. Rules, as reward-bench's v2 scripts apply them
(`scripts/run_v2.py`, `rewardbench/utils.py`; the code here is the project's own):

- `best_of_n` (every subset but Ties): the first chosen answer is right when its score is the
  highest. Tie rule: when k answers share the highest score and the first chosen is among them,
  the item gets credit 1/k (reward-bench's "penalty for ties"); below the highest it gets 0.
  `correct` = credit 1 (strictly above every other answer); `tie` = a shared top with the chosen.
- `ties` (the Ties subset): per item, `accurate` = the worst correct answer scores strictly above
  the best incorrect one (a tie is wrong); `gap` = worst correct - best incorrect; `spread` = best
  correct - worst correct (None with one correct answer). The item's credit is `accurate`; the
  subset's score comes from all of them together (`prbench.scoring.official.rewardbench2_components`).

A NaN score (a failed RM call) makes the item a failure with credit 0 and gap/spread NaN: reward-bench's
classifier path never produces one (its max with a NaN gives no credit too; its Ties path would
order NaNs by position, the project treats them as unscored).
"""
from __future__ import annotations

import math
from itertools import combinations
from typing import Sequence

BEST_OF_N, TIES = "best_of_n", "ties"


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def ties_stats(scores: Sequence[float], num_correct: int) -> tuple[bool, float, float | None]:
    """(accurate, gap, spread) of one Ties item (reward-bench's per-prompt statistics)."""
    s = [float(x) for x in scores]
    good, bad = s[:num_correct], s[num_correct:]
    if not good or not bad:
        raise ValueError(f"a Ties item needs correct and incorrect answers (got {len(good)} and {len(bad)})")
    if any(math.isnan(x) for x in s):
        return False, float("nan"), (float("nan") if len(good) > 1 else None)
    gap = min(good) - max(bad)
    spread = max(good) - min(good) if len(good) > 1 else None
    return gap > 0, gap, spread


def item_result(scores: Sequence[float], num_correct: int, rule: str) -> dict:
    """The `.pairs.jsonl` fields of one scored item: credit, correct, tie, failure, score_chosen (the
    first chosen's score; Ties: the worst correct), score_rejected (the best rejected), pref (= credit)."""
    s = [float(x) for x in scores]
    n_ans = len(s)
    if not 1 <= num_correct < n_ans:
        raise ValueError(f"an item needs correct and incorrect answers: {num_correct} correct of {n_ans}")
    failure = any(math.isnan(x) for x in s)
    out = {"scores": [_num(x) for x in s], "num_correct": int(num_correct), "rule": rule, "failure": failure}
    if rule == TIES:
        accurate, gap, spread = ties_stats(s, num_correct)
        credit = float(accurate)
        tie = (not failure) and gap == 0
        first = None if failure else min(s[:num_correct])
        out.update(gap=_num(gap), spread=None if spread is None else _num(spread))
    elif rule == BEST_OF_N:
        if failure:
            credit, tie, first = 0.0, False, None
        else:
            top = max(s)
            shared = sum(x == top for x in s)
            credit = 1.0 / shared if s[0] == top else 0.0
            tie = s[0] == top and shared > 1
            first = s[0]
    else:
        raise ValueError(f"unknown best-of-n rule {rule!r} (known: {BEST_OF_N}, {TIES})")
    best_rej = None if failure else max(s[num_correct:])
    out.update(credit=credit, correct=credit == 1.0, tie=bool(tie), pref=None if failure else credit,
               score_chosen=first, score_rejected=best_rej)
    return out


def round_robin(n_answers: int) -> list[tuple[int, int]]:
    """Every unordered pair (i, j), i < j, of an item's answers: what a pairwise judge compares."""
    return list(combinations(range(n_answers), 2))


def win_rates(n_answers: int, prefs: Sequence[float]) -> list[float]:
    """Each answer's mean preference over the others (prefs: P(i over j) per `round_robin` pair,
    NaN = unjudged); an answer with an unjudged comparison gets NaN."""
    won = [0.0] * n_answers
    for (i, j), p in zip(round_robin(n_answers), prefs):
        p = float(p)
        won[i] += p
        won[j] += 1.0 - p  # NaN stays NaN on both sides
    return [w / (n_answers - 1) for w in won]
