"""Rules score_bon_family_*: every member of an RM family (prbench.rms.family) scores every BoN
sample, the members sharing one embedding pass of the frozen encoder."""
from __future__ import annotations

import logging
from typing import Mapping

from ...rms.frozen_head import FrozenHeadRM, HeadFeatures
from .stages import score_bon

log = logging.getLogger("prbench.downstream.bon.family")


def score_bon_family(samples: str, prompts: str, specs: Mapping[str, dict], model_dirs: Mapping[str, str],
                     outs: Mapping[str, str], encoder: str) -> dict:
    """Every member scores every BoN sample (prbench.downstream.bon.score_bon), sharing the embeddings."""
    features = HeadFeatures(encoder)
    reports = {}
    for name, spec in specs.items():
        rm = FrozenHeadRM({**spec, "name": name, "path": model_dirs[name]}, features=features)
        reports[name] = score_bon(samples, prompts, {**spec, "name": name}, outs[name], rm=rm)
    log.info("embedded %d texts", features.embedded)
    return reports
