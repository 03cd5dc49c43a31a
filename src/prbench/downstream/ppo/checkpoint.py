"""PPO checkpoints and the restartable prompt order they resume from (used by `prbench.downstream.ppo.train`).

trl's experimental PPOTrainer has no resume_from_checkpoint. Every `save_steps` steps, and after
the last one, `prbench.downstream.ppo.train` atomically writes `checkpoints/step-NNNNNN/` with the policy and value
model (save_pretrained), optimizer and LR scheduler state, the Python/NumPy/torch RNG states of
every training process (`rng_state`), the step/episode counters, the training log so far and a
`fingerprint` of the run settings. A new run with the same fingerprint resumes from the newest
checkpoint (`latest_checkpoint`); a checkpoint with another fingerprint (changed
config/prompts/model) is discarded. The checkpoint-folder helpers (`fingerprint`,
`list_checkpoints`, `latest_checkpoint`) live in `prbench.downstream.checkpoints`, shared with GRPO. Prompt
batches come from a seeded, restartable order (`PromptBatches`) instead of trl's shuffled
DataLoader, so a resumed run skips exactly the batches already used.
"""
from __future__ import annotations

import random
from typing import Callable

import numpy as np
import torch

from ...seeding import stable_seed


# ---------------------------------------------------------------------------------------------
# deterministic, restartable prompt batches
# ---------------------------------------------------------------------------------------------
class PromptBatches:
    """Infinite stream of collated prompt batches in a seeded per-epoch order.

    Batch g is batch g % per_epoch of epoch g // per_epoch (incomplete last batch dropped, as
    trl does). Iteration starts at batch `start`, so a resumed run skips exactly the batches
    the interrupted run already used. No global RNG is touched. With `world` processes, process
    `rank` gets its contiguous slice of each global batch (batch_size / world prompts).
    """

    def __init__(self, dataset, batch_size: int, collate: Callable, seed: int, start: int = 0,
                 rank: int = 0, world: int = 1):
        self.dataset, self.batch_size, self.collate, self.seed, self.start = dataset, batch_size, collate, seed, start
        self.rank, self.world = rank, world
        if batch_size % world:
            raise ValueError(f"ppo.batch_size {batch_size} is not divisible by the {world} training processes")
        self.local = batch_size // world
        self.per_epoch = len(dataset) // batch_size
        if self.per_epoch < 1:
            raise ValueError(f"ppo.batch_size {batch_size} is larger than the {len(dataset)} training prompts")

    def order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng(stable_seed(self.seed, "ppo-prompt-order", epoch)).permutation(len(self.dataset))

    def batch_indices(self, g: int) -> list[int]:
        epoch, pos = divmod(g, self.per_epoch)
        return [int(i) for i in self.order(epoch)[pos * self.batch_size:(pos + 1) * self.batch_size]]

    def __iter__(self):
        g = self.start
        lo = self.rank * self.local
        while True:
            yield self.collate([self.dataset[i] for i in self.batch_indices(g)[lo:lo + self.local]])
            g += 1

    def __len__(self) -> int:
        return self.per_epoch


def rng_state() -> dict:
    st = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict) -> None:
    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    torch.set_rng_state(st["torch"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])
