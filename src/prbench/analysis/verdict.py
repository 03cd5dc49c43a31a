"""The verdict rule: does the personalized benchmark predict downstream quality better than a
baseline? One test decides each cell of a family declared before the run
(`correlation.confirmatory`), Benjamini-Hochberg controls the family, and the rule's power is
simulated by calling the very function the run calls (`decide_family`).

The test. Williams' (1959) t for two dependent correlations that share a variable (Steiger 1980,
eq. 7; `prbench.analysis.inference.williams_test`), applied to Spearman coefficients, with Bonett &
Wright's (2000) variance factor for Spearman's rho: t = t_Williams / sqrt(1 + rbar^2 / 2) on n - 3
degrees of freedom, rbar = (rho_a + rho_b) / 2. It is an approximation twice over: Williams' t
assumes normal scores and Pearson correlations, and the factor is a large-sample correction for
ranks. Why this test (docs/protocol.yaml, "What each uncertainty covers"): it is closed form, so the
rule can be simulated thousands of times inside the correlations job; uncorrected, Williams' t on
Spearman coefficients is liberal when the correlations are high (`main` prints both); Zou's (2007)
interval with the same correction was conservative in simulation and loses power; the swap
permutation test is not exact for this null (swapped rank vectors are no longer rankings). The
rule's simulated size: `python -m prbench.analysis.verdict` and the slow tests of
tests/test_verdict.py.

Where the test is not used. Below `MIN_RMS` RMs its simulated size exceeds the nominal level when
the correlations are high (ranks of so few RMs are often perfectly ordered), so a cell with fewer
RMs is "cannot decide". A cell is also "cannot decide" when its floor, the smallest p the test can
give on the cell's own values (ties raise it: `p_floor`), is above the FDR level, so that no
arrangement of these RMs could pass.

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

MIN_RMS = 10  # the test's simulated size holds from here on (population Spearman up to 0.8)
TEST = "williams_bw"
TEST_LABEL = "Williams' t on Spearman with the Bonett-Wright correction"
PERSONALIZED, BASELINE, UNDECIDED, CANNOT, UNDEFINED = (
    "personalized", "baseline", "undecided", "cannot decide", "undefined")
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
    """(t, se): the corrected Williams statistic t = (r_a - r_b) / se on n - 3 df, and its se.
    NaN where undefined (n < 4, a NaN coefficient, or r_ab = -1 with both correlations perfect)."""
    r_a, r_b, r_ab = (np.asarray(v, dtype=float) for v in (r_a, r_b, r_ab))
    n = np.asarray(n, dtype=float)
    rbar = (r_a + r_b) / 2
    det = 1 - r_a**2 - r_b**2 - r_ab**2 + 2 * r_a * r_b * r_ab
    with np.errstate(invalid="ignore", divide="ignore"):
        var = 2 * (n - 1) / (n - 3) * np.maximum(det, 0.0) + rbar**2 * (1 - r_ab) ** 3
        se = np.sqrt(var * (1 + rbar**2 / 2) / ((n - 1) * (1 + r_ab)))
        t = (r_a - r_b) / se
    bad = (n < 4) | ~np.isfinite(t) | ~(se > 0)
    return np.where(bad, np.nan, t), np.where(bad, np.nan, se)


def pvalue(t, n):
    """Two-sided p of the corrected Williams t on n - 3 df (NaN stays NaN)."""
    t = np.asarray(t, dtype=float)
    df = np.maximum(np.asarray(n, dtype=float) - 3, 1)
    return np.where(np.isfinite(t), 2 * sps.t.sf(np.abs(t), df), np.nan)


def _arranged(v: np.ndarray, order: np.ndarray, reverse: bool) -> np.ndarray:
    """v's sorted values placed in y's order (concordant) or its reverse (discordant), per row."""
    s = np.sort(v, axis=-1)
    if reverse:
        s = s[..., ::-1]
    out = np.empty_like(s)
    np.put_along_axis(out, order, s, axis=-1)
    return out


def p_floor(xa, xb, y) -> np.ndarray:
    """The smallest p the test can give on these values: one benchmark in the downstream order and
    the other in its reverse, whichever way round gives the smaller p; where that arrangement is
    degenerate (no ties: both perfect, t undefined), the reverse with its first two RMs swapped."""
    xa, xb, y = (np.asarray(v, dtype=float) for v in (xa, xb, y))
    n = xa.shape[-1]
    order = np.argsort(rankmetrics.snap(y), axis=-1, kind="stable")
    best = np.full(xa.shape[:-1], np.nan)
    for conc, disc in ((xa, xb), (xb, xa)):
        c = _arranged(conc, order, False)
        d = _arranged(disc, order, True)
        t, _ = williams_bw(*spearman_triplet(c, d, y), n)
        if n >= 2 and not np.isfinite(t).all():
            d2 = d.copy()
            first, second = order[..., :1], order[..., 1:2]
            a1, a2 = np.take_along_axis(d, first, -1), np.take_along_axis(d, second, -1)
            np.put_along_axis(d2, first, a2, -1)
            np.put_along_axis(d2, second, a1, -1)
            t = np.where(np.isfinite(t), t, williams_bw(*spearman_triplet(c, d2, y), n)[0])
        p = pvalue(t, n)
        best = np.fmin(best, p)
    return best


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
class Family:
    """`decide_family`'s answer: arrays of shape (..., m), one column per declared cell."""
    n: np.ndarray
    value_a: np.ndarray
    value_b: np.ndarray
    r_ab: np.ndarray
    diff: np.ndarray
    t: np.ndarray
    se: np.ndarray
    p: np.ndarray
    q: np.ndarray
    floor: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    ci_level: np.ndarray
    verdict: np.ndarray  # strings
    reason: np.ndarray  # strings
    fdr: float
    min_rms: int

    def rate(self, verdict: str) -> np.ndarray:
        """Share of rows (simulations) with this verdict, per cell."""
        return (self.verdict == verdict).mean(axis=tuple(range(self.verdict.ndim - 1)))


def decide_family(cells, fdr: float, min_rms: int | None = None) -> Family:
    """The verdict of every cell of one family from its RM-level values only.

    cells: [(xa, xb, y), ...], one per declared cell: the personalized benchmark's score, the
    baseline's and the downstream measure of each RM, arrays of shape (..., n_j) (leading axes:
    independent draws, as in a simulation; the run passes one draw). min_rms: a user's extra
    requirement (correlation.min_rms; None = only the test's own MIN_RMS)."""
    need = max(MIN_RMS, int(min_rms or 0))
    cols = {k: [] for k in ("n", "a", "b", "ab", "t", "se", "p", "floor")}
    for xa, xb, y in cells:
        xa, xb, y = (np.asarray(v, dtype=float) for v in (xa, xb, y))
        n = y.shape[-1]
        r_a, r_b, r_ab = spearman_triplet(xa, xb, y)
        t, se = williams_bw(r_a, r_b, r_ab, n)
        floor = p_floor(xa, xb, y) if n >= 4 else np.full(r_a.shape, np.nan)
        p = pvalue(t, n)
        tested = n >= need
        for k, v in (("n", np.full(r_a.shape, n)), ("a", r_a), ("b", r_b), ("ab", r_ab), ("t", t), ("se", se),
                     ("p", np.where(tested, p, np.nan)), ("floor", floor)):
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
    verdict, reason = _words(st, diff, q, decided, fdr, need, m)
    return Family(st["n"].astype(int), st["a"], st["b"], st["ab"], diff, st["t"], st["se"], st["p"], q,
                  st["floor"], lo, hi, level, verdict, reason, fdr, need)


def _words(st: dict, diff, q, decided, fdr: float, need: int, m: int):
    n, p, floor = st["n"], st["p"], st["floor"]
    verdict = np.full(p.shape, UNDECIDED, dtype=object)
    reason = np.full(p.shape, "", dtype=object)
    undefined = ~np.isfinite(diff) | ((n >= need) & ~np.isfinite(p))
    few = ~undefined & (n < need)
    floored = ~undefined & ~few & np.isfinite(floor) & (floor > fdr)
    win = decided & ~undefined & ~few & ~floored
    verdict[win] = np.where(diff[win] > 0, PERSONALIZED, BASELINE)
    verdict[undefined] = UNDEFINED
    verdict[few | floored] = CANNOT
    if verdict.size <= 64:  # the run's single draw: say why (a simulation needs the codes only)
        for i in np.ndindex(p.shape):
            reason[i] = _reason(verdict[i], int(n[i]), p[i], q[i], floor[i], diff[i], fdr, need, m)
    return verdict, reason


def _reason(verdict, n, p, q, floor, diff, fdr, need, m) -> str:
    if verdict == UNDEFINED:
        return "the coefficients or the test are undefined (a side constant across the RMs, or fewer than 4 RMs)"
    if verdict == CANNOT and n < need:
        return (f"cannot decide at {n} RMs: the test's size holds from {need} RMs "
                f"(MIN_RMS {MIN_RMS}{'' if need == MIN_RMS else ', correlation.min_rms ' + str(need)})")
    if verdict == CANNOT:
        return (f"cannot decide at {n} RMs: the smallest p these values allow ({floor:.3g}) is above the "
                f"family's largest BH threshold {fdr:g}")
    if verdict == UNDECIDED:
        return f"q = {q:.3g} > {fdr:g} (BH over the {m} confirmatory cells; p = {p:.3g})"
    return f"q = {q:.3g} <= {fdr:g} (BH over the {m} confirmatory cells; p = {p:.3g})"


# ---- power of the rule, by simulation ------------------------------------------------------------


def spearman_to_pearson(rho):
    """The Pearson correlation of a bivariate normal whose Spearman correlation is rho."""
    return 2.0 * np.sin(np.pi * np.asarray(rho, dtype=float) / 6.0)


def possible(center: float, gap: float, rho_ab: float) -> bool:
    """Whether population Spearman correlations center +- gap/2 with the downstream measure and
    rho_ab between the benchmarks form a correlation matrix (of normal scores)."""
    s_a, s_b = center + gap / 2, center - gap / 2
    if max(abs(s_a), abs(s_b), abs(rho_ab)) > 1:
        return False
    r = spearman_to_pearson([s_a, s_b, rho_ab])
    cov = np.array([[1, r[0], r[1]], [r[0], 1, r[2]], [r[1], r[2], 1]])
    return bool(np.linalg.eigvalsh(cov).min() > 1e-9)


def draw_cell(center: float, gap: float, rho_ab: float, n: int, n_sims: int, rng) -> tuple | None:
    """n_sims samples of n RMs: (xa, xb, y) of normal scores whose population Spearman
    correlations are rho(A, y) = center + gap/2, rho(B, y) = center - gap/2, rho(A, B) = rho_ab;
    None when no correlation matrix has them."""
    if not possible(center, gap, rho_ab):
        return None
    r = spearman_to_pearson([center + gap / 2, center - gap / 2, rho_ab])
    cov = np.array([[1, r[0], r[1]], [r[0], 1, r[2]], [r[1], r[2], 1]])
    z = rng.standard_normal((n_sims, n, 3)) @ np.linalg.cholesky(cov).T
    return z[..., 1], z[..., 2], z[..., 0]


def rule_power(specs, ns, gap: float, n_sims: int, fdr: float, seed: int, min_rms: int | None = None) -> np.ndarray:
    """Per cell, the share of n_sims simulated families in which `decide_family` says
    "personalized" when every cell j carries the gap: specs[j] = (center_j, rho_ab_j), ns[j] its
    RMs. A cell whose correlations are impossible gives NaN and enters BH as untested (p = 1)."""
    # plain floats and ints in the seed string (a numpy scalar would print as np.float64(...))
    rng = np.random.default_rng(stable_seed(seed, "verdict-power", round(float(gap), 6), tuple(int(n) for n in ns),
                                            tuple((round(float(c), 6), round(float(r), 6)) for c, r in specs)))
    cells, ok = [], []
    for (center, rho_ab), n in zip(specs, ns):
        d = draw_cell(center, gap, rho_ab, n, n_sims, rng)
        ok.append(d is not None)
        if d is None:  # untestable: a constant side makes every coefficient undefined
            d = (np.zeros((n_sims, n)), np.zeros((n_sims, n)), np.zeros((n_sims, n)))
        cells.append(d)
    fam = decide_family(cells, fdr, min_rms)
    rate = fam.rate(PERSONALIZED if gap >= 0 else BASELINE)
    return np.where(ok, rate, np.nan)


def power_rows(cells: list[dict], n_sims: int, fdr: float, seed: int, min_rms: int | None = None) -> list[dict]:
    """Per confirmatory cell (dicts with center, rho_ab, n, diff): the smallest Spearman gap the rule
    detects with POWER_TARGET power at the cell's n, and the RMs each gap of POWER_GAPS and the
    observed |diff| needs, every cell of the family carrying the same gap. Impossible gaps (no
    correlation matrix at that inter-correlation and centre) are named; `n_rms` NaN = beyond 500."""
    specs = [(float(np.clip(c["center"], -0.99, 0.99)) if np.isfinite(c["center"]) else 0.0,
              float(np.clip(c["rho_ab"], -0.99, 0.99)) if np.isfinite(c["rho_ab"]) else 0.0) for c in cells]
    cache: dict = {}

    def power(ns: tuple, gap: float) -> np.ndarray:
        key = (ns, gap)
        if key not in cache:
            cache[key] = rule_power(specs, list(ns), gap, n_sims, fdr, seed, min_rms)
        return cache[key]

    m = len(cells)
    own_n = tuple(int(c["n"]) for c in cells)
    rows = []
    for j, c in enumerate(cells):
        base = {"center": specs[j][0], "rho_ab": specs[j][1], "fdr": fdr, "family_size": m,
                "target_power": POWER_TARGET, "n_sims": n_sims}
        # smallest gap: power grows with the gap; bisection over the possible part of the grid
        grid = [g for g in GAP_GRID if possible(specs[j][0], g, specs[j][1])]
        found = _bisect(grid, lambda g, j=j: power(own_n, g)[j])
        rows.append({**base, "quantity": "min_gap", "gap": found[0] if found else np.nan, "n_rms": own_n[j],
                     "power": found[1] if found else np.nan, "possible": bool(grid)})
        observed = float(round(abs(float(c["diff"])), 2)) if np.isfinite(c["diff"]) else np.nan
        for what, gap in [("rms_needed", g) for g in POWER_GAPS] + [("rms_needed_observed", observed)]:
            ok = np.isfinite(gap) and gap > 0 and possible(specs[j][0], gap, specs[j][1])
            found = _bisect(list(POWER_N_GRID), lambda n, g=gap, j=j: power((n,) * m, g)[j]) if ok else None
            rows.append({**base, "quantity": what, "gap": gap, "n_rms": found[0] if found else np.nan,
                         "power": found[1] if found else np.nan, "possible": bool(ok)})
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


# ---- the rule's size and power on a grid (a command anyone can rerun) ------------------------------


def size_grid(ns=(7, 10, 12, 20, 30), rhos=(0.3, 0.6, 0.8), inter=(0.2, 0.5, 0.8), m: int = 3,
              n_sims: int = 5000, fdr: float = 0.05, seed: int = 0) -> list[dict]:
    """False-win rate of the whole rule (any cell of an all-null family of m cells decided) under
    equal population correlations rho with the downstream measure."""
    out = []
    for n in ns:
        for rho in rhos:
            for r_ab in inter:
                if not possible(rho, 0.0, r_ab):
                    continue
                rng = np.random.default_rng(stable_seed(seed, "verdict-size", n, rho, r_ab))
                cells = [draw_cell(rho, 0.0, r_ab, n, n_sims, rng) for _ in range(m)]
                fam = decide_family(cells, fdr)
                wins = np.isin(fam.verdict, [PERSONALIZED, BASELINE])
                out.append({"n": n, "rho": rho, "rho_ab": r_ab, "false_win": float(wins.any(-1).mean()),
                            "per_cell": float(wins.mean()), "mcse": float(np.sqrt(fdr * (1 - fdr) / n_sims))})
    return out


def _uncorrected_size(n: int, rho: float, r_ab: float, n_sims: int = 5000, fdr: float = 0.05, seed: int = 0) -> float:
    """The same family with Williams' t uncorrected (prbench.analysis.inference), for comparison."""
    rng = np.random.default_rng(stable_seed(seed, "verdict-size", n, rho, r_ab))
    ps = []
    for _ in range(3):
        r_a, r_b, r_ab_hat = spearman_triplet(*draw_cell(rho, 0.0, r_ab, n, n_sims, rng))
        ps.append(inference.williams_test(r_a, r_b, r_ab_hat, n)[1])
    return float((bh_qvalues(np.stack(ps, -1)) <= fdr).any(-1).mean())


def main() -> None:  # python -m prbench.analysis.verdict
    print(f"The rule's false-win rate ({TEST_LABEL}; BH over 3 null cells at q = 0.05; 5,000 draws per row;")
    print("the last column: the same family with Williams' t uncorrected):")
    print("n\trho\trho_ab\tany cell\tper cell\tuncorrected")
    for r in size_grid():
        unc = _uncorrected_size(r["n"], r["rho"], r["rho_ab"])
        print(f"{r['n']}\t{r['rho']}\t{r['rho_ab']}\t{r['false_win']:.4f}\t{r['per_cell']:.4f}\t{unc:.4f}")
    pw = rule_power([(0.35, 0.5)] * 3, [30] * 3, 0.5, 5000, 0.05, seed=0)
    print(f"Power at 30 RMs, population Spearman 0.6 vs 0.1, rho_ab 0.5, the gap in all 3 cells: {pw.round(3)}")
    # config.yaml's family: BoN, PPO, GRPO x RewardBench, RM-Bench = 6 cells at its 5 downstream RMs,
    # centred between the paper's reported Spearman coefficients (0.257, 0.371)
    rows = power_rows([{"center": 0.3, "rho_ab": 0.5, "n": 5, "diff": 0.5}] * 6, 2000, 0.05, seed=0)[:5]
    need = ", ".join(f"gap {r['gap']:.1f}: {r['n_rms']} RMs" for r in rows if r["quantity"] == "rms_needed")
    print(f"config.yaml's family (6 cells, centre 0.3, rho_ab 0.5), RMs for 80% power of the rule: {need}")


if __name__ == "__main__":
    main()
