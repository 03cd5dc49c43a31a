"""The analysis' inference (prbench.analysis.inference) re-derived by independent implementations:
the null of every coefficient (scipy.stats.permutation_test, a closed form for NDCG, a brute-force
RBO), the paired swap permutation test (scipy.stats.permutation_test, paired samples), the Williams
test (published worked examples), BH q-values (scipy / statsmodels), the joint RM+question
bootstrap and leave-one-RM-out (loops over scipy.stats.spearmanr); then three synthetic worlds
whose verdicts must come out "personalized", "baseline" and "undecided", and the verdict sentence
and table recomputed from the saved tables. The verdict rule itself: tests/test_verdict.py."""
import itertools
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from synthetic_analysis import write_world
from test_correlation_recompute import _rbo_independent

from prbench.analysis import inference, rankmetrics
from prbench.analysis.correlation import COMPARISON_COLUMNS, POWER_COLUMNS, collect, correlate, run_correlations
from prbench.analysis.summary import VERDICT_END, VERDICT_START

# ---- Williams / Steiger --------------------------------------------------------------------------


def test_williams_reproduces_steiger_case_a():
    """Steiger (1980, Psychological Bulletin 87:245-251), case A of dependent correlations sharing
    a variable, as worked in the psych package's r.test documentation and vignette:
    r.test(n = 103, r12 = .4, r13 = .5, r23 = .1) -> Williams' t = -0.89 on 100 df, p = 0.37."""
    t, p = inference.williams_test(0.4, 0.5, 0.1, 103)
    assert round(t, 2) == -0.89
    assert round(p, 2) == 0.37
    assert p == pytest.approx(2 * stats.t.sf(abs(t), 100))
    # antisymmetric in the two correlations, undefined below 4 cases
    assert inference.williams_test(0.5, 0.4, 0.1, 103)[0] == pytest.approx(-t)
    assert math.isnan(inference.williams_test(0.5, 0.4, 0.1, 3)[0])


def test_williams_separated_from_its_neighbours():
    """n = 10, r(y,x1) = 0.8, r(y,x2) = 0.2, r(x1,x2) = 0.5: Williams' t = 2.7937 on 7 df, p = 0.0268,
    where Steiger's z (2.144) and Hotelling's t (2.867) differ in the second decimal: both computed
    here from their own formulas, so the test tells Williams from them."""
    t, p = inference.williams_test(0.8, 0.2, 0.5, 10)
    assert round(t, 4) == 2.7937 and round(p, 4) == 0.0268
    n, r12, r13, r23 = 10, 0.8, 0.2, 0.5
    det = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    hotelling = (r12 - r13) * math.sqrt((n - 3) * (1 + r23) / (2 * det))
    rbar = (r12 + r13) / 2
    cov = (r23 * (1 - 2 * rbar**2) - 0.5 * rbar**2 * (1 - 2 * rbar**2 - r23**2)) / (1 - rbar**2) ** 2
    steiger = (math.atanh(r12) - math.atanh(r13)) * math.sqrt((n - 3) / (2 - 2 * cov))
    assert round(hotelling, 3) == 2.867 and round(steiger, 3) == 2.144
    assert abs(t - hotelling) > 0.05 and abs(t - steiger) > 0.5


# ---- nulls ---------------------------------------------------------------------------------------


def _scipy_null(x, y, stat):
    res = stats.permutation_test((x,), lambda a: stat(a, y), permutation_type="pairings",
                                 n_resamples=np.inf, alternative="greater", vectorized=False)
    return res.null_distribution, res.pvalue


@pytest.mark.parametrize("name,ref", [
    ("spearman", lambda a, y: stats.spearmanr(a, y).statistic),
    ("kendall_tau_b", lambda a, y: stats.kendalltau(a, y).statistic),
    ("weighted_tau", lambda a, y: stats.weightedtau(a, y).statistic),
    ("rbo", lambda a, y: _rbo_independent(list(a), list(y), 0.9)),
])
def test_exact_null_matches_scipy_permutation_test(name, ref):
    """n = 6 (exact over 720 rankings), with a tie in the benchmark scores."""
    x = np.array([0.61, 0.55, 0.55, 0.70, 0.42, 0.66])
    y = np.array([1.2, 0.9, 1.0, 1.4, 0.7, 0.8])
    fn = rankmetrics.COEFFICIENTS[name]
    mean, q95, p = inference.null_stats(x, y, fn, n_perm=100, seed=0, name=name)
    null, p_ref = _scipy_null(x, y, ref)
    assert mean == pytest.approx(np.mean(null), abs=1e-9)
    assert q95 == pytest.approx(np.quantile(null, 0.95), abs=1e-9)
    assert p == pytest.approx(p_ref, abs=1e-9)


@pytest.mark.parametrize("name,ref", [
    ("spearman", lambda a, y: stats.spearmanr(a, y).statistic),
    ("kendall_tau_b", lambda a, y: stats.kendalltau(a, y).statistic),
])
def test_table_permutation_p_is_scipys_exact_two_sided_test(name, ref):
    """p_perm (Spearman, Kendall) comes from the same null as p_null: exact over all 7! assignments
    here, two-sided; scipy's permutation test of the downstream values shuffled across the RMs
    (the same pairings) gives the same p, ties included."""
    x = np.array([0.61, 0.55, 0.55, 0.70, 0.42, 0.66, 0.50])
    y = np.array([1.2, 0.9, 1.0, 1.4, 0.7, 0.8, 1.1])
    fn = rankmetrics.COEFFICIENTS[name]
    null = inference.null_values(x, y, fn, n_perm=100, seed=0, name=name)
    p = inference.two_sided_p(float(fn(x, y)), null)
    res = stats.permutation_test((y,), lambda b: ref(x, b), permutation_type="pairings", n_resamples=np.inf,
                                 alternative="two-sided", vectorized=False)
    assert null[1] and len(null[0]) == 5040
    # scipy's two-sided p doubles the smaller tail; the statistics' nulls are symmetric here
    tail = np.mean(np.abs(null[0]) >= abs(fn(x, y)) - 1e-12)
    assert p == pytest.approx(tail, abs=1e-12)
    assert p == pytest.approx(res.pvalue, abs=1e-9)


def test_null_is_shared_by_every_pair_with_the_same_tie_patterns():
    """The null depends on the multisets only: the RMs relabelled jointly, or y replaced by a monotone
    transform (rank-only coefficients), hit the cache and give the same numbers; NDCG (values as gains)
    keys on y's values."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=12), rng.normal(size=12)
    perm = rng.permutation(12)
    for name in ("spearman", "weighted_tau", "rbo", "ndcg"):
        fn = rankmetrics.COEFFICIENTS[name]
        cache: dict = {}
        a = inference.null_values(x, y, fn, n_perm=300, seed=1, name=name, cache=cache)
        b = inference.null_values(x[perm], y[perm], fn, n_perm=300, seed=1, name=name, cache=cache)
        assert b is a and len(cache) == 1
        c = inference.null_values(x, np.exp(y), fn, n_perm=300, seed=1, name=name, cache=cache)
        assert (c is a) == (name != "ndcg")
        # another seed's draws give the same null within Monte Carlo noise
        fresh = inference.null_values(x, y, fn, n_perm=300, seed=2, name=name)
        assert abs(a[0].mean() - fresh[0].mean()) < 0.05


def test_ndcg_null_mean_closed_form():
    """Without ties, a random ranking puts every gain at every position equally often:
    E[DCG] = mean(gain) * sum of discounts."""
    x = np.array([3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0])
    y = np.array([0.3, 0.9, 0.1, 0.5, 0.7, 0.2, 0.8])
    mean, _, p = inference.null_stats(x, y, rankmetrics.ndcg, n_perm=100, seed=0, name="ndcg")
    gain = y - y.min()
    disc = 1 / np.log2(np.arange(2, len(y) + 2))
    expected = gain.mean() * disc.sum() / (np.sort(gain)[::-1] * disc).sum()
    assert mean == pytest.approx(expected, abs=1e-9)
    value = rankmetrics.ndcg(x, y)
    assert inference.normalised(value, mean) == pytest.approx((value - expected) / (1 - expected))

    def ndcg(xs):  # the RMs ranked by xs (no ties), gains y - min(y), log2 discounts
        return (gain[np.argsort(-xs)] * disc).sum() / (np.sort(gain)[::-1] * disc).sum()

    assert ndcg(x) == pytest.approx(value)
    # exact p: the share of all 7! assignments of x to the RMs whose NDCG reaches the observed one
    null = np.array([ndcg(np.array(perm)) for perm in itertools.permutations(x)])
    assert len(null) == 5040 and null.mean() == pytest.approx(expected)
    assert p == pytest.approx(np.mean(null >= ndcg(x) - 1e-12), abs=1e-12)


def test_monte_carlo_null_when_n_is_large():
    """n = 11 (> 8): n_perm seeded random rankings; mean and p agree with scipy's own Monte-Carlo
    null within sampling error, and the same seed gives the same numbers."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=11)
    y = x + rng.normal(scale=1.5, size=11)
    fn = rankmetrics.spearman
    a = inference.null_stats(x, y, fn, n_perm=4000, seed=1, name="spearman")
    assert a == inference.null_stats(x, y, fn, n_perm=4000, seed=1, name="spearman")
    ry = stats.rankdata(y) - (len(y) + 1) / 2

    def rho(v, axis=-1):  # Spearman without ties: Pearson of ranks, direct formula, vectorised
        rv = stats.rankdata(v, axis=axis) - (len(y) + 1) / 2
        return (rv * ry).sum(axis) / np.sqrt((rv * rv).sum(axis) * (ry * ry).sum())

    assert rho(x) == pytest.approx(stats.spearmanr(x, y).statistic)
    ref = stats.permutation_test((x,), rho, permutation_type="pairings", n_resamples=20000, alternative="greater",
                                 vectorized=True, random_state=0)
    assert a[0] == pytest.approx(0.0, abs=0.02)
    assert a[2] == pytest.approx(ref.pvalue, abs=0.02)


# ---- paired comparison ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["spearman", "pearson", "kendall_tau_b", "ndcg"])
def test_swap_permutation_matches_scipy_paired_samples(name):
    """Swapping A's and B's standardised scores within each RM = scipy's paired-samples
    permutation test of |coef(A, y) - coef(B, y)| (exact over 2^7 swaps)."""
    xa = np.array([0.61, 0.55, 0.52, 0.70, 0.42, 0.66, 0.58])
    xb = np.array([0.80, 0.85, 0.79, 0.83, 0.90, 0.81, 0.86])
    y = np.array([1.2, 0.9, 1.0, 1.4, 0.7, 0.8, 1.1])
    fn = inference.pearson if name == "pearson" else rankmetrics.COEFFICIENTS[name]
    p = inference.swap_pvalue(xa, xb, y, fn, name, n_perm=100, seed=0)

    def std(v):
        return (v - v.mean()) / v.std() if name == "pearson" else stats.rankdata(v)

    ref_fn = {"spearman": lambda a: stats.spearmanr(a, y).statistic,
              "pearson": lambda a: stats.pearsonr(a, y).statistic,
              "kendall_tau_b": lambda a: stats.kendalltau(a, y).statistic,
              "ndcg": lambda a: rankmetrics.ndcg(a, y)}[name]
    res = stats.permutation_test((std(xa), std(xb)), lambda a, b: abs(ref_fn(a) - ref_fn(b)),
                                 permutation_type="samples", n_resamples=np.inf, alternative="greater",
                                 vectorized=False)
    assert p == pytest.approx(res.pvalue, abs=1e-9)


def test_pearson_and_leave_one_out_match_scipy():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=8), rng.normal(size=8)
    assert inference.pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic)
    loo = inference.leave_one_out(x, y, rankmetrics.spearman)
    ref = [stats.spearmanr(np.delete(x, i), np.delete(y, i)).statistic for i in range(8)]
    assert loo == pytest.approx(ref)


def test_joint_bootstrap_ci_recomputed_by_a_loop():
    """compare(): replicate b = RMs rm_idx[b] of question-bootstrap replicate b; its CI is the
    percentile interval of spearman(A) - spearman(B) over those replicates (scipy in a loop)."""
    rng = np.random.default_rng(5)
    n, B = 8, 300
    xa, xb, y = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    ba, bb, by = (v + rng.normal(scale=0.2, size=(B, n)) for v in (xa, xb, y))
    idx = inference.rm_resamples(n, B, seed=2)
    out = inference.compare(xa, xb, y, ba, bb, by, idx, rankmetrics.spearman, "spearman", 0.9, 100, 0)
    reps = []
    for b in range(B):
        i = idx[b]
        d = stats.spearmanr(ba[b, i], by[b, i]).statistic - stats.spearmanr(bb[b, i], by[b, i]).statistic
        if np.isfinite(d):
            reps.append(d)
    assert out["ci_low"] == pytest.approx(np.quantile(reps, 0.05))
    assert out["ci_high"] == pytest.approx(np.quantile(reps, 0.95))
    assert out["n_boot"] == len(reps)
    assert out["diff"] == pytest.approx(stats.spearmanr(xa, y).statistic - stats.spearmanr(xb, y).statistic)
    r_ab = stats.spearmanr(xa, xb).statistic
    assert out["p_williams"] == pytest.approx(inference.williams_test(out["value_a"], out["value_b"], r_ab, n)[1])


def test_bh_qvalues_match_scipy_and_statsmodels():
    """statsmodels is a dev dependency (pyproject `dev` extras): imported here unconditionally, so
    the cross-check can never be skipped silently."""
    from statsmodels.stats import multitest

    p = np.array([0.01, 0.04, np.nan, 0.03, 0.2, 0.001, 0.04, 0.9])
    q = inference.bh_qvalues(p)
    ok = np.isfinite(p)
    assert np.isnan(q[~ok]).all()
    assert q[ok] == pytest.approx(stats.false_discovery_control(p[ok], method="bh"))
    assert q[ok] == pytest.approx(multitest.multipletests(p[ok], method="fdr_bh")[1])
    # by hand: sorted p 0.001 0.01 0.03 0.04 0.04 0.2 0.9 (m = 7), q_(i) = min_{j >= i} p_(j) m / j
    assert q[ok] == pytest.approx([0.035, 0.056, 0.056, 0.7 / 3, 0.007, 0.056, 0.9])


# ---- synthetic worlds: three verdicts ------------------------------------------------------------

N_RMS = 10
SIGNALS = {"bon": {"estimator": "expected", "k": 16}}


def _world(root, gen_skill):
    return write_world(root, rms=[f"rm{i}" for i in range(N_RMS)], pairs_per_subset=30, eval_per_subset=6,
                       general_pairs=60, ppo=False, gen_skill=gen_skill)


@pytest.fixture(scope="module")
def opposed(tmp_path_factory):
    """The general skill runs against the personalization skill that drives BoN quality."""
    return _world(tmp_path_factory.mktemp("opposed"), np.linspace(0.5, 0.9, N_RMS))


def _headline(res):
    c = res.comparisons
    return c[c["headline"] & (c["coefficient"] == "spearman")].iloc[0]


def _correlate(world, pair_files):
    col = collect(world["rms"], pair_files, world["downstream"])
    return correlate(col, n_boot=100, n_perm=100, seed=0, power_sims=50, signals=SIGNALS)


def test_verdict_personalized(opposed):
    res = _correlate(opposed, opposed["pair_files"])
    row = _headline(res)
    assert row["verdict"] == "personalized", row["reason"]
    assert row["family"] == "confirmatory" and row["family_size"] == 1
    assert row["diff"] > 1 and row["ci_low"] > 0 and row["q"] <= 0.05
    assert "Personalized predicts BoN better than general" in res.summary


def test_verdict_baseline(opposed):
    """The same files with the two benchmarks' names exchanged: the baseline now wins."""
    swap = {"personalized": "general", "general": "personalized"}
    res = _correlate(opposed, [(rm, swap[b], p) for rm, b, p in opposed["pair_files"]])
    row = _headline(res)
    assert row["verdict"] == "baseline", row["reason"]
    assert row["diff"] < -1 and row["ci_high"] < 0 and row["q"] <= 0.05
    assert "General predicts BoN better than personalized" in res.summary


def test_verdict_undecided(tmp_path):
    """Both benchmarks track the same skill (general = personalization skill): no side wins."""
    w = _world(tmp_path, np.linspace(0.9, 0.5, N_RMS))
    res = _correlate(w, w["pair_files"])
    row = _headline(res)
    assert row["verdict"] == "undecided", row["reason"]
    assert row["q"] > 0.05 and row["reason"].startswith("q = ")
    assert "No decision on BoN: no q reaches 0.05" in res.summary


# ---- the verdict sentence and table, recomputed from the saved tables -----------------------------


@pytest.fixture(scope="module")
def saved(opposed, tmp_path_factory):
    out = tmp_path_factory.mktemp("saved")
    paths = {k: out / f"{k}.csv" for k in ("table", "inputs", "comparisons", "power")}
    run_correlations(opposed["rms"], opposed["pair_files"], opposed["downstream"], paths["table"],
                     out / "summary.md", paths["inputs"], n_boot=100, n_perm=100, rbo_p=0.9, ci=0.95, seed=0,
                     out_comparisons=paths["comparisons"], out_power=paths["power"], power_sims=50,
                     signals=SIGNALS, out_verdict=out / "verdict.html",
                     out_forest=(out / "forest.png", out / "forest.pdf"))
    return {k: pd.read_csv(v) for k, v in paths.items()} | {
        "summary": (out / "summary.md").read_text(), "verdict_html": (out / "verdict.html").read_text(),
        "forest": (out / "forest.png").read_bytes()}


def _opening(summary: str) -> str:
    assert summary.startswith("# Which benchmark")
    start = summary.index(VERDICT_START) + len(VERDICT_START)
    return summary[start:summary.index(VERDICT_END)].strip()


def test_saved_tables_have_their_columns(saved):
    assert list(saved["comparisons"].columns) == COMPARISON_COLUMNS
    assert list(saved["power"].columns) == POWER_COLUMNS


def test_verdict_opening_recomputed_from_saved_files(saved):
    """The summary opens with one sentence and the verdict table; each number is recomputed here from
    the per-RM inputs with scipy and the test's own formula (Williams' t, Bonett-Wright factor) plus
    the saved measurement variance (`se_meas`: the question bootstrap's, checked against scipy in
    tests/test_comparison.py)."""
    text = _opening(saved["summary"])
    sentence = text.splitlines()[0]
    inputs, comp, power = saved["inputs"], saved["comparisons"], saved["power"]

    def per_rm(**key):
        sel = np.ones(len(inputs), bool)
        for k, v in key.items():
            sel &= (inputs[k] == v) if k == "k" else (inputs[k].astype(str) == str(v))
        return inputs[sel].set_index("rm")["value"]

    conf = comp[comp["family"] == "confirmatory"]
    assert len(conf) == 1 and set(comp.loc[comp["family"] != "confirmatory", "verdict"]) == {"exploratory"}
    r = conf.iloc[0]
    y = per_rm(kind="downstream", downstream=r["downstream"], estimator=r["estimator"], measure=r["measure"],
               k=int(r["k"]))
    a = per_rm(kind="benchmark", benchmark="personalized", level=r["level_a"]).reindex(y.index)
    b = per_rm(kind="benchmark", benchmark=r["benchmark_b"], level=r["level_b"]).reindex(y.index)
    va, vb, r_ab = stats.spearmanr(a, y).statistic, stats.spearmanr(b, y).statistic, stats.spearmanr(a, b).statistic
    n = len(y)
    det = 1 - va**2 - vb**2 - r_ab**2 + 2 * va * vb * r_ab
    rbar = (va + vb) / 2
    se_rm = math.sqrt((2 * (n - 1) / (n - 3) * det + rbar**2 * (1 - r_ab) ** 3) * (1 + rbar**2 / 2)
                      / ((n - 1) * (1 + r_ab)))
    assert r["se_rm"] == pytest.approx(se_rm, rel=1e-9) and 0 < r["se_meas"] < 1
    se = math.sqrt(se_rm**2 + r["se_meas"] ** 2)
    p = 2 * stats.t.sf(abs((va - vb) / se), n - 3)
    assert r["p"] == pytest.approx(p, rel=1e-9) and r["q"] == pytest.approx(p, rel=1e-9)  # a family of one
    half = stats.t.ppf(1 - 0.05 / 2, n - 3) * se
    assert r["ci_low"] == pytest.approx(max(va - vb - half, -2))
    assert r["ci_high"] == pytest.approx(min(va - vb + half, 2))
    assert r["verdict"] == "personalized"
    assert sentence == (f"Personalized predicts BoN better than general (Spearman {va:+.2f} vs {vb:+.2f}, q = "
                        + (f"{p:.3f}" if p >= 0.001 else f"{p:.1e}") + ")"
                        + _gap_tail(power) + ".")
    need = power[power["quantity"] == "rms_needed_observed"].iloc[0]
    pq = f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"
    need_text = int(need["n_rms"]) if np.isfinite(need["n_rms"]) else "more than 500"
    row = (f"| BoN expected judge_score k=16 | general | personalized | {va - vb:+.2f} "
           f"[{max(va - vb - half, -2):+.2f}, {min(va - vb + half, 2):+.2f}] (95.0%) | {pq} | {pq} | {va:+.2f} "
           f"| {vb:+.2f} | {n} | {need_text} |")
    assert row in text
    assert text.splitlines()[-2 if not text.splitlines()[-1] else -1].startswith("Decided by Williams' t")


def _gap_tail(power: pd.DataFrame) -> str:
    g = power[(power["quantity"] == "rms_needed") & np.isclose(power["gap"], 0.5)].iloc[0]
    if not g["possible"]:
        return "; a Spearman gap of 0.5 is impossible at some cells' correlations"
    if not np.isfinite(g["n_rms"]):
        return "; a Spearman gap of 0.5 in every cell would need more than 500 RMs"
    return f"; a Spearman gap of 0.5 in every cell would need {int(g['n_rms'])} RMs for 80% power"


def test_verdict_html_fragment_and_forest(saved):
    """The report's fragment: the same sentence, a table with one row per confirmatory cell and the
    forest plot embedded as the PNG the run wrote."""
    import base64

    frag = saved["verdict_html"]
    sentence = _opening(saved["summary"]).splitlines()[0]
    assert f"<strong>Verdict.</strong> {sentence}" in frag
    assert frag.count('<table class="prbench-verdict"') == 1 and frag.count("<tr>") == 2
    assert base64.b64encode(saved["forest"]).decode() in frag
    assert saved["forest"][:8] == b"\x89PNG\r\n\x1a\n"


def test_rerun_gives_identical_tables(opposed, saved, tmp_path):
    out = tmp_path
    run_correlations(opposed["rms"], opposed["pair_files"], opposed["downstream"], out / "t.csv", out / "s.md",
                     out / "i.csv", n_boot=100, n_perm=100, rbo_p=0.9, ci=0.95, seed=0,
                     out_comparisons=out / "c.csv", out_power=out / "p.csv", power_sims=50, signals=SIGNALS,
                     out_verdict=out / "v.html")
    assert (out / "v.html").read_text() == saved["verdict_html"].split("\n<img")[0] + "\n"
    pd.testing.assert_frame_equal(pd.read_csv(out / "c.csv"), saved["comparisons"])
    pd.testing.assert_frame_equal(pd.read_csv(out / "t.csv"), saved["table"])
    pd.testing.assert_frame_equal(pd.read_csv(out / "p.csv"), saved["power"])
    assert (out / "s.md").read_text() == saved["summary"]


def test_exact_permutations_cover_every_ranking():
    assert len(inference._all_permutations(5)) == math.factorial(5)
    assert {tuple(p) for p in inference._all_permutations(4)} == set(itertools.permutations(range(4)))


def test_html_report_opens_with_the_verdict(saved, tmp_path, monkeypatch):
    """report/workflow.rst (the report's first text) includes the verdict fragment (sentence, table,
    forest plot): rendered as Snakemake renders it (Jinja, then docutils, in the working directory)."""
    import types

    import jinja2
    import yaml
    from docutils.core import publish_parts
    from helpers import REPO

    tables = tmp_path / "results" / "tables"
    tables.mkdir(parents=True)
    (tables / "correlation_summary.md").write_text(saved["summary"], encoding="utf-8")
    (tables / "verdict.html").write_text(saved["verdict_html"], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    text = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(
        (REPO / "report" / "workflow.rst").read_text()).render(snakemake=types.SimpleNamespace(config=cfg))
    html = publish_parts(text, writer_name="html", settings_overrides={"halt_level": 2})["html_body"]
    body = html.strip().removeprefix('<div class="document">').lstrip()
    assert body.startswith('<p class="prbench-verdict-sentence"><strong>Verdict.</strong>')
    first = re.search(r"<p[^>]*>(.*?)</p>", html, re.S).group(1)
    assert "Personalized predicts BoN better than general" in first
    assert html.index('<table class="prbench-verdict"') < html.index('<img class="prbench-forest"') < html.index(
        "Personalized RewardBench pipeline")


def test_best_benchmark_without_each_rm_matches_a_scipy_loop():
    """best_without_one_rm: per left-out RM, the headline benchmark with the larger Spearman
    (scipy on the remaining RMs); the summary column says 'holds' only if it never changes."""
    from types import SimpleNamespace as NS

    from prbench.analysis.correlation import best_without_one_rm
    from prbench.analysis.summary import _loo_cell

    y = np.array([5.0, 1.0, 2.0, 3.0, 4.0, 6.0])
    a = np.array([9.0, 1.0, 2.0, 4.0, 3.0, 5.0])  # agrees with y except RM 0 and the 3/4 swap
    b = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 0.5])
    rms = [f"r{i}" for i in range(6)]

    def ev(bench, v):
        return NS(score=NS(key={"benchmark": bench, "level": "overall", "group": "overall"}), point=v)

    d = NS(score=NS(key={"policy": "p", "downstream": "bon", "estimator": "expected", "measure": "judge_score",
                         "k": 16}), point=y)
    out = best_without_one_rm(rms, [ev("personalized", a), ev("general", b)], [d], rankmetrics.COEFFICIENTS)
    got = out[(("p", "bon", "expected", "judge_score", 16), "spearman")]
    for i, rm in enumerate(rms):
        ra = stats.spearmanr(np.delete(a, i), np.delete(y, i)).statistic
        rb = stats.spearmanr(np.delete(b, i), np.delete(y, i)).statistic
        assert got[rm] == ("personalized" if ra > rb else "general" if rb > ra else "personalized=general")
    full_best = "personalized" if stats.spearmanr(a, y).statistic > stats.spearmanr(b, y).statistic else "general"
    cell = _loo_cell(full_best, got)
    assert cell == "holds" if set(got.values()) == {full_best} else cell.startswith("does not hold: ")


def test_summary_says_whether_the_best_benchmark_holds(saved):
    body = saved["summary"].split(VERDICT_END, 1)[1]  # after the verdict table
    rows = [ln for ln in body.splitlines() if ln.startswith("| BoN expected judge_score k=16 |")
            and ln.split("|")[3].strip() == "personalized"]  # the best-benchmark tables (Spearman, Kendall)
    assert len(rows) == 2 and all(ln.rstrip(" |").endswith("holds") for ln in rows)


def test_fdr_section_counts_the_saved_q_values(saved):
    """BH within each family: the exploratory rows' q from their swap p (scipy), the confirmatory
    family's from the decision test; the summary counts each."""
    comp, table = saved["comparisons"], saved["table"]
    ex = comp[comp["family"] == "exploratory"]
    assert (ex["test"] == "swap_permutation").all() and ex["p"].equals(ex["p_perm"])
    q = stats.false_discovery_control(ex["p"].dropna(), method="bh")
    assert ex["q"].dropna().to_numpy() == pytest.approx(q)
    assert (ex["family_size"] == len(q)).all()
    n_comp = int((q <= 0.05).sum())
    q_null = stats.false_discovery_control(table["p_null"].dropna(), method="bh")
    n_null = int((q_null <= 0.05).sum())
    text = saved["summary"]
    assert "- confirmatory paired comparisons (BH over the declared family): 1 of 1 survive." in text
    assert f"- exploratory paired comparisons (BH over the exploratory rows): {n_comp} of {len(q)} survive." in text
    assert f"- coefficients beyond a random RM ranking: {n_null} of {len(q_null)} survive." in text
    assert n_comp > 0  # the opposed world has real findings
