"""GRPO downstream (a project extension: the paper has no GRPO): one policy per reward model,
trained with trl's `GRPOTrainer` through the same reward adapter and prompts as PPO (`train`), and
evaluated like PPO by `prbench.downstream.evaluation`. `enabled` is the registry's hook
(`prbench.downstream.REGISTRY`).
"""
from __future__ import annotations

from typing import Mapping

from .. import section_enabled


def enabled(config: Mapping) -> bool:
    """GRPO runs only when a `grpo` section says `enabled: true`."""
    return section_enabled(config, "grpo", False)
