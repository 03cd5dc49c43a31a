"""PPO downstream (the paper's): one policy per reward model, trained with trl's PPO.

- `train`: the training stage (`train_ppo`, rule train_ppo);
- `checkpoint`: its resume checkpoints and restartable prompt order;
- `launch`: one training process per GPU through torchrun, the RM on one more GPU;
- `memory`: the per-GPU memory plan that sizes each train_ppo job (and refuses one that cannot fit);
- `rollout`: trl's rollout generation with the per-token scores handed over one chunk at a time.
The trained policies are evaluated by the shared `prbench.downstream.evaluation`. `enabled` is the
registry's hook (`prbench.downstream.REGISTRY`).
"""
from __future__ import annotations

from typing import Mapping

from .. import section_enabled


def enabled(config: Mapping) -> bool:
    """PPO runs unless `ppo.enabled` is false (an absent section runs it with the schema's defaults)."""
    return section_enabled(config, "ppo", True)
