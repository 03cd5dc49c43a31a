"""The verdict rule (prbench.analysis.verdict): the decision test against its formula written here
(the RM level and the measurement level), each verdict with its reason on synthetic RM-level values,
the degenerate cells (a boundary, identical rankings, a tied cell), the family's BH and interval
consistency over random tied cells, the declared family's wiring, the power table's common random
numbers, and (slow) the whole rule simulated: its size with ties and population Spearman up to 0.9,
at the question level (prbench.analysis.worlds: a null and a graded world), and its power, also by
an independent simulation written here."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from prbench.analysis import power as P
from prbench.analysis import verdict as V
from prbench.analysis.comparison import confirmatory_mask


def _own_bw_p(x_a, x_b, y, var_meas=0.0):
    """Williams' t (Steiger 1980 eq. 7) on scipy's Spearman coefficients, its variance multiplied by
    1 + rbar^2 / 2 (Bonett & Wright 2000) and var_meas added, two-sided on n - 3 df."""
    n = len(y)
    ra, rb, rab = (stats.spearmanr(u, v).statistic for u, v in ((x_a, y), (x_b, y), (x_a, x_b)))
    det = 1 - ra**2 - rb**2 - rab**2 + 2 * ra * rb * rab
    rbar = (ra + rb) / 2
    var_rm = (2 * (n - 1) / (n - 3) * det + rbar**2 * (1 - rab) ** 3) / ((n - 1) * (1 + rab)) * (1 + rbar**2 / 2)
    t = (ra - rb) / math.sqrt(var_rm + var_meas)
    return ra, rb, 2 * stats.t.sf(abs(t), n - 3)


def _own_var_meas(boot_a, boot_b, boot_y):
    """Twice the variance (ddof 1) over replicates of scipy's Spearman difference, the RMs fixed."""
    d = [stats.spearmanr(a, y).statistic - stats.spearmanr(b, y).statistic for a, b, y in zip(boot_a, boot_b, boot_y)]
    return 2 * float(np.var(d, ddof=1))


def _world(n, gap, seed, center=0.35, rho_ab=0.5):
    rng = np.random.default_rng(seed)
    return P.draw_cell(center, gap, rho_ab, n, 1, rng)


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


def test_measurement_variance_adds_to_the_rm_level():
    """t = diff / sqrt(se_rm^2 + var_meas), var_meas twice the variance (ddof 1) of the Spearman
    difference over measurement replicates (scipy's spearmanr per replicate), the RMs fixed."""
    rng = np.random.default_rng(4)
    y = rng.normal(size=20)
    xa, xb = y + rng.normal(size=20), rng.normal(size=20)
    reps = [v + 0.5 * rng.normal(size=(50, 20)) for v in (xa, xb, y)]
    cell = V.Cell.from_replicates(xa, xb, y, *reps)
    d = [stats.spearmanr(reps[0][b], reps[2][b]).statistic - stats.spearmanr(reps[1][b], reps[2][b]).statistic
         for b in range(50)]
    assert float(cell.var_meas) == pytest.approx(2 * np.var(d, ddof=1), rel=1e-9)
    fam, exact = V.decide_family([cell], 0.05), V.decide_family([(xa, xb, y)], 0.05)
    assert fam.se_rm[0] == pytest.approx(exact.se[0])
    assert fam.se_meas[0] == pytest.approx(math.sqrt(2 * np.var(d, ddof=1)))
    assert fam.t[0] == pytest.approx(fam.diff[0] / math.sqrt(exact.se[0] ** 2 + 2 * np.var(d, ddof=1)))
    assert fam.p[0] > exact.p[0]


def _swapped(v, *pairs):
    v = np.array(v, dtype=float)
    for i, j in pairs:
        v[[i, j]] = v[[j, i]]
    return v


@pytest.mark.parametrize("n", [12, 35])
def test_a_boundary_does_not_decide_on_nothing(n):
    """The personalized column in exactly the downstream order, the baseline the same with one adjacent
    pair swapped (a difference of 12 / (n (n^2 - 1))): Williams' variance collapses there, the rule
    does not (undecided, p far from 0); one more swap on the personalized side: a tie, p = 1."""
    y = np.arange(n, dtype=float)
    fam = V.decide_family([(y, _swapped(y, (n // 3, n // 3 + 1)), y)], 0.05)
    assert fam.diff[0] == pytest.approx(12 / (n * (n * n - 1)))
    assert fam.verdict[0] == V.UNDECIDED and fam.p[0] > 0.5, (fam.p, fam.se_rm)
    tie = V.decide_family([(_swapped(y, (1, 2)), _swapped(y, (n // 3, n // 3 + 1)), y)], 0.05)
    assert tie.diff[0] == 0 and tie.p[0] == 1 and tie.verdict[0] == V.UNDECIDED


def test_identical_rankings_are_undecided_with_p_one():
    y = np.arange(12.0)
    fam = V.decide_family([(2 * y + 1, np.exp(y / 3), y[::-1].copy())], 0.05)  # both reversed, identical ranks
    assert fam.r_ab[0] == pytest.approx(1) and fam.diff[0] == 0
    assert fam.verdict[0] == V.UNDECIDED and fam.p[0] == 1 and fam.ci_low[0] <= 0 <= fam.ci_high[0]


def test_a_tied_cell_gets_the_verdict_its_interval_gives():
    """Twelve RMs, y six 0s then six 1s, heavy ties on both benchmarks: p = 0.018 decides (no floor
    gate overrides it) and the interval excludes 0."""
    y = np.r_[np.zeros(6), np.ones(6)]
    xa = np.array([.5, .5, .5, .5, .5, .5, .7, .7, .5, .5, .7, .5])
    xb = np.full(12, 0.5)
    xb[8] = 0.4
    fam = V.decide_family([(xa, xb, y)], 0.05)
    assert fam.p[0] == pytest.approx(_own_bw_p(xa, xb, y)[2])
    assert fam.verdict[0] == V.PERSONALIZED and fam.ci_low[0] > 0


def test_perfectly_reversed_baseline_uses_the_exact_null_variance():
    """A singular cell (A in y's order, B reversed: r_ab = -1) is decided on the largest of the RM-level
    variances: here the exact variance of the difference when y is unrelated to both, 2 (1 - r_ab) / (n - 1)."""
    y = np.arange(12.0)
    fam = V.decide_family([(y, -y, y)], 0.05)
    assert fam.se_rm[0] == pytest.approx(math.sqrt(4 / 11))
    assert fam.p[0] == pytest.approx(2 * stats.t.sf(2 / math.sqrt(4 / 11), 9))


def test_verdict_and_interval_agree_on_random_tied_families():
    """Property: over random families of tied cells (values on 2-4 levels, 10-16 RMs, some with a
    measurement variance), a cell is decided exactly when its interval excludes 0, and its side is
    the interval's."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        m = int(rng.integers(1, 5))
        cells = []
        for _ in range(m):
            n = int(rng.integers(10, 17))
            y = rng.integers(0, int(rng.integers(2, 5)), n).astype(float)
            xa = np.where(rng.random(n) < 0.6, y, rng.integers(0, 3, n)).astype(float)
            xb = rng.integers(0, int(rng.integers(2, 5)), n).astype(float)
            cells.append((xa, xb, y, float(rng.choice([0.0, 0.01, 0.05]))))
        fam = V.decide_family(cells, 0.05)
        tested = np.isfinite(fam.p)
        decided = np.isin(fam.verdict, [V.PERSONALIZED, V.BASELINE])
        excludes = tested & ((fam.ci_low > 0) | (fam.ci_high < 0))
        assert decided.tolist() == excludes.tolist(), (cells, fam.p, fam.q, fam.ci_low, fam.ci_high)
        assert ((fam.verdict == V.PERSONALIZED) == (decided & (fam.ci_low > 0))).all()


def test_outside_the_checked_range_is_said():
    rng = np.random.default_rng(6)
    y = rng.normal(size=12)
    xa, xb = y + 0.05 * rng.normal(size=12), y + 0.05 * rng.normal(size=12)  # both ~0.97 at 12 RMs
    fam = V.decide_family([(xa, xb, y)], 0.05)
    assert not fam.checked[0] and "outside the range whose size was checked" in fam.reason[0]
    xa, xb, y = (v[0] for v in _world(30, 0.0, seed=3))
    assert V.decide_family([(xa, xb, y)], 0.05).checked[0]


def test_too_few_rms_cannot_decide_and_min_rms_adds_a_requirement():
    xa, xb, y = (v[0] for v in _world(V.MIN_RMS - 1, 1.2, seed=3, center=0.2, rho_ab=0.0))
    fam = V.decide_family([(xa, xb, y)], 0.05)
    assert fam.verdict[0] == V.CANNOT and np.isnan(fam.p[0]) and np.isnan(fam.ci_low[0])
    assert fam.reason[0].startswith(f"cannot decide at {V.MIN_RMS - 1} RMs: the rule decides from {V.MIN_RMS}")
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
    assert P.possible(0.35, 0.5, 0.5)
    assert not P.possible(0.8, 0.6, 0.5)  # rho_a = 1.1
    assert not P.possible(0.0, 1.0, 0.9)  # +0.5 and -0.5 with a benchmark inter-correlation of 0.9
    for rho in (-0.5, 0.2, 0.7):
        assert 6 / math.pi * math.asin(P.spearman_to_pearson(rho) / 2) == pytest.approx(rho)


def test_power_rows_bisect_the_rules_power():
    rows = P.power_rows([{"center": 0.35, "rho_ab": 0.5, "n": 12, "diff": 0.5}] * 3, 400, 0.05, seed=0)
    per = ["min_gap"] + ["rms_needed"] * 3
    assert len(rows) == 3 * 9 and [r["quantity"] for r in rows[:9]] == per + ["rms_needed_observed"] + per
    assert [r["gap_in"] for r in rows[:9]] == ["all cells"] * 5 + ["this cell"] * 4
    # identical cells share one power curve (common random numbers, pooled): the same answers
    for j in (1, 2):
        assert [(r["gap"], r["n_rms"]) for r in rows[9 * j:9 * j + 9]] == [(r["gap"], r["n_rms"]) for r in rows[:9]]
    need = {r["gap"]: r for r in rows[:5] if r["quantity"] == "rms_needed"}
    assert need[0.5]["n_rms"] < need[0.3]["n_rms"] < need[0.2]["n_rms"]
    alone = {r["gap"]: r for r in rows[5:9] if r["quantity"] == "rms_needed"}
    assert alone[0.5]["n_rms"] >= need[0.5]["n_rms"]  # one cell carrying the gap gets less help from BH
    n5 = need[0.5]["n_rms"]
    grid = list(P.POWER_N_GRID)
    below = grid[grid.index(n5) - 4]  # well below: the bisection's answer is the target's crossing
    pw = P.rule_power([(0.35, 0.5)] * 3, [below] * 3, 0.5, 400, 0.05, seed=0)
    assert pw.mean() < P.POWER_TARGET <= need[0.5]["power"]
    obs = [r for r in rows[:5] if r["quantity"] == "rms_needed_observed"][0]
    assert obs["gap"] == 0.5 and obs["n_rms"] == n5


def test_power_draws_keep_the_ranks_of_each_cell_n_and_gap():
    """rule_power ranks a cell's draws once per (cell, n, gap) and keeps them (read-only, least
    recently used dropped beyond the byte budget): the same power as fresh draws, call after call."""
    specs, gaps = [(0.35, 0.5), (0.2, 0.3)], np.array([0.5, 0.0])
    fresh = [P.rule_power(specs, [n, n], gaps, 300, 0.05, seed=1) for n in (12, 20, 12)]
    small = P.PowerDraws(300, seed=1, max_bytes=300 * 20 * 8 * 2)  # room for one cell's pair of 20-RM ranks
    kept = [P.rule_power(specs, [n, n], gaps, 300, 0.05, seed=1, draws=small) for n in (12, 20, 12)]
    for a, b in zip(fresh, kept):
        np.testing.assert_array_equal(a, b)
    assert small._x.bytes <= small._x.max_bytes and len(small._x) >= 1
    chol = P._cholesky(0.35, 0.5, 0.5)
    xa, xb = small.x_ranks(0, 12, chol)
    assert not xa.flags.writeable and small.x_ranks(0, 12, chol)[0] is xa
    z, _ = small.get(0, 12)
    np.testing.assert_array_equal(xb, stats.rankdata(z @ chol[2], axis=-1))


def test_measurement_noise_matches_the_variance_it_is_given():
    """The power simulation's noise on the downstream scores induces the measurement variance it was
    calibrated to (checked on fresh draws), and the power falls with it."""
    sd = P.measurement_noise_sd(0.02, 0.4, 0.5, 30, seed=1)
    rng = np.random.default_rng(9)
    xa, xb, y = P.draw_cell(0.4, 0.0, 0.5, 30, 300, rng)
    reps = [np.broadcast_to(v[:, None], (300, 20, 30)) for v in (xa, xb)]
    yy = y[:, None] + sd * rng.standard_normal((300, 20, 30))
    got = np.var(V.spearman_difference(reps[0], reps[1], yy), axis=-1, ddof=1).mean()  # over fresh noise draws
    assert got == pytest.approx(0.02, rel=0.15)
    assert P.measurement_noise_sd(0.0, 0.4, 0.5, 30) == 0.0
    exact = P.rule_power([(0.4, 0.5)], [40], 0.4, 400, 0.05, seed=0)
    noisy = P.rule_power([(0.4, 0.5)], [40], 0.4, 400, 0.05, seed=0, meas=[(sd, 0.02 * 30 / 40)])
    assert noisy[0] < exact[0]


# ---- the whole rule, simulated (slow) -------------------------------------------------------------

SIZE_DRAWS = 5000


@pytest.mark.slow
@pytest.mark.parametrize("levels", [None, 3])
@pytest.mark.parametrize("n,rho,rho_ab", [(10, 0.3, 0.2), (10, 0.8, 0.9), (12, 0.6, 0.5), (20, 0.9, 0.9),
                                          (20, 0.3, -0.3), (30, 0.8, 0.5), (30, 0.6, 0.9)])
def test_size_of_the_whole_rule(n, rho, rho_ab, levels):
    """Equal population Spearman correlations in all 3 cells of the family (continuous or cut to 3 levels:
    ties), inside the checked range: the rule names a winner in any cell at most 0.05 + 3 Monte Carlo
    standard errors of the time."""
    assert V.in_checked_range(n, rho, rho, rho_ab)
    rng = np.random.default_rng(1000 + n + int(rho * 10) + int(rho_ab * 10) + (levels or 0))
    cells = [P.draw_cell(rho, 0.0, rho_ab, n, SIZE_DRAWS, rng, levels) for _ in range(3)]
    fam = V.decide_family(cells, 0.05)
    wins = np.isin(fam.verdict, [V.PERSONALIZED, V.BASELINE]).any(-1).mean()
    assert wins <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / SIZE_DRAWS), wins


WORLD_DRAWS = 400


@pytest.mark.slow
@pytest.mark.parametrize("n_rms", [35, 12])
def test_question_level_null_world(n_rms):
    """RMs that pick from shared samples, one judge unrelated to both benchmarks rating every sample,
    pairs shared by all RMs (prbench.analysis.worlds): the family decides at most 0.05 + 3 Monte Carlo
    SE of the time, where the RM level alone decides far more often at 35 RMs."""
    from prbench.analysis import worlds

    r = worlds.rates(worlds.WorldSpec(n_rms=n_rms, judge_weight=None), WORLD_DRAWS, seed=11)
    assert r["decided"] <= 0.05 + 3 * r["mcse"], r
    if n_rms == 35:
        assert r["rm_level"] > 0.05 + 3 * r["mcse"], r  # what the second level is there for


@pytest.mark.slow
def test_question_level_graded_world_is_monotone():
    """judge = w x personal fit + (1 - w) x general quality: 'baseline' at w = 0, neither at the symmetric
    w = 0.5 beyond the size, 'personalized' at w = 1, the share of 'personalized' rising with w."""
    from prbench.analysis import worlds

    r = {w: worlds.rates(spec, 100, seed=12) for w, spec in worlds.graded(weights=(0.0, 0.3, 0.5, 0.7, 1.0)).items()}
    pers = [r[w]["personalized"] for w in sorted(r)]
    assert pers == sorted(pers) and pers[-1] >= 0.9 and r[0.0]["baseline"] >= 0.9, r
    assert r[0.5]["decided"] <= 0.05 + 3 * r[0.5]["mcse"], r


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
    pw = P.rule_power([(0.35, 0.5)] * 3, [30] * 3, 0.5, 5000, 0.05, seed=7)
    assert (pw >= 0.5).all(), pw
    own = _independent_power(2000, seed=123)
    assert abs(pw[0] - own) <= 0.03, (pw, own)


def test_one_rm_is_undefined_and_says_so():
    """A method run with one RM (the demo's GRPO): no rank correlation exists; the cell's reason and
    the summary's sentence name the RM count, not a constant side."""
    from prbench.analysis.summary import verdict_sentence

    fam = V.decide_family([(np.array([0.4]), np.array([0.6]), np.array([0.2]))], 0.05)
    assert fam.verdict[0] == V.UNDEFINED and fam.reason[0].startswith("the coefficients are undefined: 1 RM(s)")
    rows = [dict(family="confirmatory", policy="p", downstream="bon", benchmark_b="general", verdict="personalized",
                 n_rms=35, value_a=0.87, value_b=-0.24, q=4e-05),
            dict(family="confirmatory", policy="p", downstream="grpo", benchmark_b="general", verdict="undefined",
                 n_rms=1, value_a=np.nan, value_b=np.nan, q=np.nan)]
    text = verdict_sentence(pd.DataFrame(rows), None, 0.05)
    assert "no decision on GRPO: at 1 RM no rank correlation is defined" in text and "constant" not in text
    rows[1].update(n_rms=12)
    assert "some coefficients are undefined (a side constant across the RMs)" in verdict_sentence(
        pd.DataFrame(rows), None, 0.05)
