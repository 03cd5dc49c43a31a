"""Statistics shared by all stages: seeded bootstrap confidence intervals, percentile intervals."""
from __future__ import annotations

from typing import Callable

import numpy as np

_BLOCK = 1 << 22  # elements per block of resampled rows (32 MiB of float64)


def bootstrap_ci(
    values,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    stat: Callable[[np.ndarray], float] = np.mean,
) -> tuple[float, float, float]:
    """Return (estimate, low, high) of `stat` over `values` with a percentile bootstrap.

    Resamples rows (axis 0) with replacement using a seeded generator, so the same input gives
    the same interval. With n_boot == 0 or fewer than 2 values the interval is (nan, nan).
    """
    arr = np.asarray(values, dtype=float)
    est = float(stat(arr)) if len(arr) else float("nan")
    if n_boot <= 0 or len(arr) < 2:
        return est, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arr), size=(n_boot, len(arr)))
    if stat is np.mean and arr.ndim == 1:
        # the replicates' means in blocks of rows: the same bytes as np.mean per replicate (each row is
        # one contiguous pairwise sum), without a Python call per replicate
        rows = max(1, _BLOCK // len(arr))
        boots = np.concatenate([arr[idx[s:s + rows]].mean(axis=1) for s in range(0, n_boot, rows)])
    else:
        boots = np.array([stat(arr[i]) for i in idx])
    alpha = (1.0 - ci) / 2.0
    lo, hi = np.quantile(boots, [alpha, 1.0 - alpha])  # one call: the same values as one call per bound
    return est, float(lo), float(hi)


def percentile_interval(boot: np.ndarray, ci: float) -> tuple[float, float, int]:
    """(low, high, n finite) percentile interval at `ci` of the finite bootstrap replicates in
    `boot`; (nan, nan, n) with fewer than 2 finite replicates."""
    ok = boot[np.isfinite(boot)]
    if len(ok) < 2:
        return float("nan"), float("nan"), int(len(ok))
    alpha = (1.0 - ci) / 2.0
    lo, hi = np.quantile(ok, [alpha, 1.0 - alpha])
    return float(lo), float(hi), int(len(ok))
