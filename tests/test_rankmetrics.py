"""Rank-agreement coefficients: scipy agreement, hand-computed NDCG, RBO reference values."""
import math

import numpy as np
import pytest
from scipy import stats

from prbench.analysis import rankmetrics as rk


def _random_pairs(n_cases=300, seed=0):
    rng = np.random.default_rng(seed)
    for i in range(n_cases):
        n = int(rng.integers(3, 10))
        if i % 3 == 0:  # heavy ties on both sides
            x = rng.integers(0, 3, n).astype(float)
            y = rng.integers(0, 3, n).astype(float)
        elif i % 3 == 1:  # ties on one side
            x = rng.normal(size=n)
            y = rng.integers(0, 4, n).astype(float)
        else:
            x = rng.normal(size=n)
            y = x + rng.normal(scale=0.7, size=n)
        yield x, y


@pytest.mark.parametrize(
    "ours, ref",
    [
        (rk.spearman, lambda x, y: stats.spearmanr(x, y).statistic),
        (rk.kendall_tau_b, lambda x, y: stats.kendalltau(x, y).statistic),
        (rk.weighted_tau, lambda x, y: stats.weightedtau(x, y).statistic),
    ],
    ids=["spearman", "kendall_tau_b", "weighted_tau"],
)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore:An input array is constant")
def test_matches_scipy_including_ties(ours, ref):
    checked = 0
    for x, y in _random_pairs():
        expected = ref(x, y)
        got = ours(x, y)
        if np.isnan(expected):
            assert np.isnan(got)
        else:
            assert got == pytest.approx(expected, abs=1e-12)
            checked += 1
    assert checked > 200


def test_rowwise_batch_equals_one_by_one():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 4, (50, 7)).astype(float)
    y = rng.normal(size=(50, 7))
    for fn in (rk.spearman, rk.kendall_tau_b, rk.weighted_tau, rk.ndcg, rk.rbo_scores):
        batch = fn(x, y)
        single = np.array([fn(a, b) for a, b in zip(x, y)])
        np.testing.assert_allclose(batch, single, equal_nan=True)


def test_constant_or_nan_rows_are_nan():
    assert np.isnan(rk.spearman([1, 1, 1], [1, 2, 3]))
    assert np.isnan(rk.kendall_tau_b([1, 2, 3], [2, 2, 2]))
    assert np.isnan(rk.weighted_tau([1, 2, 3], [2, 2, 2]))
    out = rk.spearman(np.array([[1, 2, np.nan], [1, 2, 3]]), np.array([[1, 2, 3], [3, 2, 1]]))
    assert np.isnan(out[0]) and out[1] == pytest.approx(-1.0)


def test_ndcg_hand_computed():
    # RMs A, B, C ranked by benchmark score 3 > 2 > 1; downstream 1, 3, 2 -> gains (shift by min=1) 0, 2, 1.
    # DCG  = 0/log2(2) + 2/log2(3) + 1/log2(4) = 1.261860 + 0.5 = 1.761860
    # IDCG = 2/log2(2) + 1/log2(3) + 0/log2(4) = 2 + 0.630930 = 2.630930
    assert rk.ndcg([3, 2, 1], [1, 3, 2]) == pytest.approx(1.761860 / 2.630930, abs=1e-6)
    # A and B tied on the benchmark: both get the mean discount of positions 1 and 2,
    # (1 + 0.630930) / 2 = 0.815465; DCG = 0 * 0.815465 + 2 * 0.815465 + 1 * 0.5 = 2.130930
    assert rk.ndcg([5, 5, 1], [1, 3, 2]) == pytest.approx(2.130930 / 2.630930, abs=1e-6)
    # perfect order gives 1; shifting or scaling relevance by a positive factor does not matter
    assert rk.ndcg([3, 2, 1], [0.9, 0.5, 0.1]) == pytest.approx(1.0)
    assert rk.ndcg([3, 2, 1], [10, 30, 20]) == pytest.approx(rk.ndcg([3, 2, 1], [1, 3, 2]))
    # every relevance equal: no gain anywhere -> undefined
    assert np.isnan(rk.ndcg([3, 2, 1], [1, 1, 1]))


def test_rbo_no_ties_hand_computed():
    # A_d for [1..5] vs [2,3,4,1,5]: 0, 1/2, 2/3, 1, 1; p = 0.9 (eq. 32 with s = l = 5):
    # RBO_ext = 0.1/0.9 * (0.5*0.9^2 + 2/3*0.9^3 + 0.9^4 + 0.9^5) + 0.9^5 = 0.828
    # (also the example of b4ny4n/rankmeasures' README: RBO.eval(List(1,2,3,4,5), List(2,3,4,1,5), 0.9) = 0.828)
    assert rk.rbo_ext([1, 2, 3, 4, 5], [2, 3, 4, 1, 5], p=0.9) == pytest.approx(0.828, abs=1e-12)
    assert rk.rbo_ext(list("abcde"), list("abcde"), p=0.9) == pytest.approx(1.0)
    assert rk.rbo_ext(list("abc"), list("xyz"), p=0.9) == pytest.approx(0.0)
    # scores: item i has score -rank -> same rankings through the score interface
    assert rk.rbo_scores([5, 4, 3, 2, 1], [2, 5, 4, 3, 1], p=0.9) == pytest.approx(0.828, abs=1e-12)


def _parse(s: str):
    """'a (b c) d' -> ['a', {'b', 'c'}, 'd'] (the notation of Corsi & Urbano's reference file)."""
    out, group = [], None
    for tok in s.split():
        if tok.startswith("("):
            group = {tok[1:]}
        elif group is not None:
            group.add(tok.rstrip(")"))
            if tok.endswith(")"):
                out.append(group)
                group = None
        else:
            out.append(tok)
    return out


# Reference values from julian-urbano/sigir2024-rbo, rbo/test.csv (Corsi & Urbano, SIGIR 2024): x, y, p,
# RBO_ext with Webber et al.'s tie treatment (w) and with random tie-breaking (a). Rows with ties on both
# sides, uneven lengths and partly disjoint domains.
RBO_REFERENCE = [
    ("(i5 i9 i13 i15 i16 i19 i20) (i3 i8)", "i6 (i4 i18) i2 i7 i8 i17 i14 (i11 i12) i1",
     0.958074765324023, 0.0816485573277354, 0.0808189832771587),
    ("i13 (i1 i4 i5 i6)", "i3 i14 i11 (i10 i15) i12 (i6 i9) i4 i2",
     0.92238320668128, 0.117578490431637, 0.114619469221414),
    ("(i3 i6) (i2 i7) i10", "(i3 i6 i7 i10) (i1 i2)", 0.965413635276732, 0.946064537517568, 0.92051534467649),
    ("(i3 i5 i6 i8 i9)", "(i1 i6) (i8 i10) i11 i2 (i3 i4)", 0.946588158477176, 0.481477824833812,
     0.456505385192971),
    ("i2 i5 i3 (i1 i4)", "i5 i8 i2 (i3 i9)", 0.968922741966306, 0.580287544332462, 0.580994268838527),
    ("(i1 i3 i6 i11 i15) i17 (i5 i8)", "(i1 i2 i3 i4 i5 i6 i7 i8 i9 i10 i11 i12)", 0.966485585840186,
     0.647993254615828, 0.56593642947334),
    ("i4 (i2 i14) i7 i5 i3", "(i9 i13) (i6 i8) i1 i5 i10 i15 i11", 0.986650551181127, 0.155835200392091,
     0.155835200392091),
]


@pytest.mark.parametrize("x, y, p, w_ext, a_ext", RBO_REFERENCE)
def test_rbo_ext_reference_values_with_ties(x, y, p, w_ext, a_ext):
    assert rk.rbo_ext(_parse(x), _parse(y), p=p, ties="w") == pytest.approx(w_ext, abs=1e-9)
    assert rk.rbo_ext(_parse(x), _parse(y), p=p, ties="a") == pytest.approx(a_ext, abs=1e-9)
    # symmetric in its arguments
    assert rk.rbo_ext(_parse(y), _parse(x), p=p, ties="w") == pytest.approx(w_ext, abs=1e-9)


def _ranking_from_scores(items, scores):
    groups = {}
    for it, s in zip(items, scores):
        groups.setdefault(s, set()).add(it)
    return [g if len(g) > 1 else next(iter(g)) for _, g in sorted(groups.items(), key=lambda kv: -kv[0])]


@pytest.mark.parametrize("ties", ["w", "a"])
def test_rbo_scores_equal_general_rbo_on_tied_scores(ties):
    rng = np.random.default_rng(3)
    items = [f"rm{i}" for i in range(7)]
    for _ in range(100):
        x = rng.integers(0, 4, 7).astype(float)
        y = rng.integers(0, 5, 7).astype(float)
        expected = rk.rbo_ext(_ranking_from_scores(items, x), _ranking_from_scores(items, y), p=0.9, ties=ties)
        assert rk.rbo_scores(x, y, p=0.9, ties=ties) == pytest.approx(expected, abs=1e-12)


def test_rbo_tie_variants_differ_as_documented():
    x = [2.0, 2.0, 1.0, 0.0]
    # identical rankings with a tie: Webber's treatment gives 1, random tie-breaking less than 1
    assert rk.rbo_scores(x, x, p=0.9, ties="w") == pytest.approx(1.0)
    assert rk.rbo_scores(x, x, p=0.9, ties="a") < 1.0
    with pytest.raises(ValueError, match="persistence"):
        rk.rbo_scores(x, x, p=1.0)
    with pytest.raises(ValueError, match="ties"):
        rk.rbo_scores(x, x, ties="z")


def test_permutation_pvalue_exact_and_seeded():
    x = np.arange(4.0)
    # rho = 1: only the identity and the reversal reach |rho| = 1 among the 4! = 24 permutations
    assert rk.permutation_pvalue(x, x, rk.spearman, n_perm=1000, seed=0) == pytest.approx(2 / 24)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=9), rng.normal(size=9)
    p1 = rk.permutation_pvalue(a, b, rk.kendall_tau_b, n_perm=500, seed=7)
    p2 = rk.permutation_pvalue(a, b, rk.kendall_tau_b, n_perm=500, seed=7)
    assert p1 == p2
    # Monte-Carlo branch (9! > 500): p = (1 + hits) / (n_perm + 1), hits recounted with scipy over the
    # permutations the function drew (recorded by a wrapper around the statistic)
    drawn = []

    def spy(x, y):
        if np.ndim(y) == 2:
            drawn.append(np.array(y))
        return rk.kendall_tau_b(x, y)

    assert rk.permutation_pvalue(a, b, spy, n_perm=500, seed=7) == p1
    (perms,) = drawn
    assert perms.shape == (500, 9)
    assert all(np.array_equal(np.sort(row), np.sort(rk.snap(b))) for row in perms)  # shuffles of y
    tau = abs(stats.kendalltau(a, b).statistic)
    hits = sum(abs(stats.kendalltau(a, row).statistic) >= tau - 1e-12 for row in perms)
    assert 0 < hits < 500
    assert p1 == pytest.approx((1 + hits) / 501, abs=1e-15)
    # no permutation reaches the observed value: p = 1 / (n_perm + 1), never 0
    assert rk.permutation_pvalue(a, b, lambda x, y: 1.0 if np.ndim(y) == 1 else np.zeros(len(y)),
                                 n_perm=500, seed=7) == pytest.approx(1 / 501)
    assert math.isnan(rk.permutation_pvalue(x, x, rk.spearman, n_perm=0, seed=0))
