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

Why this test (chosen by simulation: `python -m prbench.analysis.worlds`, perf/README.md): on
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

from . import inference, rankmetrics

MIN_RMS = 10  # fewer RMs: "cannot decide"
TEST = "williams_bw_meas"
TEST_LABEL = "Williams' t on Spearman (Bonett-Wright factor) with the measurement variance added"
PERSONALIZED, BASELINE, UNDECIDED, CANNOT, UNDEFINED = (
    "personalized", "baseline", "undecided", "cannot decide", "undefined")
SINGULAR_TOL = 1e-9
# A bootstrap replicate of the per-RM values is the observed values plus a fresh draw of their noise.
# For a smooth statistic its spread is the statistic's; a rank statistic of values that are mostly
# noise sees about half its spread (the replicate shares the observed noise: for a function of the
# sum of two independent draws, the variance given one of them is half the total in the linear case).
# So the measurement variance is twice the bootstrap's: exact when the downstream ranking is all
# noise, conservative when it is signal. Chosen by simulation (perf/README.md, "The verdict rule"): with
# the bootstrap's variance alone the mirror study's null world (49 RMs, 72 questions) decided 0.10.
BOOTSTRAP_FACTOR = 2.0  # det of the plug-in correlation matrix at or below this: Williams' variance has collapsed
# The region whose size held in simulation (size_grid, tests/test_verdict.py; perf/README.md): population
# Spearman up to 0.9 (|rbar| here) from 20 RMs on, up to 0.8 below 20 (at 0.9 and 10-12 RMs the family's
# false-win rate was 0.068-0.069 against a limit of 0.065), benchmark inter-correlation -0.3 to 0.9,
# with and without ties. A cell outside it is decided all the same, and its reason says so.
CHECKED = {"n_min": MIN_RMS, "rho_max": 0.9, "rho_max_below_20": 0.8, "rho_ab_min": -0.3, "rho_ab_max": 0.9}


def _ranks(v: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis after rounding to the ties' precision (rankmetrics.snap);
    a row with a NaN is all NaN."""
    return rankmetrics.average_ranks(rankmetrics.snap(v))


def spearman_triplet(xa, xb, y, ranked: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rho(A, y), rho(B, y), rho(A, B)) per row of (..., n) arrays (NaN for a constant side);
    ranked: the arrays are average ranks already."""
    ra, rb, ry = (np.asarray(v, dtype=float) if ranked else _ranks(np.asarray(v, dtype=float)) for v in (xa, xb, y))
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
    """BOOTSTRAP_FACTOR x the variance (ddof 1) of the Spearman difference over measurement replicates
    of the per-RM values, the RMs held fixed: arrays (..., B, n) -> (...). The run's replicates are its question
    bootstrap (`prbench.analysis.scores.evaluate_scores`: the questions shared by the personalized
    accuracies and every downstream mean resampled jointly, each baseline's pairs on their own, BoN
    sample sets and training seeds redrawn). Replicates where a side is constant are left out; fewer
    than 2 left: 0."""
    k, ss = _finite_ss(spearman_difference(reps_a, reps_b, reps_y))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(k >= 2, BOOTSTRAP_FACTOR * ss / (k - 1), 0.0)


def _finite_ss(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(k, ss) over the last axis's finite entries: their count and sum of squares about their mean."""
    ok = np.isfinite(d)
    k = ok.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(ok, d, 0.0).sum(-1) / k
        return k, np.where(ok, (d - mean[..., None]) ** 2, 0.0).sum(-1)


def jackknife_se(xa, xb, y) -> np.ndarray:
    """Leave-one-RM-out jackknife standard error of the Spearman difference, per row of (..., n)."""
    xa, xb, y = (np.asarray(v, dtype=float) for v in (xa, xb, y))
    n = y.shape[-1]
    idx = np.array([[j for j in range(n) if j != i] for i in range(n)])
    k, ss = _finite_ss(spearman_difference(xa[..., idx], xb[..., idx], y[..., idx]))
    with np.errstate(invalid="ignore", divide="ignore"):
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
    (`measurement_variance` of the run's replicates; 0 = exact values). ranked: xa, xb and y are
    average ranks already (a simulation that ranks its draws once): not ranked again."""
    xa: np.ndarray
    xb: np.ndarray
    y: np.ndarray
    var_meas: np.ndarray | float = 0.0
    ranked: bool = False

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
        r_a, r_b, r_ab = spearman_triplet(xa, xb, y, c.ranked)
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
        if n < 2:
            return f"the coefficients are undefined: {n} RM(s) with all three values (a rank correlation needs 2)"
        return "the coefficients are undefined (a side constant across the RMs, or no standard error)"
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
