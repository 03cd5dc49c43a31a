"""The one scoring interface every stage uses: texts in, scores out.

Benchmark scoring, BoN selection and the PPO reward adapter all call a RewardModel built by
`prbench.rms.load_reward_model(spec)`. Concrete kinds live beside this file.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..prompts import PairRequest, ScoreRequest


@dataclass
class ScoreOutput:
    """Pointwise scores, aligned with the requests. NaN marks a failure (e.g. unparseable
    generative output); `failures` counts them so they are reported, never silently zero."""

    scores: np.ndarray
    failures: int = 0
    raw: list[str] | None = None  # raw generations for generative RMs (saved per prompt)
    # failures whose score is a rule's fallback value instead of NaN (`reward.generative_failure_score`,
    # the authors' 0.5): True where the reply was unparseable; counted like NaN scores, used as scored
    failed: np.ndarray | None = None


@dataclass
class CompareOutput:
    """Pairwise decisions aligned with the pairs: 1.0 chosen preferred, 0.0 rejected preferred,
    0.5 tie (counts as wrong), NaN parse failure (counts as wrong, reported)."""

    prefs: np.ndarray
    failures: int = 0
    details: list[dict] = field(default_factory=list)  # per pair: order shown, raw outputs, ...


class RewardModel(ABC):
    name: str
    use_profile: bool
    top_k: int | None = None
    pairwise: bool = False  # True when compare() is native and score() is derived
    kind: str = "?"

    def diagnostics(self) -> dict:
        """Run statistics worth reporting next to the accuracy (parse failures, position bias,
        truncated inputs, ...). Cumulative over all score()/compare() calls of this object."""
        return {"kind": self.kind}

    @abstractmethod
    def score(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        """Score each response independently."""

    def compare(self, pairs: Sequence[PairRequest], groups: Sequence | None = None,
                order_offsets: Mapping | None = None) -> CompareOutput:
        """Default: score chosen and rejected pointwise; chosen must be strictly higher (`groups`
        and `order_offsets`, a pairwise judge's order draw, do not apply)."""
        reqs = [ScoreRequest(p.question, p.chosen, p.profile) for p in pairs]
        reqs += [ScoreRequest(p.question, p.rejected, p.profile) for p in pairs]
        out = self.score(reqs)
        n = len(pairs)
        c, r = out.scores[:n], out.scores[n:]
        prefs = np.where(np.isnan(c) | np.isnan(r), np.nan, np.where(c > r, 1.0, np.where(c < r, 0.0, 0.5)))
        return CompareOutput(prefs=prefs, failures=int(np.isnan(prefs).sum()))
