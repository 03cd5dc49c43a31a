"""Deterministic seeds derived from the config seed and stable strings (never Python's hash())."""
from __future__ import annotations

import hashlib
import random


def stable_seed(*parts) -> int:
    """A 32-bit seed from any parts (ints, strings), identical across runs and machines."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:4], "little")


def replicate_seed(seed: int, tag: str, replicate: int) -> int:
    """The seed of replicate `replicate` of a run (a BoN sample set, a PPO / GRPO training seed):
    `seed` itself for replicate 0, so a single-replicate run is unchanged, else
    stable_seed(seed, tag, replicate)."""
    replicate = int(replicate)
    if replicate < 0:
        raise ValueError(f"replicate {replicate}: must be >= 0")
    return int(seed) if replicate == 0 else stable_seed(seed, tag, replicate)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover
        pass
