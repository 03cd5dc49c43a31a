"""Rollout scores that trl's PPO releases as it reads them (so PPO fits where the DAG puts it).

trl 1.12's experimental PPOTrainer keeps the float32 scores of `generate(output_scores=True)` for
the whole local batch: `batch_generation` stacks every chunk's scores and pads them into one
tensor (two copies at the peak), the training loop keeps that tensor alive through the PPO epochs,
and the next step's generation builds its new scores while the old ones are still referenced. On
the paper's layout (local batch 64, response length 512, vocab 151,936) each copy is 19.9 GB, so
up to three copies (60 GB) sit on a training GPU (measured on an H100 with
`perf/ppo_memory_gpu.py`, see perf/README.md).

`releasing_batch_generation` is a drop-in replacement for trl's `batch_generation`: the same
generation calls (trl's own `generate`, one per rollout chunk, in the same order, so the same
random draws), the same right-padded query+responses, and scores handed out as
`ReleasingScores`: trl reads them exactly once, chunk by chunk (`logitss[i : i + chunk]`), and
each chunk is padded the way trl pads it (zeros to the longest response) and then dropped. The
values trl computes from them are bitwise the same (tests/test_ppo_rollout.py); only their
lifetime changes: one copy during generation, none during training.
"""
from __future__ import annotations

import contextlib
from typing import Sequence

import torch


class ReleasingScores:
    """Per-chunk rollout scores, each handed out once (as the padded slice trl would read) and
    then released. Reading a chunk twice, or a slice that is not one whole chunk, is an error."""

    def __init__(self, chunks: Sequence[torch.Tensor], chunk_size: int, batch_size: int):
        if not chunks:
            raise ValueError("no rollout chunks")
        self._chunks: list[torch.Tensor | None] = list(chunks)
        self.chunk_size = int(chunk_size)
        self.batch_size = int(batch_size)
        self.max_len = max(int(c.shape[1]) for c in chunks)
        self.shape = (self.batch_size, self.max_len, *chunks[0].shape[2:])

    def __len__(self) -> int:
        return self.batch_size

    @property
    def released(self) -> int:
        return sum(c is None for c in self._chunks)

    def __getitem__(self, idx):
        if not isinstance(idx, slice) or idx.step not in (None, 1) or (idx.start or 0) % self.chunk_size:
            raise TypeError(f"rollout scores are read one chunk of {self.chunk_size} rows at a time, got {idx!r}")
        start = idx.start or 0
        j = start // self.chunk_size
        if j >= len(self._chunks):
            raise IndexError(f"rollout chunk {j} of {len(self._chunks)}")
        c = self._chunks[j]
        if c is None:
            raise RuntimeError(f"rollout scores of chunk {j} were already read and released")
        self._chunks[j] = None
        if c.shape[1] < self.max_len:  # trl pads shorter responses' scores with zeros on the right
            c = torch.nn.functional.pad(c, (0, 0, 0, self.max_len - c.shape[1]), value=0.0)
        stop = min(self.batch_size if idx.stop is None else idx.stop, self.batch_size)
        return c[: stop - start]


def releasing_batch_generation(model, queries, local_rollout_forward_batch_size, pad_token_id, generation_config):
    """trl's `batch_generation` with the scores as `ReleasingScores` (same generate calls)."""
    from trl.experimental.ppo import ppo_trainer as trl_ppo
    from trl.trainer.utils import pad

    responses, scores = [], []
    batch_size = queries.shape[0]
    for i in range(0, batch_size, local_rollout_forward_batch_size):
        query_response, logits = trl_ppo.generate(model, queries[i:i + local_rollout_forward_batch_size],
                                                  pad_token_id, generation_config)
        responses.append(query_response)
        scores.append(logits)
    padded = pad(responses, padding_value=pad_token_id, padding_side="right")
    padded = padded.view(-1, padded.shape[-1])[:batch_size]
    return padded, ReleasingScores(scores, local_rollout_forward_batch_size, batch_size)


@contextlib.contextmanager
def releasing_rollout_scores(enabled: bool = True):
    """Within the block, trl's PPOTrainer uses `releasing_batch_generation` (restored after)."""
    from trl.experimental.ppo import ppo_trainer as trl_ppo

    if not enabled:
        yield
        return
    original = trl_ppo.batch_generation
    trl_ppo.batch_generation = releasing_batch_generation
    try:
        yield
    finally:
        trl_ppo.batch_generation = original
