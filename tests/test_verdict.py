"""The verdict rule (prbench.analysis.verdict): the decision test against its formula written here,
each verdict with its reason on synthetic RM-level values, the family's BH and interval consistency,
the declared family's wiring, and (slow) the whole rule simulated: its size under equal population
correlations and its power, the latter also by an independent simulation written here."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from prbench.analysis import verdict as V
from prbench.analysis.comparison import confirmatory_mask


def _own_bw_p(x_a, x_b, y):
    """Williams' t (Steiger 1980 eq. 7) on scipy's Spearman coefficients, divided by
    sqrt(1 + rbar^2 / 2) (Bonett & Wright 2000), two-sided on n - 3 df."""
    n = len(y)
    ra, rb, rab = (stats.spearmanr(u, v).statistic for u, v in ((x_a, y), (x_b, y), (x_a, x_b)))
    det = 1 - ra**2 - rb**2 - rab**2 + 2 * ra * rb * rab
    rbar = (ra + rb) / 2
    t = (ra - rb) * math.sqrt((n - 1) * (1 + rab)) / math.sqrt(2 * (n - 1) / (n - 3) * det + rbar**2 * (1 - rab) ** 3)
    t /= math.sqrt(1 + rbar**2 / 2)
    return ra, rb, 2 * stats.t.sf(abs(t), n - 3)


def _world(n, gap, seed, center=0.35, rho_ab=0.5):
    rng = np.random.default_rng(seed)
    return V.draw_cell(center, gap, rho_ab, n, 1, rng)


def test_decision_test_matches_its_formula():
    rng = np.random.default_rng(0)
    y = rng.normal(size=15)
    xa = y + rng.normal(size=15)
    xb = np.round(rng.normal(size=15), 1)  # ties in the baseline
    fam = V.decide_family([(xa, xb, y)], 0.05)
    ra, rb, p = _own_bw_p(xa, xb, y)
    assert fam.value_a[0] == pytest.approx(ra) and fam.value_b[0] == pytest.approx(rb)
    assert fam.p[0] == pytest.approx(p, rel=1e-9) and fam.q[0] == pytest.approx(p, rel=1e-9)
    # without the correction the statistic is Williams' (prbench.analysis.inference), tested on its own
    from prbench.analysis import inference
    t_w, _ = inference.williams_test(ra, rb, stats.spearmanr(xa, xb).statistic, 15)
    assert fam.t[0] == pytest.approx(t_w / math.sqrt(1 + ((ra + rb) / 2) ** 2 / 2))


def test_forty_rms_clear_gap_is_personalized():
    xa, xb, y = (v[0] for v in _world(40, 0.8, seed=1, center=0.4))
    fam = V.decide_family([(xa, xb, y)], 0.05)
    assert fam.verdict[0] == V.PERSONALIZED, fam.reason[0]
    assert fam.reason[0].startswith("q = ") and "<= 0.05" in fam.reason[0]
    assert fam.ci_low[0] > 0 and fam.diff[0] > 0.4
    # the same values with the benchmarks exchanged: the baseline wins, the interval mirrored
    swapped = V.decide_family([(xb, xa, y)], 0.05)
    assert swapped.verdict[0] == V.BASELINE and swapped.ci_high[0] == pytest.approx(-fam.ci_low[0])


def test_forty_rms_no_gap_is_undecided():
    rng = np.random.default_rng(2)
    y = rng.normal(size=40)
    common = y + rng.normal(size=40)
    xa, xb = common + 0.3 * rng.normal(size=40), common + 0.3 * rng.normal(size=40)
    fam = V.decide_family([(xa, xb, y)], 0.05)
    assert fam.verdict[0] == V.UNDECIDED, fam.reason[0]
    assert fam.reason[0].startswith("q = ") and "> 0.05" in fam.reason[0]
    assert fam.ci_low[0] < 0 < fam.ci_high[0]


def test_under_the_floor_cannot_decide_and_says_so():
    """Twelve RMs, eleven tied on each benchmark and two downstream values: no arrangement of them
    reaches p <= 0.05, so the cell cannot be decided; the floor is the p of the most extreme
    arrangement."""
    y = np.repeat([0.3, 0.4], 6)
    xa = np.r_[np.full(11, 0.6), 0.7]
    xb = np.r_[0.9, np.full(11, 0.5)]
    fam = V.decide_family([(xa, xb, y)], 0.05)
    assert fam.verdict[0] == V.CANNOT
    assert "cannot decide at 12 RMs: the smallest p these values allow" in fam.reason[0]
    # the floor recomputed: xa in y's order, xb reversed (and the other way round)
    conc_a, disc_b = np.sort(xa), np.sort(xb)[::-1]
    conc_b, disc_a = np.sort(xb), np.sort(xa)[::-1]
    floor = min(_own_bw_p(conc_a, disc_b, y)[2], _own_bw_p(disc_a, conc_b, y)[2])
    assert fam.floor[0] == pytest.approx(floor) and floor > 0.05
    assert f"({floor:.3g})" in fam.reason[0]


def test_too_few_rms_cannot_decide_and_min_rms_adds_a_requirement():
    xa, xb, y = (v[0] for v in _world(V.MIN_RMS - 1, 1.2, seed=3, center=0.2, rho_ab=0.0))
    fam = V.decide_family([(xa, xb, y)], 0.05)
    assert fam.verdict[0] == V.CANNOT and np.isnan(fam.p[0]) and np.isnan(fam.ci_low[0])
    assert fam.reason[0].startswith(f"cannot decide at {V.MIN_RMS - 1} RMs: the test's size holds from {V.MIN_RMS}")
    xa, xb, y = (v[0] for v in _world(30, 1.2, seed=3, center=0.2, rho_ab=0.0))
    assert V.decide_family([(xa, xb, y)], 0.05).verdict[0] == V.PERSONALIZED
    strict = V.decide_family([(xa, xb, y)], 0.05, min_rms=40)
    assert strict.verdict[0] == V.CANNOT and "correlation.min_rms 40" in strict.reason[0]


def test_constant_side_is_undefined():
    y = np.arange(12.0)
    fam = V.decide_family([(np.full(12, 0.5), np.arange(12.0), y)], 0.05)
    assert fam.verdict[0] == V.UNDEFINED and "constant" in fam.reason[0]


def test_family_bh_and_intervals_agree():
    """BH over the declared family only (scipy's false_discovery_control); a cell's interval at
    level 1 - max(R, 1) q / m excludes 0 exactly when it is decided."""
    cells = [tuple(v[0] for v in _world(25, g, seed=10 + i, center=0.3, rho_ab=0.2))
             for i, g in enumerate((0.9, 0.5, 0.0, 0.2))]
    fam = V.decide_family(cells, 0.05)
    p = np.array([_own_bw_p(*c)[2] for c in cells])
    assert fam.p == pytest.approx(p, rel=1e-9)
    assert fam.q == pytest.approx(stats.false_discovery_control(p, method="bh"))
    decided = np.isin(fam.verdict, [V.PERSONALIZED, V.BASELINE])
    assert decided.any() and not decided.all()
    r = int(decided.sum())
    assert fam.ci_level == pytest.approx(np.full(4, 1 - r * 0.05 / 4))
    assert ((fam.ci_low > 0) | (fam.ci_high < 0)).tolist() == decided.tolist()
    # an untestable cell stays in the family (m = 5): every q grows
    few = tuple(v[0] for v in _world(5, 0.0, seed=20))
    fam5 = V.decide_family(cells + [few], 0.05)
    assert fam5.q[:4] == pytest.approx(np.minimum(1, stats.false_discovery_control(np.r_[p, 1.0], method="bh")[:4]))


def test_confirmatory_mask_default_declared_and_unknown():
    t = pd.DataFrame({"coefficient": ["spearman", "pearson", "spearman", "spearman", "spearman"],
                      "headline": [True, True, False, True, True],
                      "downstream": ["bon", "bon", "bon", "ppo", "ppo"],
                      "benchmark_b": ["rb", "rb", "rb", "rb", "rmb"], "policy": ["p"] * 5})
    assert confirmatory_mask(t, None).tolist() == [True, False, False, True, True]
    assert confirmatory_mask(t, [{"downstream": "ppo", "baseline": "rmb"}]).tolist() == [False] * 4 + [True]
    with pytest.raises(ValueError, match=r"correlation.confirmatory\[1\].*matches no headline cell"):
        confirmatory_mask(t, [{"downstream": "bon", "baseline": "rb"}, {"downstream": "grpo", "baseline": "rb"}])


def test_possible_names_impossible_gaps():
    assert V.possible(0.35, 0.5, 0.5)
    assert not V.possible(0.8, 0.6, 0.5)  # rho_a = 1.1
    assert not V.possible(0.0, 1.0, 0.9)  # +0.5 and -0.5 with a benchmark inter-correlation of 0.9
    for rho in (-0.5, 0.2, 0.7):
        assert 6 / math.pi * math.asin(V.spearman_to_pearson(rho) / 2) == pytest.approx(rho)


def test_power_rows_bisect_the_rules_power():
    rows = V.power_rows([{"center": 0.35, "rho_ab": 0.5, "n": 12, "diff": 0.5}] * 3, 400, 0.05, seed=0)
    assert len(rows) == 3 * 5 and [r["quantity"] for r in rows[:5]] == ["min_gap"] + ["rms_needed"] * 3 + [
        "rms_needed_observed"]
    rows = rows[:5]  # the first cell's (each cell has its own draws)
    need = {r["gap"]: r for r in rows if r["quantity"] == "rms_needed"}
    assert need[0.5]["n_rms"] < need[0.3]["n_rms"] < need[0.2]["n_rms"]
    n5 = need[0.5]["n_rms"]
    grid = list(V.POWER_N_GRID)
    below = grid[grid.index(n5) - 4]  # well below: the bisection's answer is the target's crossing
    pw = V.rule_power([(0.35, 0.5)] * 3, [below] * 3, 0.5, 400, 0.05, seed=0)
    assert pw[0] < V.POWER_TARGET <= need[0.5]["power"]
    obs = [r for r in rows if r["quantity"] == "rms_needed_observed"][0]
    assert obs["gap"] == 0.5 and obs["n_rms"] == n5


# ---- the whole rule, simulated (slow) -------------------------------------------------------------

SIZE_DRAWS = 5000


@pytest.mark.slow
@pytest.mark.parametrize("n", [12, 20, 30])
@pytest.mark.parametrize("rho_ab", [0.2, 0.5, 0.8])
def test_size_of_the_whole_rule(n, rho_ab):
    """Equal population Spearman correlations 0.3 in all 3 cells of the family: the rule names a
    winner in any cell at most 0.05 + 3 Monte Carlo standard errors of the time."""
    rng = np.random.default_rng(1000 + n + int(rho_ab * 10))
    cells = [V.draw_cell(0.3, 0.0, rho_ab, n, SIZE_DRAWS, rng) for _ in range(3)]
    fam = V.decide_family(cells, 0.05)
    wins = np.isin(fam.verdict, [V.PERSONALIZED, V.BASELINE]).any(-1).mean()
    assert wins <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / SIZE_DRAWS), wins


def _independent_power(n_sims, seed):
    """The rule written again: scipy's multivariate normal and spearmanr, the corrected Williams p
    from its formula, BH by scipy; share of families in which cell 0 says 'personalized'."""
    s = np.array([0.6, 0.1, 0.5])
    r = 2 * np.sin(np.pi * s / 6)
    cov = [[1, r[0], r[1]], [r[0], 1, r[2]], [r[1], r[2], 1]]
    mvn = stats.multivariate_normal(mean=np.zeros(3), cov=cov)
    hits = 0
    rng = np.random.default_rng(seed)
    for _ in range(n_sims):
        res = []
        for _cell in range(3):
            z = mvn.rvs(size=30, random_state=rng)
            ra, rb, p = _own_bw_p(z[:, 1], z[:, 2], z[:, 0])
            res.append((ra - rb, p))
        q = stats.false_discovery_control([p for _, p in res], method="bh")
        hits += bool(q[0] <= 0.05 and res[0][0] > 0)
    return hits / n_sims


@pytest.mark.slow
def test_power_of_the_whole_rule_and_an_independent_simulation():
    """30 RMs, population Spearman 0.6 (personalized) vs 0.1 (baseline), inter-correlation 0.5, the gap
    in all 3 cells: the rule decides 'personalized' at least half the time, and the power function
    agrees with the simulation above within 0.03."""
    pw = V.rule_power([(0.35, 0.5)] * 3, [30] * 3, 0.5, 5000, 0.05, seed=7)
    assert (pw >= 0.5).all(), pw
    own = _independent_power(2000, seed=123)
    assert abs(pw[0] - own) <= 0.03, (pw, own)
