"""The benchmark comparison table (prbench.analysis.comparison) row by row against values derived here:
which rows exist and in what order, each coefficient by scipy, the headline cell of each method, the
declared (confirmatory) family decided by Williams' t with the Bonett-Wright correction (the formula
written out in tests/test_verdict.py) under its own BH, the exploratory rows under theirs
(scipy's false_discovery_control), the power table's cells and the leave-one-RM-out winners."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_verdict import _own_bw_p, _own_var_meas

from prbench.analysis import comparison as C
from prbench.analysis import inference, rankmetrics
from prbench.analysis import power as P
from prbench.analysis import verdict as V
from prbench.seeding import stable_seed

R, B = 12, 16
COEFS = {"spearman": rankmetrics.spearman, "kendall_tau_b": rankmetrics.kendall_tau_b}
SCIPY = {"spearman": lambda u, v: stats.spearmanr(u, v).statistic,
         "pearson": lambda u, v: stats.pearsonr(u, v).statistic,
         "kendall_tau_b": lambda u, v: stats.kendalltau(u, v).statistic}


def _ev(key: dict, point, rng) -> SimpleNamespace:
    point = np.asarray(point, dtype=float)
    boot = point[None, :] + rng.normal(0, 0.02, (B, len(point)))
    return SimpleNamespace(score=SimpleNamespace(key=key), point=point, boot=boot)


def _dkey(downstream, estimator, measure, k):
    return {"policy": "pol", "downstream": downstream, "estimator": estimator, "measure": measure, "k": k}


@pytest.fixture(scope="module")
def inputs():
    """12 RMs; personalized (overall, and a subset level that is no headline), a baseline `rb` with an
    official score beside its pooled accuracy, a baseline `plain` without one; BoN at k 2 and 4 (judge
    score, win rate), a measure with two RMs only, and PPO's judge score with one RM missing."""
    rng = np.random.default_rng(5)
    y = rng.normal(size=R)
    b = lambda key, v: _ev({"level": "overall", "group": "overall", **key}, v, rng)  # noqa: E731
    bench = [
        b({"benchmark": "personalized"}, y + 0.4 * rng.normal(size=R)),
        b({"benchmark": "personalized", "level": "subset", "group": "s1"}, rng.normal(size=R)),
        b({"benchmark": "rb"}, rng.normal(size=R)),  # pooled: not rb's headline
        b({"benchmark": "rb", "level": "official"}, 0.5 * y + rng.normal(size=R)),
        b({"benchmark": "plain"}, 0.8 * y + rng.normal(size=R)),
    ]
    ppo = y + 0.5 * rng.normal(size=R)
    ppo[3] = np.nan
    two = np.full(R, np.nan)
    two[:2] = [0.1, 0.2]
    three = np.full(R, np.nan)
    three[4:7] = [0.3, 0.1, 0.2]
    down = [_ev(_dkey("bon", "expected", "judge_score", 2), y + 0.3 * rng.normal(size=R), rng),
            _ev(_dkey("bon", "expected", "judge_score", 4), y + 0.3 * rng.normal(size=R), rng),
            _ev(_dkey("bon", "expected", "win_rate", 4), y + rng.normal(size=R), rng),
            _ev(_dkey("bon", "expected", "auc_judge_score", None), two, rng),
            _ev(_dkey("bon", "expected", "auc_win_rate", None), three, rng),
            _ev(_dkey("ppo", "", "judge_score", None), ppo, rng)]
    return bench, down


SIGNALS = {"bon": {"estimator": "expected", "k": 4}}


# function scope on purpose: mutmut ties a test to the code it calls while it runs, and a module-scoped
# fixture's work is counted to the first test only
@pytest.fixture
def table(inputs):
    bench, down = inputs
    return C.compare_benchmarks(bench, down, COEFS, n_boot=B, n_perm=50, ci=0.9, seed=3, fdr=0.05, min_rms=None,
                                signals=SIGNALS)


def test_rows_values_and_headline_cells(inputs, table):
    bench, down = inputs
    want = [(bb, lb, d.score.key["downstream"], d.score.key["measure"], d.score.key["k"], c)
            for bb, lb in (("rb", "official"), ("plain", "overall")) for d in down
            for c in ("spearman", "pearson", "kendall_tau_b")]
    got = list(zip(table["benchmark_b"], table["level_b"], table["downstream"], table["measure"],
                   [None if pd.isna(k) else int(k) for k in table["k"]], table["coefficient"]))
    assert got == want
    assert (table["benchmark_a"] == "personalized").all() and (table["level_a"] == "overall").all()
    assert (table["policy"] == "pol").all() and str(table["k"].dtype) == "Int64"
    pts = {(e.score.key["benchmark"], e.score.key["level"]): e.point for e in bench}
    by_key = {(d.score.key["downstream"], d.score.key["measure"], d.score.key["k"]): d.point for d in down}
    for _, row in table.iterrows():
        y = by_key[(row["downstream"], row["measure"], None if pd.isna(row["k"]) else int(row["k"]))]
        xa, xb = pts[("personalized", "overall")], pts[(row["benchmark_b"], row["level_b"])]
        keep = np.isfinite(y)
        assert row["n_rms"] == keep.sum()
        if keep.sum() < 3:
            assert np.isnan(row["diff"]) and row["n_boot"] == 0 and np.isnan(row["value_a"])
            continue
        fn = SCIPY[row["coefficient"]]
        va, vb = fn(xa[keep], y[keep]), fn(xb[keep], y[keep])
        assert row["value_a"] == pytest.approx(va, abs=1e-12) and row["value_b"] == pytest.approx(vb, abs=1e-12)
        assert row["diff"] == pytest.approx(va - vb, abs=1e-12)
        assert row["n_boot"] == B
    assert sorted(set(table["n_rms"])) == [2, 3, 11, 12]
    # the headline cells: BoN's judge score at its signal (expected, k=4), PPO's only judge score
    head = table[table["headline"]]
    assert set(zip(head["downstream"], head["measure"], head["k"].astype(object).where(head["k"].notna(), None))) \
        == {("bon", "judge_score", 4), ("ppo", "judge_score", None)}
    assert table["headline"].dtype == bool


def test_the_declared_family_is_decided_by_its_test(inputs, table):
    bench, down = inputs
    conf = table[table["family"] == C.CONFIRMATORY]
    assert list(zip(conf["benchmark_b"], conf["downstream"], conf["coefficient"])) == [
        ("rb", "bon", "spearman"), ("rb", "ppo", "spearman"),
        ("plain", "bon", "spearman"), ("plain", "ppo", "spearman")]
    ev = {e.score.key["benchmark"] + "/" + e.score.key["level"]: e for e in bench}
    ys = {"bon": down[1], "ppo": down[5]}
    p = []
    for _, row in conf.iterrows():
        y = ys[row["downstream"]]
        keep = np.isfinite(y.point)
        a, b = ev["personalized/overall"], ev[f"{row['benchmark_b']}/{row['level_b']}"]
        xa, xb = a.point[keep], b.point[keep]
        # the measurement level: the Spearman difference over the question bootstrap, the RMs fixed
        var = _own_var_meas(a.boot[:, keep], b.boot[:, keep], y.boot[:, keep])
        ra, rb, pv = _own_bw_p(xa, xb, y.point[keep], var)
        p.append(pv)
        assert row["rho_ab"] == pytest.approx(stats.spearmanr(xa, xb).statistic, abs=1e-12)
        assert row["se_meas"] == pytest.approx(np.sqrt(var), rel=1e-9) and row["se_rm"] > 0
    p = np.array(p)
    np.testing.assert_allclose(conf["p"].to_numpy(float), p, rtol=1e-9)
    q = stats.false_discovery_control(p, method="bh")
    np.testing.assert_allclose(conf["q"].to_numpy(float), q, rtol=1e-9)
    assert (conf["family_size"] == 4).all() and (conf["test"] == V.TEST).all()
    assert (conf["ci_method"] == "test, family FCR level").all()
    decided = np.isin(conf["verdict"], [V.PERSONALIZED, V.BASELINE])
    assert decided.tolist() == (q <= 0.05).tolist()
    for _, row in conf.iterrows():  # the direction follows the sign, the interval agrees with it
        if row["verdict"] == V.PERSONALIZED:
            assert row["diff"] > 0 and row["ci_low"] > 0
        elif row["verdict"] == V.BASELINE:
            assert row["diff"] < 0 and row["ci_high"] < 0
        else:
            assert row["verdict"] == V.UNDECIDED and row["ci_low"] < 0 < row["ci_high"]
        assert row["reason"].startswith("q = ")
    assert conf["ci_level"].to_numpy(float) == pytest.approx(np.full(4, 1 - max(decided.sum(), 1) * 0.05 / 4))


def test_exploratory_rows_have_their_own_bh(inputs, table):
    bench, down = inputs
    ex = table[table["family"] == C.EXPLORATORY]
    assert len(ex) == len(table) - 4
    assert (ex["test"] == "swap_permutation").all() and (ex["verdict"] == C.EXPLORATORY).all()
    assert (ex["reason"] == "not in the confirmatory family: no verdict").all()
    assert (ex["ci_method"] == "bootstrap, unadjusted").all() and (ex["ci_level"] == 0.9).all()
    np.testing.assert_array_equal(ex["p"].to_numpy(float), ex["p_perm"].to_numpy(float))
    np.testing.assert_array_equal(ex["ci_low"].to_numpy(float), ex["boot_low"].to_numpy(float))
    np.testing.assert_array_equal(ex["ci_high"].to_numpy(float), ex["boot_high"].to_numpy(float))
    p = ex["p"].to_numpy(float)
    ok = np.isfinite(p)
    assert 0 < ok.sum() < len(p)  # the two-RM measure has no p
    np.testing.assert_allclose(ex["q"].to_numpy(float)[ok], stats.false_discovery_control(p[ok], method="bh"))
    assert np.isnan(ex["q"].to_numpy(float)[~ok]).all()
    assert ex["family_size"].tolist() == [ok.sum()] * len(ex) and str(table["family_size"].dtype) == "Int64"
    # every finite row's inference is inference.compare's on the kept RMs, the swap test seeded by n
    pers = bench[0].point
    row = ex[(ex["benchmark_b"] == "plain") & (ex["downstream"] == "ppo") & (ex["coefficient"] == "pearson")].iloc[0]
    keep = np.isfinite(down[5].point)
    xa, xb, y = pers[keep], bench[4].point[keep], down[5].point[keep]
    out = inference.compare(xa, xb, y, bench[0].boot[:, keep], bench[4].boot[:, keep], down[5].boot[:, keep],
                            inference.rm_resamples(11, B, 3), inference.pearson, "pearson", 0.9, 50,
                            stable_seed(3, "correlation-swap", 11))
    for col in ("p_perm", "p_williams", "loo_min", "loo_max"):
        assert row[col] == pytest.approx(out[col], abs=1e-12, nan_ok=True), col
    assert (row["boot_low"], row["boot_high"]) == pytest.approx((out["ci_low"], out["ci_high"]))


def test_a_declared_family_narrows_the_confirmatory_rows(inputs):
    bench, down = inputs
    t = C.compare_benchmarks(bench, down, COEFS, n_boot=B, n_perm=20, ci=0.9, seed=3, fdr=0.05, min_rms=None,
                             signals={"bon": {"estimator": "expected", "k": 2}, "ppo": {"estimator": "", "k": None}},
                             confirmatory=[{"downstream": "bon", "baseline": "plain"}])
    conf = t[t["family"] == C.CONFIRMATORY]
    assert len(conf) == 1 and conf["benchmark_b"].iloc[0] == "plain" and conf["k"].iloc[0] == 2
    assert conf["q"].iloc[0] == pytest.approx(conf["p"].iloc[0]) and conf["family_size"].iloc[0] == 1
    head = t[t["headline"] & (t["coefficient"] == "spearman")]
    assert sorted(zip(head["benchmark_b"], head["downstream"], head["k"].fillna(0).astype(int))) == [
        ("plain", "bon", 2), ("plain", "ppo", 0), ("rb", "bon", 2), ("rb", "ppo", 0)]
    # min_rms above the RMs: the declared cell cannot be decided
    t2 = C.compare_benchmarks(bench, down, COEFS, n_boot=B, n_perm=20, ci=0.9, seed=3, fdr=0.05, min_rms=40,
                              signals=SIGNALS)
    assert (t2.loc[t2["family"] == C.CONFIRMATORY, "verdict"] == V.CANNOT).all()


def test_without_signals_each_methods_first_judge_score_cell_is_its_headline(inputs):
    bench, down = inputs
    t = C.compare_benchmarks(bench, down, COEFS, n_boot=B, n_perm=0, ci=0.9, seed=3, fdr=0.05, min_rms=None,
                             signals=None)
    head = t[t["headline"] & (t["coefficient"] == "spearman")]
    assert sorted(set(zip(head["downstream"], head["measure"], head["k"].fillna(0).astype(int)))) == [
        ("bon", "judge_score", 2), ("ppo", "judge_score", 0)]


def test_declared_family_entries_with_a_policy_and_their_union():
    t = pd.DataFrame({"coefficient": ["spearman"] * 4 + ["pearson"], "headline": [True] * 5,
                      "downstream": ["bon", "bon", "ppo", "ppo", "bon"], "benchmark_b": ["rb"] * 5,
                      "policy": ["p1", "p2", "p1", "p2", "p2"]})
    assert C.confirmatory_mask(t, [{"downstream": "bon", "baseline": "rb", "policy": "p2"}]).tolist() == [
        False, True, False, False, False]
    assert C.confirmatory_mask(t, [{"downstream": "bon", "baseline": "rb", "policy": "p2"},
                                   {"downstream": "ppo", "baseline": "rb", "policy": None}]).tolist() == [
        False, True, True, True, False]
    with pytest.raises(ValueError, match="matches no headline cell"):
        C.confirmatory_mask(t, [{"downstream": "ppo", "baseline": "rb", "policy": "p3"}])


def test_no_downstream_measure_gives_an_empty_table(inputs):
    bench, _ = inputs
    t = C.compare_benchmarks(bench, [], COEFS, n_boot=B, n_perm=20, ci=0.9, seed=3, fdr=0.05, min_rms=None,
                             signals=None)
    assert t.empty and list(t.columns) == C.COMPARISON_COLUMNS
    assert C.power_table(t, 10, 0.05, 0).empty


def test_power_table_cells():
    """The real verdict.power_rows under a small comparisons table (one confirmatory cell, few simulations:
    the wiring is tested here, the power in tests/test_verdict.py)."""
    key = {"policy": "pol", "downstream": "bon", "estimator": "expected", "measure": "judge_score",
           "benchmark_a": "personalized", "benchmark_b": "rb"}
    t = pd.DataFrame([{**key, "k": 4, "family": C.CONFIRMATORY, "value_a": 0.5, "value_b": 0.3, "rho_ab": 0.4,
                       "n_rms": 12, "diff": 0.2, "se_meas": 0.0},
                      {**key, "k": 2, "family": C.EXPLORATORY, "value_a": 0.1, "value_b": 0.2, "rho_ab": 0.4,
                       "n_rms": 12, "diff": -0.1, "se_meas": float("nan")}])
    assert list(C.power_table(t, 0, 0.05, 0).columns) == C.POWER_COLUMNS
    assert C.power_table(t, 0, 0.05, 0).empty
    assert C.power_table(t[t["family"] == C.EXPLORATORY], 10, 0.05, 0).empty
    want = P.power_rows([{"center": 0.4, "rho_ab": 0.4, "n": 12, "diff": 0.2}], 2, 0.05, 1)
    got = C.power_table(t, 2, 0.05, 1)
    assert len(got) == len(want) == 9 and list(got.columns) == C.POWER_COLUMNS
    for col, v in key.items():
        assert (got[col] == v).all(), col
    assert (got["k"] == 4).all() and str(got["k"].dtype) == "Int64"
    for w, (_, g) in zip(want, got.iterrows()):
        for col, v in w.items():
            assert g[col] == pytest.approx(v, nan_ok=True) if isinstance(v, float) else g[col] == v, col


def test_power_table_passes_each_cell_and_its_settings(table, monkeypatch):
    """What power_table hands verdict.power_rows (recorded by a stand-in): one cell per confirmatory row,
    centred on the mean of its two Spearman values, with its rho_ab, n and difference; n_sims, fdr, seed
    and min_rms as given (one simulation is a simulation); each cell's rows back under its keys."""
    calls = []

    def stand_in(cells, n_sims, fdr, seed, min_rms=None):
        calls.append((cells, n_sims, fdr, seed, min_rms))
        return [{"quantity": q, "gap": 0.1 * j, "n_rms": 10 + j, "power": 0.5, "possible": True, "center": c["center"],
                 "rho_ab": c["rho_ab"], "fdr": fdr, "family_size": len(cells), "target_power": 0.8, "n_sims": n_sims}
                for j, c in enumerate(cells) for q in ("min_gap", "rms_needed")]

    monkeypatch.setattr(P, "power_rows", stand_in)
    conf = table[table["family"] == C.CONFIRMATORY]
    got = C.power_table(table, 1, 0.1, 7, min_rms=5)
    ((cells, n_sims, fdr, seed, min_rms),) = calls
    assert (n_sims, fdr, seed, min_rms) == (1, 0.1, 7, 5)
    assert len(cells) == len(conf) == 4
    for c, (_, r) in zip(cells, conf.iterrows()):
        assert c == {"center": pytest.approx((r["value_a"] + r["value_b"]) / 2), "rho_ab": r["rho_ab"],
                     "n": r["n_rms"], "diff": r["diff"], "var_meas": pytest.approx(r["se_meas"] ** 2)}
    assert len(got) == 8 and got["n_sims"].tolist() == [1] * 8
    for j, (_, r) in enumerate(conf.iterrows()):
        part = got.iloc[2 * j:2 * j + 2]
        assert part["quantity"].tolist() == ["min_gap", "rms_needed"] and (part["n_rms"] == 10 + j).all()
        assert (part["benchmark_b"] == r["benchmark_b"]).all() and (part["downstream"] == r["downstream"]).all()
    C.power_table(table, 3, 0.05, 0)
    assert calls[-1][1:] == (3, 0.05, 0, None)


def test_best_without_one_rm_by_hand():
    """Leave each RM out: the headline benchmark with the highest Spearman (Kendall) on the rest, ties
    joined by '=', '-' where none is defined; RMs without a value everywhere are not left out."""
    rms = [f"m{i}" for i in range(6)]
    y = np.array([1.0, 2, 3, 4, 5, np.nan])
    a = np.array([1.0, 2, 3, 5, 4, 0])      # personalized: one swap at the top
    b = np.array([2.0, 1, 3, 4, 5, 9])      # baseline: one swap at the bottom
    rng = np.random.default_rng(0)
    bench = [_ev({"benchmark": "personalized", "level": "overall", "group": "overall"}, a, rng),
             _ev({"benchmark": "rb", "level": "overall", "group": "overall"}, b, rng)]
    flat = _ev(_dkey("bon", "expected", "judge_score", 2), [0.5, 0.5, 0.5, 0.5, 0.5, 0.5], rng)
    two = _ev(_dkey("bon", "expected", "judge_score", 4), [1.0, 2.0, np.nan, np.nan, np.nan, np.nan], rng)
    three = _ev(_dkey("bon", "expected", "judge_score", 8), [1.0, 2.0, 3.0, np.nan, np.nan, np.nan], rng)
    down = [two, _ev(_dkey("bon", "expected", "judge_score", 1), y, rng), flat, three]
    out = C.best_without_one_rm(rms, bench, down, dict(rankmetrics.COEFFICIENTS))
    assert set(out) == {(C.dkey(d.score.key), c) for d in down[1:] for c in ("spearman", "kendall_tau_b")}
    for name, fn in (("spearman", SCIPY["spearman"]), ("kendall_tau_b", SCIPY["kendall_tau_b"])):
        best = out[(C.dkey(down[1].score.key), name)]
        assert sorted(best) == rms[:5]
        for i in range(5):
            rest = [j for j in range(5) if j != i]
            va, vb = fn(a[rest], y[rest]), fn(b[rest], y[rest])
            want = "personalized=rb" if abs(va - vb) < 1e-12 else ("personalized" if va > vb else "rb")
            assert best[f"m{i}"] == want, (name, i, va, vb)
        assert set(best.values()) >= {"personalized", "rb"}  # the case shows both winners
        assert out[(C.dkey(flat.score.key), name)] == {m: "-" for m in rms}
        # three RMs: a(1,2,3) and b(2,1,3) against y(1,2,3); without m2 only a keeps the order
        assert out[(C.dkey(three.score.key), name)] == {"m0": "personalized=rb", "m1": "personalized=rb",
                                                         "m2": "personalized"}
    # one headline benchmark: nothing to compare
    assert C.best_without_one_rm(rms, bench[:1], down, dict(rankmetrics.COEFFICIENTS)) == {}


def test_family_cells_cache_serves_only_the_same_objects(inputs):
    """A cache of cells (the null worlds' harness) is used only for the very score objects it was
    filled with: a replaced downstream measure under the same key gets its own cell, whatever its id."""
    bench, down = inputs
    cache: dict = {}
    keys, cells = C.family_cells(bench, down, SIGNALS, None, cache)
    assert len(cells) == len(keys) == 4 and len(cache) == 4
    again = C.family_cells(bench, down, SIGNALS, None, cache)[1]
    assert all(x is y for x, y in zip(cells, again))
    new = list(down)
    new[1] = SimpleNamespace(score=down[1].score, point=down[1].point[::-1].copy(), boot=down[1].boot[:, ::-1].copy())
    from types import MappingProxyType

    swapped = C.family_cells(bench, new, SIGNALS, None, MappingProxyType(cache))[1]
    bon = [i for i, k in keys.iterrows() if k["downstream"] == "bon"]
    for i in range(4):
        assert (swapped[i] is cells[i]) == (i not in bon)
    assert len(cache) == 4  # a read-only view is not filled
