"""Inference on the correlation table: what a random RM ranking scores, how stable a coefficient is
to the RM set, whether one benchmark beats another on the same downstream scores, what the run
could detect, and which findings survive false-discovery-rate control.

* `null_stats`        each coefficient under a random RM ranking of the benchmark: the null mean, its
                      upper quantile and the one-sided p-value P(null >= value); exact over all n!
                      rankings when n <= `EXACT_MAX_N` (7), else `n_perm` seeded random ones
                      (`null_values`); `two_sided_p`, the permutation p-value from the same null.
* `leave_one_out`     the coefficient recomputed without each RM in turn (its min and max).
* `compare`           the paired comparison of benchmarks A and B on the same downstream measure:
                      the difference of their coefficients, a percentile CI from a bootstrap that
                      resamples RMs (with replacement: a repeated RM is a tie) and questions jointly,
                      a permutation test of the difference that swaps A's and B's ranks within each
                      RM (exact over all 2^n swaps when n <= `EXACT_SWAP_MAX_N`, else `n_perm` seeded
                      draws), and for Spearman and Pearson the Williams (1959) t-test for dependent,
                      overlapping correlations (Steiger 1980, eq. 7), uncorrected (descriptive).
* `bh_qvalues`        Benjamini-Hochberg adjusted p-values.

The verdict rule, its decision test and its power are `prbench.analysis.verdict`'s.

Every random draw is seeded from the run's seed and a stable string (`prbench.seeding.stable_seed`).
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
from scipy import stats as sps

from ..seeding import stable_seed
from ..stats import percentile_interval
from . import rankmetrics

EXACT_MAX_N = 7  # n! <= 5040 rankings: enumerate them all (8! = 40320 costs minutes over a run's cells)
EXACT_SWAP_MAX_N = 10  # 2^n <= 1024 swap patterns: enumerate them all
RANK_ONLY = ("spearman", "kendall_tau_b", "weighted_tau", "rbo")  # depend on the scores' rankings only
NORMALISED = ("ndcg", "rbo")  # reported as (value - null mean) / (1 - null mean) too


def pearson(x, y, snapped: bool = False):
    """Pearson's r per row (NaN for a constant or non-finite row); `snapped` is accepted for the
    coefficients' common signature (rankmetrics) and changes nothing: Pearson rounds nothing."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    den = np.sqrt((xc * xc).sum(-1) * (yc * yc).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.clip((xc * yc).sum(-1) / den, -1.0, 1.0)
    r = np.where((den > 0) & np.isfinite(r), r, np.nan)
    return float(r) if r.ndim == 0 else r


# ---- null of one coefficient -------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _all_permutations(n: int) -> np.ndarray:
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    perms.setflags(write=False)
    return perms


def null_values(x, y, fn, n_perm: int, seed: int, name: str, cache: dict | None = None):
    """(values, exact): fn(x, y) when the RMs' benchmark scores x are assigned to the RMs at random (y,
    the downstream measure, fixed): exact over all n! assignments when n <= EXACT_MAX_N, else `n_perm`
    seeded random ones; None when there is nothing to draw (n < 2, n_perm <= 0 beyond EXACT_MAX_N).

    Every coefficient is unchanged when the RMs are relabelled jointly, so the null depends on x only
    through its multiset of ranks and on y only through its multiset of values (of ranks, for the
    coefficients in RANK_ONLY): x's sorted ranks are permuted against y sorted, and the values are
    cached on those multisets (without ties, every pair of a run shares one null per coefficient)."""
    x = rankmetrics.snap(x)
    y = rankmetrics.snap(y)
    n = len(x)
    if n < 2:
        return None
    xs = np.sort(rankmetrics.average_ranks(x))
    ys = np.sort(rankmetrics.average_ranks(y) if name in RANK_ONLY else y)
    key = (name, n, xs.tobytes(), ys.tobytes(), n_perm, seed)
    if cache is not None and key in cache:
        return cache[key]
    exact = n <= EXACT_MAX_N
    if exact:
        perms = _all_permutations(n)
    elif n_perm > 0:
        rng = np.random.default_rng(stable_seed(seed, "correlation-null", name, n))
        perms = rng.permuted(np.broadcast_to(np.arange(n), (n_perm, n)).copy(), axis=1)
    else:
        return None
    values = np.asarray(fn(xs[perms], np.broadcast_to(ys, perms.shape)), dtype=float)
    out = (values[np.isfinite(values)], exact)
    if cache is not None:
        cache[key] = out
    return out


def null_stats(x, y, fn, n_perm: int, seed: int, name: str, q: float = 0.95, cache: dict | None = None):
    """(null mean, null q-quantile, one-sided p = P(null >= value)) of fn(x, y) under `null_values`."""
    value = float(fn(x, y)) if len(x) >= 2 else float("nan")
    return null_summary(value, null_values(x, y, fn, n_perm, seed, name, cache) if np.isfinite(value) else None, q)


def null_summary(value: float, null, q: float = 0.95) -> tuple[float, float, float]:
    """(null mean, null q-quantile, one-sided p = P(null >= value)) from `null_values`' (values, exact):
    p includes the identity when exact, else (1 + hits) / (n_perm + 1); NaNs without a null."""
    if null is None or len(null[0]) == 0 or not np.isfinite(value):
        return float("nan"), float("nan"), float("nan")
    values, exact = null
    p = _share(values >= value - 1e-12, exact)
    # rounded to 12 decimals: an exact null mean of 0 is written as 0, not as -1e-17 or -0
    return round(float(values.mean()), 12) + 0.0, round(float(np.quantile(values, q)), 12) + 0.0, p


def two_sided_p(value: float, null) -> float:
    """Two-sided permutation p-value P(|null| >= |value|) from `null_values`' (values, exact) (NaN
    without a null or a finite value)."""
    if null is None or len(null[0]) == 0 or not np.isfinite(value):
        return float("nan")
    values, exact = null
    return _share(np.abs(values) >= abs(value) - 1e-12, exact)


def _share(hits: np.ndarray, exact: bool) -> float:
    """The exact share of hits, or the Monte Carlo p (1 + hits) / (draws + 1)."""
    k = int(hits.sum())
    return k / len(hits) if exact else (k + 1) / (len(hits) + 1)


def normalised(value: float, null_mean: float) -> float:
    """(value - null mean) / (1 - null mean): 0 = a random ranking, 1 = perfect (NDCG, RBO)."""
    if not (np.isfinite(value) and np.isfinite(null_mean)) or null_mean >= 1:
        return float("nan")
    return float((value - null_mean) / (1.0 - null_mean))


def leave_one_out(x, y, fn) -> np.ndarray:
    """fn without each RM in turn: (n,) values (NaN where undefined); empty when n < 3."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 3:
        return np.empty(0)
    idx = np.array([[j for j in range(n) if j != i] for i in range(n)])
    return np.asarray(fn(x[idx], y[idx]), dtype=float)


def loo_range(values: np.ndarray) -> tuple[float, float]:
    ok = values[np.isfinite(values)]
    return (float(ok.min()), float(ok.max())) if len(ok) else (float("nan"), float("nan"))


# ---- dependent overlapping correlations ----------------------------------------------------------


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' t (Steiger 1980, eq. 7) for H0: rho12 = rho13 when variables 2 and 3 are
    correlated r23 and all three are measured on the same n cases; (t, two-sided p), df = n - 3.

    t = (r12 - r13) sqrt((n - 1)(1 + r23)) / sqrt(2 (n - 1)/(n - 3) |R| + rbar^2 (1 - r23)^3),
    |R| = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23, rbar = (r12 + r13) / 2."""
    r12, r13, r23 = (np.asarray(v, dtype=float) for v in (r12, r13, r23))
    if n < 4:
        nan = np.full(np.broadcast(r12, r13, r23).shape, np.nan)
        return (float(nan), float(nan)) if nan.ndim == 0 else (nan, nan)
    det = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    rbar = (r12 + r13) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (r12 - r13) * np.sqrt((n - 1) * (1 + r23)) / np.sqrt(
            2 * (n - 1) / (n - 3) * det + rbar**2 * (1 - r23) ** 3)
    p = 2 * sps.t.sf(np.abs(t), n - 3)
    if np.ndim(t) == 0:
        return float(t), float(p)
    return t, p


# ---- paired comparison of two benchmarks ---------------------------------------------------------


def rm_resamples(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) indices of RMs drawn with replacement (shared by every comparison of a run)."""
    rng = np.random.default_rng(stable_seed(seed, "correlation-rm-bootstrap", n))
    return rng.integers(0, n, size=(n_boot, n))


@functools.lru_cache(maxsize=None)
def _all_swaps(n: int) -> np.ndarray:
    swaps = np.array(list(itertools.product((False, True), repeat=n)), dtype=bool)
    swaps.setflags(write=False)
    return swaps


def _swap_patterns(n: int, n_perm: int, seed: int) -> tuple[np.ndarray, bool]:
    if n <= EXACT_SWAP_MAX_N:
        return _all_swaps(n), True
    rng = np.random.default_rng(stable_seed(seed, "correlation-swap", n))
    return rng.random((n_perm, n)) < 0.5, False


def _comparable(v: np.ndarray, coefficient: str) -> np.ndarray:
    """The per-RM values swapped by the permutation test: z-scores for Pearson, average ranks
    otherwise (every other coefficient depends on the benchmark score through its ranking only)."""
    if coefficient == "pearson":
        return (v - v.mean()) / v.std()
    return rankmetrics.average_ranks(v)


def swap_pvalue(xa, xb, y, fn, coefficient: str, n_perm: int, seed: int) -> float:
    """Two-sided permutation p-value of fn(xa, y) - fn(xb, y), swapping A's and B's (standardised)
    scores within each RM. Exact over all 2^n swaps when n <= EXACT_SWAP_MAX_N."""
    xa, xb, y = (rankmetrics.snap(v) for v in (xa, xb, y))
    n = len(y)
    if n < 3 or (n > EXACT_SWAP_MAX_N and n_perm <= 0):
        return float("nan")
    ca, cb = _comparable(xa, coefficient), _comparable(xb, coefficient)
    observed = float(fn(ca, y)) - float(fn(cb, y))
    if not np.isfinite(observed):
        return float("nan")
    swaps, exact = _swap_patterns(n, n_perm, seed)
    a = np.where(swaps, cb, ca)
    b = np.where(swaps, ca, cb)
    yy = np.broadcast_to(y, swaps.shape)
    # ranks (exact halves), z-scores (Pearson rounds nothing) and the snapped y: nothing to round again
    diffs = np.asarray(fn(a, yy, snapped=True), dtype=float) - np.asarray(fn(b, yy, snapped=True), dtype=float)
    diffs = diffs[np.isfinite(diffs)]
    hits = int((np.abs(diffs) >= abs(observed) - 1e-12).sum())
    return hits / len(diffs) if exact else (hits + 1) / (len(diffs) + 1)


def compare(xa, xb, y, boot_a, boot_b, boot_y, rm_idx, fn, coefficient: str, ci: float, n_perm: int,
            seed: int) -> dict:
    """Benchmark A vs B on downstream y (all (n,) point values; boot_*: (B, n) bootstrap replicates
    over questions and, for a downstream measure with several replicates, its sample sets / seeds
    (`prbench.analysis.correlation.evaluate_scores`); rm_idx: (B, n) RM resamples): values,
    difference, joint RM+question bootstrap CI, swap permutation p, Williams p (Spearman, Pearson),
    leave-one-RM-out range of the difference."""
    n = len(y)
    va, vb = float(fn(xa, y)), float(fn(xb, y))
    diff = va - vb
    out = {"value_a": va, "value_b": vb, "diff": diff}
    lo = hi = float("nan")
    n_ok = 0
    if len(rm_idx):
        rows = np.arange(len(rm_idx))[:, None]
        ra = rankmetrics.snap(boot_a[rows, rm_idx])
        rb = rankmetrics.snap(boot_b[rows, rm_idx])
        ry = rankmetrics.snap(boot_y[rows, rm_idx])
        reps = np.asarray(fn(ra, ry, snapped=True), dtype=float) - np.asarray(fn(rb, ry, snapped=True), dtype=float)
        lo, hi, n_ok = percentile_interval(reps, ci)
    out.update(ci_low=lo, ci_high=hi, n_boot=n_ok)
    out["p_perm"] = swap_pvalue(xa, xb, y, fn, coefficient, n_perm, seed)
    out["p_williams"] = float("nan")
    if coefficient in ("spearman", "pearson") and np.isfinite(diff):
        r_ab = float(fn(xa, xb))
        if np.isfinite(r_ab):
            out["p_williams"] = williams_test(va, vb, r_ab, n)[1]
    loo = leave_one_out(xa, y, fn) - leave_one_out(xb, y, fn)
    out["loo_min"], out["loo_max"] = loo_range(loo)
    return out


# ---- false discovery rate ------------------------------------------------------------------------


def bh_qvalues(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values of the finite entries (NaN stays NaN)."""
    p = np.asarray(p, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return q
    order = ok[np.argsort(p[ok], kind="stable")]
    ranked = p[order] * m / np.arange(1, m + 1)
    q[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    return q
