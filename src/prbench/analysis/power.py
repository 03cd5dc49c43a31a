"""The verdict rule simulated at the level of RM-level values (`prbench.analysis.verdict`'s
`decide_family`, the very function the run calls): draws of normal scores with given population
Spearman coefficients, with ties and with measurement noise; the rule's power per confirmatory cell
(`power_rows`, the run's `correlation_power.csv`) and its size on a grid (`size_grid`). The
question-level worlds are `prbench.analysis.worlds`; `python -m prbench.analysis.worlds` prints both.
"""
from __future__ import annotations

import numpy as np
from scipy import stats as sps

from ..seeding import stable_seed
from .rankmetrics import BytesLRU, sort_ranks
from .verdict import BASELINE, MIN_RMS, PERSONALIZED, Cell, decide_family, spearman_difference

POWER_TARGET = 0.8
POWER_GAPS = (0.2, 0.3, 0.5)
POWER_N_GRID = tuple(range(MIN_RMS, 31)) + tuple(range(35, 101, 5)) + tuple(range(120, 301, 20)) + (350, 400, 500)
GAP_GRID = tuple(round(0.05 * i, 2) for i in range(1, 41))  # 0.05 .. 2.00


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

    def __init__(self, n_sims: int, seed: int, max_bytes: int = 256 * 2**20):
        self.n_sims, self.seed, self._cache = n_sims, seed, {}
        self._x = BytesLRU(max_bytes)

    def x_ranks(self, j: int, n: int, chol: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Average ranks of cell j's two benchmark scores at n RMs under the Cholesky factor `chol`:
        a power search asks for the same cell, n and gap again (a null cell beside every other cell's
        own search, the same n in several searches); kept, least recently used dropped beyond
        max_bytes. Callers read them only."""
        key = (j, n, chol.tobytes())
        hit = self._x.get(key)
        if hit is not None:
            return hit
        z, _ = self.get(j, n)
        ranks = tuple(sort_ranks(z @ chol[i]) for i in (1, 2))
        for r in ranks:
            r.flags.writeable = False
        self._x.put(key, ranks, sum(r.nbytes for r in ranks))
        return ranks

    def y_ranks(self, j: int, n: int, sd: float) -> np.ndarray:
        """Average ranks of cell j's downstream scores z_y + sd e at n RMs: they do not depend on the
        gap (the Cholesky factor's first row is (1, 0, 0)), so every gap shares them."""
        key = ("y", j, n, sd)
        if key not in self._cache:
            z, e = self.get(j, n)
            self._cache[key] = sort_ranks(z[..., 0] + sd * e)
        return self._cache[key]

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
        sd, var = meas[j] if meas is not None and meas[j] is not None else (0.0, 0.0)
        # continuous draws (no ties, nothing to snap): ranked once per cell, n and gap, the downstream
        # ranks shared by every gap
        xa, xb = draws.x_ranks(j, n, chol)
        cells.append(Cell(xa, xb, draws.y_ranks(j, n, sd), var, ranked=True))
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
    var_obs = [_var_meas(c) for c in cells]
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
        """Cell j's power: with every cell carrying the gap, pooled over the cells identical to it; alone,
        that of the first cell identical to it carrying the gap (so identical cells share it)."""
        if alone:
            i = members[j][0]
            return float(power(ns_of(i), tuple(gap if k == i else 0.0 for k in range(m)))[i])
        return float(np.mean([power(ns_of(i), (gap,) * m)[i] for i in members[j]]))

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
            todo = [("rms_needed", g) for g in POWER_GAPS] + [("rms_needed_observed", observed)] * (not alone)
            for what, gap in todo:
                ok = np.isfinite(gap) and gap > 0 and possible(specs[j][0], gap, specs[j][1])
                found = _bisect(list(POWER_N_GRID), lambda n, g=gap, j=j, alone=alone: pooled(
                    j, lambda i: (n,) * m, g, alone)) if ok else None
                rows.append({**base, "quantity": what, "gap_in": gap_in, "gap": gap,
                             "n_rms": found[0] if found else np.nan, "power": found[1] if found else np.nan,
                             "possible": bool(ok)})
    return rows


def _var_meas(cell: dict) -> float:
    """A cell's measurement variance (0 where the cell has none: exact values)."""
    v = float(cell["var_meas"]) if "var_meas" in cell and cell["var_meas"] is not None else 0.0
    return v if np.isfinite(v) else 0.0


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
