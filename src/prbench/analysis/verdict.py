"""The verdict rule: does the personalized benchmark predict downstream quality better than a
baseline? One test decides each cell of a family declared before the run
(`correlation.confirmatory`), Benjamini-Hochberg controls the family, and the rule's size and power
are simulated by calling the very function the run calls (`decide_family`).

The test carries both levels of the measurement (docs/protocol.yaml, "What each uncertainty
covers"). The difference of two Spearman coefficients, d = rho(A, y) - rho(B, y), varies
- with the RMs (which RMs were chosen): Williams' (1959) variance for two dependent correlations
  that share a variable (Steiger 1980, eq. 7; `prbench.analysis.inference.williams_test`) with
  Bonett & Wright's (2000) factor 1 + rbar^2 / 2 for Spearman's rho, `se_rm`;
- with the questions, samples, judge ratings and benchmark pairs the RM-level values are computed
  from, which every RM shares (RMs that pick alike share the judge's noise; the accuracies share
  the same pairs): the variance of d over the run's measurement bootstrap with the RMs held fixed
  (`measurement_variance`: the correlation stage's joint question bootstrap, BoN sample sets and
  training seeds included), `se_meas`.
t = d / sqrt(se_rm^2 + se_meas^2) on n - 3 degrees of freedom. The two levels add (the law of total
variance: the spread of d over RMs given the measurement, plus its spread over measurements given
the RMs). Where the cell's plug-in correlation matrix is singular (a coefficient of +-1, identical
or reversed rankings), Williams' variance collapses to 0 whatever the data; there `se_rm` is the
largest of Williams', the leave-one-RM-out jackknife's and the exact variance of d when y is
unrelated to both benchmarks (2 (1 - r_ab) / (n - 1)), so a boundary cannot decide on nothing.
Identical rankings (d = 0) give t = 0, p = 1: "undecided".

Why this test (chosen by simulation: `python -m prbench.analysis.verdict`, perf/README.md): on
RM-level values Williams' corrected t holds its size and is far more powerful than a bootstrap or a
jackknife over RMs, which are conservative when the benchmarks are inter-correlated; on data made
at the level of questions, samples, a judge and pairs shared by all RMs (`prbench.analysis.worlds`)
Williams' t alone decides a null world several times its nominal rate, and the measurement term
brings it back; it is closed form plus one bootstrap the run already has, so the rule can be
simulated thousands of times inside the correlations job.

Where the test is not used. Below `MIN_RMS` RMs a cell is "cannot decide". Where a cell lies outside
the region whose size was checked by simulation (`CHECKED`), its reason says so.

The interval shown beside a verdict is the test's own (difference +- t quantile x the standard
error the test divides by) at the family's false-coverage level 1 - max(R, 1) q / m (Benjamini &
Yekutieli 2005; R cells decided, m declared cells): it excludes 0 exactly when the cell is decided.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ..seeding import stable_seed
from . import inference, rankmetrics

MIN_RMS = 10  # fewer RMs: "cannot decide"
TEST = "williams_bw_meas"
TEST_LABEL = "Williams' t on Spearman (Bonett-Wright factor) with the measurement variance added"
PERSONALIZED, BASELINE, UNDECIDED, CANNOT, UNDEFINED = (
    "personalized", "baseline", "undecided", "cannot decide", "undefined")
SINGULAR_TOL = 1e-9  # det of the plug-in correlation matrix at or below this: Williams' variance has collapsed
# The region whose size held in simulation (size_grid, tests/test_verdict.py; perf/README.md): population
# Spearman up to 0.9 (|rbar| here) from 20 RMs on, up to 0.8 below 20 (at 0.9 and 10-12 RMs the family's
# false-win rate was 0.068-0.069 against a limit of 0.065), benchmark inter-correlation -0.3 to 0.9,
# with and without ties. A cell outside it is decided all the same, and its reason says so.
CHECKED = {"n_min": MIN_RMS, "rho_max": 0.9, "rho_max_below_20": 0.8, "rho_ab_min": -0.3, "rho_ab_max": 0.9}
POWER_TARGET = 0.8
POWER_GAPS = (0.2, 0.3, 0.5)
POWER_N_GRID = tuple(range(MIN_RMS, 31)) + tuple(range(35, 101, 5)) + tuple(range(120, 301, 20)) + (350, 400, 500)
GAP_GRID = tuple(round(0.05 * i, 2) for i in range(1, 41))  # 0.05 .. 2.00


def _ranks(v: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis after rounding to the ties' precision (rankmetrics.snap)."""
    return sps.rankdata(rankmetrics.snap(v), axis=-1, method="average")


def spearman_triplet(xa, xb, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rho(A, y), rho(B, y), rho(A, B)) per row of (..., n) arrays (NaN for a constant side)."""
    ra, rb, ry = (_ranks(np.asarray(v, dtype=float)) for v in (xa, xb, y))
    # Spearman = Pearson of the average ranks (inference.pearson: NaN for a constant row)
    return tuple(np.asarray(inference.pearson(u, v)) for u, v in ((ra, ry), (rb, ry), (ra, rb)))


def williams_bw(r_a, r_b, r_ab, n):
    """(t, se): the corrected Williams statistic t = (r_a - r_b) / se on n - 3 df, and its se (the
    RM level alone). NaN where undefined (n < 4, a NaN coefficient, or a variance of 0)."""
    r_a, r_b, r_ab = (np.asarray(v, dtype=float) for v in (r_a, r_b, r_ab))
    n = np.asarray(n, dtype=float)
    rbar = (r_a + r_b) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        var = 2 * (n - 1) / (n - 3) * np.maximum(_det(r_a, r_b, r_ab), 0.0) + rbar**2 * (1 - r_ab) ** 3
        se = np.sqrt(var * (1 + rbar**2 / 2) / ((n - 1) * (1 + r_ab)))
        t = (r_a - r_b) / se
    bad = (n < 4) | ~np.isfinite(t) | ~np.isfinite(se) | ~(se > 0)
    return np.where(bad, np.nan, t), np.where(bad, np.nan, se)


def _det(r_a, r_b, r_ab):
    """Determinant of the 3 x 3 correlation matrix of (y, A, B)."""
    return 1 - r_a**2 - r_b**2 - r_ab**2 + 2 * r_a * r_b * r_ab


def pvalue(t, n):
    """Two-sided p of t on n - 3 df (NaN stays NaN)."""
    t = np.asarray(t, dtype=float)
    df = np.maximum(np.asarray(n, dtype=float) - 3, 1)
    return np.where(np.isfinite(t), 2 * sps.t.sf(np.abs(t), df), np.nan)


def spearman_difference(xa, xb, y) -> np.ndarray:
    """rho(A, y) - rho(B, y) per row of (..., n) arrays."""
    r_a, r_b, _ = spearman_triplet(xa, xb, y)
    return r_a - r_b


def measurement_variance(reps_a, reps_b, reps_y) -> np.ndarray:
    """The variance (ddof 1) of the Spearman difference over measurement replicates of the per-RM
    values, the RMs held fixed: arrays (..., B, n) -> (...). The run's replicates are its question
    bootstrap (`prbench.analysis.scores.evaluate_scores`: the questions shared by the personalized
    accuracies and every downstream mean resampled jointly, each baseline's pairs on their own, BoN
    sample sets and training seeds redrawn). Replicates where a side is constant are left out; fewer
    than 2 left: 0."""
    d = spearman_difference(reps_a, reps_b, reps_y)
    ok = np.isfinite(d)
    k = ok.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(ok, d, 0.0).sum(-1) / k
        var = np.where(ok, (d - mean[..., None]) ** 2, 0.0).sum(-1) / (k - 1)
    return np.where(k >= 2, var, 0.0)


def jackknife_se(xa, xb, y) -> np.ndarray:
    """Leave-one-RM-out jackknife standard error of the Spearman difference, per row of (..., n)."""
    xa, xb, y = (np.asarray(v, dtype=float) for v in (xa, xb, y))
    n = y.shape[-1]
    idx = np.array([[j for j in range(n) if j != i] for i in range(n)])
    d = spearman_difference(xa[..., idx], xb[..., idx], y[..., idx])
    ok = np.isfinite(d)
    k = ok.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(ok, d, 0.0).sum(-1) / k
        ss = np.where(ok, (d - mean[..., None]) ** 2, 0.0).sum(-1)
        return np.where(k >= 2, np.sqrt((k - 1) / k * ss), np.nan)


def rm_se(xa, xb, y, r_a, r_b, r_ab, n: int) -> np.ndarray:
    """The RM-level standard error of the difference: Williams' (Bonett-Wright) where the plug-in
    correlation matrix is regular; where it is singular (|coefficient| 1, identical or reversed
    rankings: Williams' variance collapses), the largest of Williams', the jackknife's and the
    difference's exact variance when y is unrelated to both benchmarks, 2 (1 - r_ab) / (n - 1)."""
    shape = np.shape(r_a)
    _, se_w = williams_bw(r_a, r_b, r_ab, n)
    r_a, r_b, r_ab, se_w = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (r_a, r_b, r_ab, se_w))
    finite = np.isfinite(r_a) & np.isfinite(r_b) & np.isfinite(r_ab)
    singular = finite & ((_det(r_a, r_b, r_ab) <= SINGULAR_TOL) | ~np.isfinite(se_w))
    se = se_w.copy()
    if n >= 4 and singular.any():
        xa, xb, y = (np.broadcast_to(np.asarray(v, dtype=float), singular.shape + (n,)) for v in (xa, xb, y))
        jack = jackknife_se(xa[singular], xb[singular], y[singular])
        perm = np.sqrt(np.maximum(2 * (1 - r_ab[singular]) / (n - 1), 0.0))
        se[singular] = np.fmax(np.fmax(np.nan_to_num(se_w[singular], nan=0.0), np.nan_to_num(jack, nan=0.0)), perm)
    return se.reshape(shape)
    return se


def in_checked_range(n, r_a, r_b, r_ab) -> np.ndarray:
    """Whether a cell lies in the region whose size was checked by simulation (`CHECKED`)."""
    rbar = np.abs((np.asarray(r_a, dtype=float) + np.asarray(r_b, dtype=float)) / 2)
    r_ab = np.asarray(r_ab, dtype=float)
    rho_max = np.where(np.asarray(n) >= 20, CHECKED["rho_max"], CHECKED["rho_max_below_20"])
    with np.errstate(invalid="ignore"):
        return ((np.asarray(n) >= CHECKED["n_min"]) & (rbar <= rho_max + 1e-9)
                & (r_ab >= CHECKED["rho_ab_min"] - 1e-9) & (r_ab <= CHECKED["rho_ab_max"] + 1e-9))


def bh_qvalues(p: np.ndarray, m: int | None = None) -> np.ndarray:
    """Benjamini-Hochberg q-values along the last axis over m tests (default: the axis length);
    a NaN p counts as 1 (a declared cell that could not be tested stays in the family)."""
    p = np.where(np.isfinite(p), p, 1.0)
    m = p.shape[-1] if m is None else m
    order = np.argsort(p, axis=-1, kind="stable")
    ps = np.take_along_axis(p, order, -1)
    ranked = ps * m / np.arange(1, p.shape[-1] + 1)
    q_sorted = np.minimum(1.0, np.flip(np.minimum.accumulate(np.flip(ranked, -1), axis=-1), -1))
    q = np.empty_like(q_sorted)
    np.put_along_axis(q, order, q_sorted, -1)
    return q


@dataclass
class Cell:
    """One declared cell: the personalized benchmark's score, the baseline's and the downstream
    measure of each RM, arrays (..., n) (leading axes: independent draws, as in a simulation; the
    run passes one draw), and the Spearman difference's measurement variance (..., ) or a scalar
    (`measurement_variance` of the run's replicates; 0 = exact values)."""
    xa: np.ndarray
    xb: np.ndarray
    y: np.ndarray
    var_meas: np.ndarray | float = 0.0

    @classmethod
    def from_replicates(cls, xa, xb, y, reps_a=None, reps_b=None, reps_y=None) -> "Cell":
        """A cell whose measurement variance comes from replicates (B, n) (or (..., B, n)) of the
        three per-RM values; None = exact values."""
        if reps_a is None:
            return cls(xa, xb, y, 0.0)
        return cls(xa, xb, y, measurement_variance(reps_a, reps_b, reps_y))


def _as_cell(c) -> Cell:
    if isinstance(c, Cell):
        return c
    return Cell(*c)  # (xa, xb, y) exact, or (xa, xb, y, var_meas)


@dataclass
class Family:
    """`decide_family`'s answer: arrays of shape (..., m), one column per declared cell."""
    n: np.ndarray
    value_a: np.ndarray
    value_b: np.ndarray
    r_ab: np.ndarray
    diff: np.ndarray
    t: np.ndarray
    se: np.ndarray
    se_rm: np.ndarray
    se_meas: np.ndarray
    p: np.ndarray
    q: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    ci_level: np.ndarray
    checked: np.ndarray
    verdict: np.ndarray  # strings
    reason: np.ndarray  # strings
    fdr: float
    min_rms: int

    def rate(self, verdict: str) -> np.ndarray:
        """Share of rows (simulations) with this verdict, per cell."""
        return (self.verdict == verdict).mean(axis=tuple(range(self.verdict.ndim - 1)))


def decide_family(cells, fdr: float, min_rms: int | None = None) -> Family:
    """The verdict of every cell of one family.

    cells: [Cell or (xa, xb, y[, var_meas]), ...], one per declared cell (`Cell`). min_rms: a
    user's extra requirement (correlation.min_rms; None = only MIN_RMS)."""
    need = max(MIN_RMS, int(min_rms or 0))
    cols = {k: [] for k in ("n", "a", "b", "ab", "t", "se", "se_rm", "se_meas", "p")}
    for raw in cells:
        c = _as_cell(raw)
        xa, xb, y = (np.asarray(v, dtype=float) for v in (c.xa, c.xb, c.y))
        n = y.shape[-1]
        r_a, r_b, r_ab = spearman_triplet(xa, xb, y)
        se_rm = rm_se(xa, xb, y, r_a, r_b, r_ab, n)
        se_meas = np.sqrt(np.maximum(np.broadcast_to(np.asarray(c.var_meas, dtype=float), r_a.shape), 0.0))
        se = np.sqrt(se_rm**2 + se_meas**2)
        diff = r_a - r_b
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(se > 0, diff / se, np.where(diff == 0, 0.0, np.nan))  # identical rankings: t = 0
        t = np.where((n >= 4) & np.isfinite(diff), t, np.nan)
        p = pvalue(t, n)
        for k, v in (("n", np.full(r_a.shape, n)), ("a", r_a), ("b", r_b), ("ab", r_ab), ("t", t), ("se", se),
                     ("se_rm", se_rm), ("se_meas", se_meas), ("p", np.where(n >= need, p, np.nan))):
            cols[k].append(v)
    st = {k: np.stack(v, axis=-1) for k, v in cols.items()}
    m = st["n"].shape[-1]
    q = bh_qvalues(st["p"], m)
    decided = np.isfinite(st["p"]) & (q <= fdr)
    q = np.where(np.isfinite(st["p"]), q, np.nan)  # an untested cell counts in m (p = 1) but has no q
    n_decided = decided.sum(-1, keepdims=True)
    alpha = np.maximum(n_decided, 1) * fdr / m
    level = np.broadcast_to(1 - alpha, st["p"].shape)
    tq = sps.t.ppf(1 - alpha / 2, np.maximum(st["n"] - 3, 1))
    diff = st["a"] - st["b"]
    use = np.isfinite(st["p"])
    # clipped to the difference's range [-2, 2] (clipping never moves an end across 0)
    lo = np.where(use, np.clip(diff - tq * st["se"], -2.0, 2.0), np.nan)
    hi = np.where(use, np.clip(diff + tq * st["se"], -2.0, 2.0), np.nan)
    checked = in_checked_range(st["n"], st["a"], st["b"], st["ab"])
    verdict, reason = _words(st, diff, q, decided, checked, fdr, need, m)
    return Family(st["n"].astype(int), st["a"], st["b"], st["ab"], diff, st["t"], st["se"], st["se_rm"],
                  st["se_meas"], st["p"], q, lo, hi, level, checked, verdict, reason, fdr, need)


def _words(st: dict, diff, q, decided, checked, fdr: float, need: int, m: int):
    n, p = st["n"], st["p"]
    verdict = np.full(p.shape, UNDECIDED, dtype=object)
    reason = np.full(p.shape, "", dtype=object)
    undefined = ~np.isfinite(diff) | ((n >= need) & ~np.isfinite(p))
    few = ~undefined & (n < need)
    win = decided & ~undefined & ~few
    verdict[win] = np.where(diff[win] > 0, PERSONALIZED, BASELINE)
    verdict[undefined] = UNDEFINED
    verdict[few] = CANNOT
    if verdict.size <= 64:  # the run's single draw: say why (a simulation needs the codes only)
        for i in np.ndindex(p.shape):
            reason[i] = _reason(verdict[i], int(n[i]), p[i], q[i], bool(checked[i]), fdr, need, m)
    return verdict, reason


def _reason(verdict, n, p, q, checked, fdr, need, m) -> str:
    if verdict == UNDEFINED:
        return "the coefficients are undefined (a side constant across the RMs, or fewer than 4 RMs)"
    if verdict == CANNOT:
        return (f"cannot decide at {n} RMs: the rule decides from {need} RMs "
                f"(MIN_RMS {MIN_RMS}{'' if need == MIN_RMS else ', correlation.min_rms ' + str(need)})")
    sign = ">" if verdict == UNDECIDED else "<="
    text = f"q = {q:.3g} {sign} {fdr:g} (BH over the {m} confirmatory cells; p = {p:.3g})"
    if not checked:
        text += (f"; outside the range whose size was checked (|mean Spearman| <= {CHECKED['rho_max']} from 20 RMs, "
                 f"{CHECKED['rho_max_below_20']} below; inter-correlation {CHECKED['rho_ab_min']} to "
                 f"{CHECKED['rho_ab_max']})")
    return text


# ---- simulation at the RM level: draws, measurement noise, the rule's power and size ---------------


def spearman_to_pearson(rho):
    """The Pearson correlation of a bivariate normal whose Spearman correlation is rho."""
    return 2.0 * np.sin(np.pi * np.asarray(rho, dtype=float) / 6.0)


def _cholesky(center: float, gap: float, rho_ab: float) -> np.ndarray | None:
    """The Cholesky factor of the normal scores' correlation matrix (y, A, B) whose Spearman
    correlations are rho(A, y) = center + gap/2, rho(B, y) = center - gap/2, rho(A, B) = rho_ab;
    None when no correlation matrix has them."""
    s_a, s_b = center + gap / 2, center - gap / 2
    if max(abs(s_a), abs(s_b), abs(rho_ab)) > 1:
        return None
    r = spearman_to_pearson([s_a, s_b, rho_ab])
    cov = np.array([[1, r[0], r[1]], [r[0], 1, r[2]], [r[1], r[2], 1]])
    if np.linalg.eigvalsh(cov).min() <= 1e-9:
        return None
    return np.linalg.cholesky(cov)


def possible(center: float, gap: float, rho_ab: float) -> bool:
    """Whether population Spearman correlations center +- gap/2 with the downstream measure and
    rho_ab between the benchmarks form a correlation matrix (of normal scores)."""
    return _cholesky(center, gap, rho_ab) is not None


def cut_levels(v: np.ndarray, levels: int) -> np.ndarray:
    """Normal scores cut into `levels` equally likely levels (ties, as in a judge's 0/1/2 ratings)."""
    return np.digitize(v, sps.norm.ppf(np.arange(1, levels) / levels)).astype(float)


def draw_cell(center: float, gap: float, rho_ab: float, n: int, n_sims: int, rng, levels: int | None = None
              ) -> tuple | None:
    """n_sims samples of n RMs: (xa, xb, y) of normal scores whose population Spearman
    correlations are rho(A, y) = center + gap/2, rho(B, y) = center - gap/2, rho(A, B) = rho_ab
    (both benchmarks cut to `levels` levels when given); None when no correlation matrix has them."""
    chol = _cholesky(center, gap, rho_ab)
    if chol is None:
        return None
    z = rng.standard_normal((n_sims, n, 3)) @ chol.T
    xa, xb, y = z[..., 1], z[..., 2], z[..., 0]
    if levels:
        xa, xb = cut_levels(xa, levels), cut_levels(xb, levels)
    return xa, xb, y


def measurement_noise_sd(var_meas: float, center: float, rho_ab: float, n: int, seed: int = 0,
                         sims: int = 200, reps: int = 16) -> float:
    """The SD of independent N(0, sd^2) noise on the downstream scores (normal-score scale) under
    which the Spearman difference varies by var_meas over the noise at n RMs (the RMs held fixed):
    how the power simulation gives its draws a run's measurement variance. Bisection over sd with
    common random numbers; 0 for var_meas 0; capped at 10 (the downstream ranking is then noise)."""
    if not (np.isfinite(var_meas) and var_meas > 0) or n < 4:
        return 0.0
    rng = np.random.default_rng(stable_seed(seed, "verdict-noise", int(n)))
    chol = _cholesky(float(np.clip(center, -0.99, 0.99)), 0.0, float(np.clip(rho_ab, -0.99, 0.99)))
    if chol is None:
        chol = np.eye(3)
    z = rng.standard_normal((sims, 1, n, 3)) @ chol.T
    e = rng.standard_normal((sims, reps, n))

    def induced(sd: float) -> float:
        d = spearman_difference(z[..., 1], z[..., 2], z[..., 0] + sd * e)
        return float(np.nanmean(np.nanvar(d, axis=-1, ddof=1)))

    lo, hi = -3.0, 1.0  # log10 sd
    if induced(10.0**hi) <= var_meas:
        return 10.0**hi
    for _ in range(20):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if induced(10.0**mid) < var_meas else (lo, mid)
    return float(10.0 ** ((lo + hi) / 2))


class PowerDraws:
    """Common random numbers for the power simulation: cell j's draws come from one stream
    (seed, j), nested in n (n RMs = the stream's first n), shared by every gap, so power is
    monotone in the gap and the RMs up to Monte Carlo noise that no longer differs between calls."""

    def __init__(self, n_sims: int, seed: int):
        self.n_sims, self.seed, self._cache = n_sims, seed, {}

    def get(self, j: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        z, e = self._cache.get(j, (None, None))
        if z is None or z.shape[1] < n:
            rng = np.random.default_rng(stable_seed(self.seed, "verdict-power", j))
            size = max(n, max(POWER_N_GRID))
            z, e = rng.standard_normal((self.n_sims, size, 3)), rng.standard_normal((self.n_sims, size))
            self._cache[j] = (z, e)
        return z[:, :n], e[:, :n]


def rule_power(specs, ns, gap, n_sims: int, fdr: float, seed: int, min_rms: int | None = None,
               meas=None, draws: PowerDraws | None = None) -> np.ndarray:
    """Per cell, the share of n_sims simulated families in which `decide_family` decides for the
    side the cell's gap favours ("personalized" for a gap > 0). specs[j] = (center_j, rho_ab_j),
    ns[j] its RMs; gap: one gap for every cell, or one per cell (0 = a null cell); meas[j] =
    (noise_sd, var_meas at ns[j]) or None (exact values): the draws' downstream scores get the
    noise and the test the variance. A cell whose correlations are impossible gives NaN and enters
    BH as untested (p = 1)."""
    draws = draws or PowerDraws(n_sims, seed)
    gaps = np.broadcast_to(np.asarray(gap, dtype=float), (len(specs),))
    cells, ok = [], []
    for j, ((center, rho_ab), n) in enumerate(zip(specs, ns)):
        chol = _cholesky(center, float(gaps[j]), rho_ab)
        ok.append(chol is not None)
        if chol is None:  # untestable: a constant side makes every coefficient undefined
            cells.append((np.zeros((n_sims, n)),) * 3)
            continue
        z, e = draws.get(j, n)
        v = z @ chol.T
        sd, var = meas[j] if meas is not None and meas[j] is not None else (0.0, 0.0)
        cells.append(Cell(v[..., 1], v[..., 2], v[..., 0] + sd * e, var))
    fam = decide_family(cells, fdr, min_rms)
    rate = np.where(gaps >= 0, fam.rate(PERSONALIZED), fam.rate(BASELINE))
    return np.where(ok, rate, np.nan)


def power_rows(cells: list[dict], n_sims: int, fdr: float, seed: int, min_rms: int | None = None) -> list[dict]:
    """Per confirmatory cell (dicts with center, rho_ab, n, diff and optionally var_meas, the run's
    measurement variance of the difference): the smallest Spearman gap the rule detects with
    POWER_TARGET power at the cell's n, and the RMs each gap of POWER_GAPS and the observed |diff|
    need; `gap_in` "all cells" when every cell of the family carries the gap, "this cell" when it
    alone does (the others null). The measurement variance is the run's, scaled by n_obs / n (that
    of a correlation). Cells with the same centre, inter-correlation, RMs and measurement variance
    share one power curve (their rates pooled). Impossible gaps are named; `n_rms` NaN = beyond 500."""
    specs = [(float(np.clip(c["center"], -0.99, 0.99)) if np.isfinite(c["center"]) else 0.0,
              float(np.clip(c["rho_ab"], -0.99, 0.99)) if np.isfinite(c["rho_ab"]) else 0.0) for c in cells]
    var_obs = [float(c.get("var_meas", 0.0) or 0.0) if np.isfinite(c.get("var_meas", 0.0) or 0.0) else 0.0
               for c in cells]
    own_n = tuple(int(c["n"]) for c in cells)
    noise = [measurement_noise_sd(v, s[0], s[1], n, seed) for v, s, n in zip(var_obs, specs, own_n)]
    group = {}
    for j, key in enumerate(zip(specs, own_n, [round(v, 12) for v in var_obs])):
        group.setdefault(key, []).append(j)
    members = [group[k] for k in zip(specs, own_n, [round(v, 12) for v in var_obs])]
    draws = PowerDraws(n_sims, seed)
    cache: dict = {}
    m = len(cells)

    def power(ns: tuple, gaps: tuple) -> np.ndarray:
        key = (ns, gaps)
        if key not in cache:
            meas = [(noise[j], var_obs[j] * own_n[j] / ns[j]) for j in range(m)]
            cache[key] = rule_power(specs, list(ns), np.array(gaps), n_sims, fdr, seed, min_rms, meas, draws)
        return cache[key]

    def pooled(j: int, ns_of, gap: float, alone: bool) -> float:
        """Cell j's power, pooled over the cells identical to it (each carrying the gap in turn when alone)."""
        rates = []
        for i in members[j]:
            gaps = tuple(gap if (not alone or k == i) else 0.0 for k in range(m))
            rates.append(power(ns_of(i), gaps)[i])
        return float(np.mean(rates))

    rows = []
    for j, c in enumerate(cells):
        base = {"center": specs[j][0], "rho_ab": specs[j][1], "fdr": fdr, "family_size": m,
                "target_power": POWER_TARGET, "n_sims": n_sims}
        observed = float(round(abs(float(c["diff"])), 2)) if np.isfinite(c["diff"]) else np.nan
        for alone in (False, True):
            gap_in = "this cell" if alone else "all cells"
            grid = [g for g in GAP_GRID if possible(specs[j][0], g, specs[j][1])]
            found = _bisect(grid, lambda g, j=j, alone=alone: pooled(j, lambda i: own_n, g, alone))
            rows.append({**base, "quantity": "min_gap", "gap_in": gap_in, "gap": found[0] if found else np.nan,
                         "n_rms": own_n[j], "power": found[1] if found else np.nan, "possible": bool(grid)})
            for what, gap in [("rms_needed", g) for g in POWER_GAPS] + [("rms_needed_observed", observed)]:
                ok = np.isfinite(gap) and gap > 0 and possible(specs[j][0], gap, specs[j][1])
                found = _bisect(list(POWER_N_GRID), lambda n, g=gap, j=j, alone=alone: pooled(
                    j, lambda i: (n,) * m, g, alone)) if ok else None
                rows.append({**base, "quantity": what, "gap_in": gap_in, "gap": gap,
                             "n_rms": found[0] if found else np.nan, "power": found[1] if found else np.nan,
                             "possible": bool(ok)})
    return rows


def _bisect(grid: list, power_at) -> tuple | None:
    """(the smallest grid value with power >= POWER_TARGET, its power), power monotone in the grid."""
    lo, hi, found = 0, len(grid) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        pw = power_at(grid[mid])
        if np.isfinite(pw) and pw >= POWER_TARGET:
            found, hi = (grid[mid], float(pw)), mid - 1
        else:
            lo = mid + 1
    return found


# ---- the rule's size on a grid (a command anyone can rerun) ----------------------------------------

SIZE_NS = (10, 12, 20, 30)
SIZE_RHOS = (0.3, 0.6, 0.8, 0.9)
SIZE_INTER = (-0.3, 0.2, 0.5, 0.9)


def size_grid(ns=SIZE_NS, rhos=SIZE_RHOS, inter=SIZE_INTER, levels=(None, 3), m: int = 3, n_sims: int = 4000,
              fdr: float = 0.05, seed: int = 0) -> list[dict]:
    """False-win rate of the whole rule (any cell of an all-null family of m cells decided) under
    equal population correlations rho with the downstream measure, exact RM-level values, with the
    benchmarks continuous or cut to `levels` levels (ties)."""
    out = []
    for lv in levels:
        for n in ns:
            for rho in rhos:
                for r_ab in inter:
                    if not possible(rho, 0.0, r_ab):
                        continue
                    rng = np.random.default_rng(stable_seed(seed, "verdict-size", n, rho, r_ab, lv or 0))
                    cells = [draw_cell(rho, 0.0, r_ab, n, n_sims, rng, lv) for _ in range(m)]
                    fam = decide_family(cells, fdr)
                    wins = np.isin(fam.verdict, [PERSONALIZED, BASELINE])
                    out.append({"levels": lv or 0, "n": n, "rho": rho, "rho_ab": r_ab,
                                "false_win": float(wins.any(-1).mean()), "per_cell": float(wins.mean()),
                                "mcse": float(np.sqrt(fdr * (1 - fdr) / n_sims))})
    return out


def main(argv=None) -> None:  # python -m prbench.analysis.verdict [--quick]
    import argparse

    from . import worlds

    ap = argparse.ArgumentParser(description="The verdict rule's size and power, simulated by the function "
                                             "the run calls")
    ap.add_argument("--sims", type=int, default=4000, help="families per size-grid row (default 4000)")
    ap.add_argument("--world-sims", type=int, default=1000, help="families per question-level world (default 1000)")
    args = ap.parse_args(argv)
    print(f"Test: {TEST_LABEL}; BH over the family at q = 0.05.")
    print(f"1. RM-level values: false-win rate of a family of 3 null cells ({args.sims} draws a row; "
          "levels 3 = both benchmarks cut to 3 levels, ties):")
    print("levels\tn\trho\trho_ab\tany cell\tper cell\tlimit (0.05 + 3 SE)")
    for r in size_grid(n_sims=args.sims):
        lim = 0.05 + 3 * r["mcse"]
        flag = "" if r["false_win"] <= lim else "\tABOVE"
        print(f"{r['levels']}\t{r['n']}\t{r['rho']}\t{r['rho_ab']}\t{r['false_win']:.4f}\t{r['per_cell']:.4f}\t"
              f"{lim:.4f}{flag}")
    print(f"2. Question-level worlds (prbench.analysis.worlds; {args.world_sims} families each, 2 cells):")
    print("world\tdecided\tpersonalized\tbaseline\tRM level alone (Williams)")
    for name, spec in worlds.NAMED.items():
        r = worlds.rates(spec, args.world_sims, seed=0)
        print(f"{name}\t{r['decided']:.3f}\t{r['personalized']:.3f}\t{r['baseline']:.3f}\t{r['rm_level']:.3f}")
    print("   graded world, 35 RMs (judge = w personal + (1 - w) general):")
    for w, spec in worlds.graded().items():
        r = worlds.rates(spec, args.world_sims // 2, seed=0)
        print(f"w {w}\tpersonalized {r['personalized']:.3f}\tbaseline {r['baseline']:.3f}")
    # config.yaml's family: BoN, PPO, GRPO x RewardBench, RM-Bench = 6 cells, centred between the paper's
    # reported Spearman coefficients (0.257, 0.371), exact values
    rows = power_rows([{"center": 0.3, "rho_ab": 0.5, "n": 5, "diff": 0.5}] * 6, 1000, 0.05, seed=0)
    for gap_in in ("all cells", "this cell"):
        need = ", ".join(f"gap {r['gap']:.1f}: {r['n_rms']} RMs" for r in rows[:10]
                         if r["quantity"] == "rms_needed" and r["gap_in"] == gap_in)
        print(f"3. config.yaml's family (6 cells, centre 0.3, rho_ab 0.5, exact values), 80% power, the gap in "
              f"{gap_in}: {need}")


if __name__ == "__main__":
    main()
