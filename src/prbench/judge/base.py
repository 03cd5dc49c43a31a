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
    score: float  # mean of the aspect ratings; NaN when unparseable after the retries
    ratings: list = field(default_factory=list)  # int 0/1/2 per aspect, or None when unparseable
    failures: int = 0  # unparseable replies for this item (retries included)


class RubricJudge(ABC):
    judge_id: str

    @abstractmethod
    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        """Judge each item (no caching here)."""


def _result(ratings: Sequence[int | None], failures: int) -> JudgeResult:
    if any(r is None for r in ratings) or not ratings:
        return JudgeResult(float("nan"), [None] * len(ratings), failures)
    return JudgeResult(float(np.mean(ratings)), [int(r) for r in ratings], failures)


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


def _parse_rating_list(text: str, n_aspects: int) -> list[int] | None:
    lists = [[x.strip() for x in m.group(1).split(",")] for m in _NUM_LIST_RE.finditer(text)]
    if not lists or any(items != lists[0] for items in lists):
        return None  # no list, or lists that disagree: ambiguous
    items = lists[0]
    if len(items) != n_aspects or any(x not in ("0", "1", "2") for x in items):
        return None  # wrong length, or a value off the 0/1/2 scale (e.g. 3, 1.5, -1)
    return [int(x) for x in items]
