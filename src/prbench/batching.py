"""Length-bucketed, token-budgeted batching for scoring and generation.

Every text is tokenized once; items are sorted by length (longest first, so an out-of-memory
batch shows up immediately), cut into batches whose *padded* size (batch length x longest item)
stays within `max_tokens_per_batch`, run, and the outputs are put back in the input order.
Because each item is run with an attention mask, the result does not depend on the batching
(tests/test_batching.py compares batch sizes 1 and 16).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np


def length_bucketed_batches(lengths: Sequence[int], max_tokens_per_batch: int,
                            max_batch_size: int | None = None) -> list[list[int]]:
    """Indices grouped into batches, longest items first.

    A batch's padded token count (len(batch) * max length in it) never exceeds
    `max_tokens_per_batch`, except for a single item longer than the budget, which gets a batch
    of its own. Ties in length keep the input order, so the batching is deterministic.
    """
    if max_tokens_per_batch < 1:
        raise ValueError(f"max_tokens_per_batch must be >= 1, got {max_tokens_per_batch}")
    if max_batch_size is not None and max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i))
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_max = 0
    for i in order:
        length = max(1, int(lengths[i]))
        new_max = max(cur_max, length)
        too_many = max_batch_size is not None and len(cur) >= max_batch_size
        if cur and (new_max * (len(cur) + 1) > max_tokens_per_batch or too_many):
            batches.append(cur)
            cur, new_max = [], length
        cur.append(i)
        cur_max = new_max
    if cur:
        batches.append(cur)
    return batches


def fixed_size_batches(n: int, batch_size: int) -> list[list[int]]:
    """The naive way: consecutive items in dataset order (the baseline of perf/bench_scoring.py)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return [list(range(s, min(s + batch_size, n))) for s in range(0, n, batch_size)]


def padded_tokens(lengths: Sequence[int], batches: list[list[int]]) -> int:
    """Total tokens a batching computes on, padding included."""
    return int(sum(len(b) * max(lengths[i] for i in b) for b in batches if b))


def collate(features: Sequence[dict], pad_token_id: int, padding_side: str = "right"):
    """Pad a list of {"input_ids": [...], "token_type_ids": [...]?} into tensors with an attention mask."""
    import torch

    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
    width = max(len(f["input_ids"]) for f in features)
    keys = [k for k in ("input_ids", "token_type_ids") if k in features[0]]
    out = {k: [] for k in keys}
    out["attention_mask"] = []
    for f in features:
        n = len(f["input_ids"])
        pad = width - n
        for k in keys:
            fill = pad_token_id if k == "input_ids" else 0
            seq = list(f[k])
            out[k].append(seq + [fill] * pad if padding_side == "right" else [fill] * pad + seq)
        mask = [1] * n
        out["attention_mask"].append(mask + [0] * pad if padding_side == "right" else [0] * pad + mask)
    return {k: torch.tensor(v, dtype=torch.long) for k, v in out.items()}


def run_batched(features: Sequence[dict], fn: Callable[[list[int]], Sequence], batches: list[list[int]],
                desc: str | None = None, progress: bool = True) -> list:
    """Call `fn(batch_indices)` for every batch; return its per-item outputs in input order.

    `fn` returns one output per index of the batch (e.g. a score or a generated string).
    """
    from tqdm.auto import tqdm

    results: list = [None] * len(features)
    bar = tqdm(total=len(features), desc=desc, disable=not progress or len(features) == 0, mininterval=2.0)
    for batch in batches:
        outs = fn(batch)
        if len(outs) != len(batch):
            raise RuntimeError(f"batch function returned {len(outs)} outputs for {len(batch)} inputs")
        for i, o in zip(batch, outs):
            results[i] = o
        bar.update(len(batch))
    bar.close()
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        raise RuntimeError(f"{len(missing)} items were not in any batch (first: {missing[:5]})")
    return results


def as_float_array(values: Sequence) -> np.ndarray:
    return np.asarray([np.nan if v is None else float(v) for v in values], dtype=float)
