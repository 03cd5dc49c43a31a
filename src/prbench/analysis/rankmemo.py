"""The correlation stage's memo of per-array rank work (`prbench.analysis.rankmetrics`).

One bootstrap matrix (benchmark or downstream replicates, rows x RMs) meets every coefficient and
every measure it is paired with. Inside `ranks_memo()`, what a coefficient derives from one array
alone (its average ranks, its pairwise sign matrix, its tie groups) is computed once per array and
then read back: the key is the array's dtype, shape and bytes, so equal bytes give equal results.
Outside, nothing is kept. `BytesLRU` bounds it by bytes (the power search keeps its draws in one too).
"""
from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict
from typing import Callable

import numpy as np


class BytesLRU:
    """Values by key, the least recently used dropped once the values' sizes pass `max_bytes` (the
    correlation stage's rank memo, the power search's draws)."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.bytes, self._store = max_bytes, 0, OrderedDict()

    def __len__(self) -> int:
        return len(self._store)

    def get(self, key):
        """The value kept under `key` (now the most recently used), or None."""
        hit = self._store.get(key)
        if hit is None:
            return None
        self._store.move_to_end(key)
        return hit[0]

    def put(self, key, value, nbytes: int) -> None:
        self._store[key] = (value, nbytes)
        self.bytes += nbytes
        while self.bytes > self.max_bytes and self._store:
            self.bytes -= self._store.popitem(last=False)[1][1]


def _arrays(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


class RankMemo(BytesLRU):
    """Results of a function of one array by (tag, the array's dtype, shape and bytes): an exact key."""

    def __init__(self, max_bytes: int):
        super().__init__(max_bytes)
        self.hits = self.misses = 0

    def cached(self, tag: str, a: np.ndarray, fn: Callable, copy: bool):
        """fn(a), from the memo when seen; `copy`: a copy the caller may change, else the kept
        (read-only) arrays. A result above a quarter of the budget is not kept."""
        a = np.ascontiguousarray(a)
        key = (tag, a.dtype.str, a.shape, hashlib.blake2b(a, digest_size=16).digest())
        hit = self.get(key)
        if hit is None:
            self.misses += 1
            hit = fn(a)
            nbytes = sum(v.nbytes for v in _arrays(hit))
            if nbytes > self.max_bytes // 4:
                return hit
            for v in _arrays(hit):
                v.flags.writeable = False
            self.put(key, hit, nbytes)
        else:
            self.hits += 1
        if not copy:
            return hit
        return tuple(v.copy() for v in hit) if isinstance(hit, tuple) else hit.copy()


_MEMO: RankMemo | None = None


def memoized(tag: str, a: np.ndarray, fn: Callable, copy: bool = False):
    """fn(a), through the memo inside `ranks_memo()` (read-only arrays unless `copy`), else computed."""
    return fn(a) if _MEMO is None else _MEMO.cached(tag, a, fn, copy)


@contextlib.contextmanager
def ranks_memo(max_bytes: int = 256 * 2**20):
    """Within: an array's ranks, sign matrix and tie groups, computed before for the same dtype,
    shape and bytes, come from a stored result. The correlation stage ranks each bootstrap matrix
    once per coefficient and downstream measure; with this, once. Nested use shares the outer memo;
    yields it."""
    global _MEMO
    if _MEMO is not None:
        yield _MEMO
        return
    _MEMO = RankMemo(max_bytes)
    try:
        yield _MEMO
    finally:
        _MEMO = None
