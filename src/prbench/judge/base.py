"""The judge's interface and reply format: items in, 0/1/2 ratings per rubric aspect out.

Ratings: 0 = aspect not covered, 1 = somewhat covered, 2 = covered very well (the paper's scale);
an item's score is the mean rating, NaN when the reply could not be parsed (counted, never a
silent 0). Concrete judges live beside this file.
"""
from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

# one logger for the whole package (log files and tests name "prbench.judge")
log = logging.getLogger("prbench.judge")


@dataclass(frozen=True)
class JudgeItem:
    question: str
    answer: str
    aspects: tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "aspects", tuple(self.aspects))
        if not self.aspects:
            raise ValueError("JudgeItem: at least one rubric aspect is required")


@dataclass
class JudgeResult:
    score: float  # the aggregate of the ratings; on a final parse failure NaN (judge.failure exclude) or 0.0 (zero)
    # per_aspect: int 0/1/2 per aspect; mean_found: the numbers found in the reply; None entries
    # (per_aspect) or [] (mean_found) when unparseable
    ratings: list = field(default_factory=list)
    failures: int = 0  # unparseable replies for this item (retries included)
    failed: bool = False  # the final reply was unparseable: the score is the failure rule's value


class RubricJudge(ABC):
    judge_id: str

    @abstractmethod
    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        """Judge each item (no caching here)."""

    def use_cache_dir(self, cache_dir) -> None:
        """Called by `judge_items_cached` with the cache folder: a judge may keep its own
        intermediate results there (the minilm judges: their encoder calls). Default: nothing."""
        return None


AGGREGATES = ("per_aspect", "mean_found")
FAILURE_RULES = ("exclude", "zero")


def failure_score(failure: str) -> float:
    """The score of a final parse failure: NaN (exclude: the item is left out and counted) or 0.0
    (zero, the authors' rule: it enters the means as 0.0 and is still counted as failed)."""
    if failure == "exclude":
        return float("nan")
    if failure == "zero":
        return 0.0
    raise ValueError(f"config key judge.failure: {failure!r} is not one of {list(FAILURE_RULES)}")


def _result(ratings: Sequence[int | None], failures: int, failure: str = "exclude") -> JudgeResult:
    if any(r is None for r in ratings) or not ratings:
        return JudgeResult(failure_score(failure), [None] * len(ratings), failures, True)
    return JudgeResult(float(np.mean(ratings)), [int(r) for r in ratings], failures)


def _found_result(numbers: Sequence[float] | None, failures: int, failure: str = "exclude") -> JudgeResult:
    """judge.aggregate mean_found: the mean of the numbers found; none found = a parse failure."""
    if not numbers:
        return JudgeResult(failure_score(failure), [], failures, True)
    return JudgeResult(float(np.mean(numbers)), [float(x) for x in numbers], failures)


# ---------------------------------------------------------------------------------------------
# Reply formats of the LLM judges
# ---------------------------------------------------------------------------------------------
_ASPECT_RE = re.compile(r"aspect\s*#?\s*(\d+)\s*[:=\-]\s*\**\s*([0-2])(?![0-9.])", re.IGNORECASE)
# a bracketed list whose items are all numbers: "[2, 1, 0]" (the authors' judge replies with such a
# bare list, in aspect order, sometimes inside a ``` code fence)
_NUM_LIST_RE = re.compile(r"\[\s*(-?\d+(?:\.\d+)?(?:\s*,\s*-?\d+(?:\.\d+)?)*)\s*,?\s*\]")


def parse_ratings(text: str, n_aspects: int) -> list[int] | None:
    """One rating per aspect, or None (a parse failure, counted by the caller).

    Accepted replies:
      - "Aspect i: r" lines (the bundled prompt's format), every aspect 1..n rated;
      - a bare list of the n ratings in aspect order, e.g. "[2, 1, 0]", also inside a code fence
        (the reply format of the authors' rubric prompt). Every item must be 0, 1 or 2 and the list
        must have exactly n items; several numeric lists in one reply must agree, else None.
    """
    text = text or ""
    found: dict[int, int] = {}
    for m in _ASPECT_RE.finditer(text):
        i = int(m.group(1))
        if 1 <= i <= n_aspects and i not in found:
            found[i] = int(m.group(2))
    if len(found) == n_aspects:
        return [found[i] for i in range(1, n_aspects + 1)]
    return _parse_rating_list(text, n_aspects)


_FIRST_BRACKETS_RE = re.compile(r"\[([^\]]+)\]")
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d*)?")


def numbers_found(text: str) -> list[float] | None:
    """judge.aggregate mean_found (the authors' reading of a reply): the numbers inside the first
    bracketed span "[...]" if the reply has one, else every number in the reply; None when there is
    none (a parse failure). Any number counts, on the 0/1/2 scale or not, and their count need not
    match the aspects'."""
    text = text or ""
    m = _FIRST_BRACKETS_RE.search(text)
    found = _NUMBER_RE.findall(m.group(1) if m else text)
    return [float(x) for x in found] or None


def _parse_rating_list(text: str, n_aspects: int) -> list[int] | None:
    lists = [[x.strip() for x in m.group(1).split(",")] for m in _NUM_LIST_RE.finditer(text)]
    if not lists or any(items != lists[0] for items in lists):
        return None  # no list, or lists that disagree: ambiguous
    items = lists[0]
    if len(items) != n_aspects or any(x not in ("0", "1", "2") for x in items):
        return None  # wrong length, or a value off the 0/1/2 scale (e.g. 3, 1.5, -1)
    return [int(x) for x in items]
