"""`length` RM: score = answer length (words or characters). A length-bias control."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..prompts import ScoreRequest
from .base import RewardModel, ScoreOutput
from .inputs import spec_with_defaults


class LengthRM(RewardModel):
    kind = "length"

    def __init__(self, spec: dict):
        spec = spec_with_defaults(spec, self.kind)
        self.name = spec["name"]
        self.unit = spec["length_unit"]
        if self.unit not in ("words", "chars"):
            raise ValueError(f"config key reward_models.{self.name}.length_unit: expected 'words' or 'chars', "
                             f"got {self.unit!r}")
        self.use_profile = False
        self.n_scored = 0

    def score(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        if self.unit == "words":
            vals = [len(r.answer.split()) for r in requests]
        else:
            vals = [len(r.answer) for r in requests]
        self.n_scored += len(requests)
        return ScoreOutput(scores=np.asarray(vals, dtype=float), failures=0)

    def diagnostics(self) -> dict:
        return {"kind": self.kind, "unit": self.unit, "scored": self.n_scored}
