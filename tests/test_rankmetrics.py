"""Rank-agreement coefficients: scipy agreement, hand-computed NDCG, RBO reference values."""
import itertools
import math
import warnings

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


# ---- edges: the shapes, NaN / constant rows, messages and boundaries the coefficients promise -------------
FIVE = {"spearman": rk.spearman, "kendall_tau_b": rk.kendall_tau_b, "weighted_tau": rk.weighted_tau,
        "ndcg": rk.ndcg, "rbo": rk.rbo_scores}


def test_average_ranks_match_scipy_rankdata_in_any_batch_shape():
    rng = np.random.default_rng(4)
    a = rng.integers(0, 4, (2, 3, 7)).astype(float)
    np.testing.assert_array_equal(rk.average_ranks(a), stats.rankdata(a, method="average", axis=-1))
    np.testing.assert_array_equal(rk.average_ranks([3, 1, 3, 2]), [3.5, 1.0, 3.5, 2.0])


@pytest.mark.parametrize("name", list(FIVE))
def test_batches_of_any_shape_with_nan_and_constant_rows_equal_one_by_one(name):
    """(..., n) arrays row-wise: a (2, 3, 7) batch whose rows include NaN on either side and constant
    sides equals the rows scored one at a time; those rows are NaN, the others finite."""
    fn = FIVE[name]
    rng = np.random.default_rng(8)
    x = rng.integers(0, 4, (2, 3, 7)).astype(float)
    y = rng.normal(size=(2, 3, 7))
    x[0, 1, 2] = np.nan   # NaN on the x side
    y[1, 0, 5] = np.nan   # NaN on the y side
    x[1, 2] = 2.0         # constant x
    y[0, 2] = -1.0        # constant y
    bad = {(0, 1), (1, 0), (1, 2), (0, 2)}
    batch = fn(x, y)
    assert batch.shape == (2, 3)
    for i, j in itertools.product(range(2), range(3)):
        single = fn(x[i, j], y[i, j])
        assert isinstance(single, float)
        if (i, j) in bad:
            assert np.isnan(batch[i, j]) and np.isnan(single), (i, j)
        else:
            assert batch[i, j] == pytest.approx(single, abs=1e-12) and np.isfinite(single), (i, j)
    if name in ("spearman", "kendall_tau_b", "weighted_tau"):
        ref = {"spearman": stats.spearmanr, "kendall_tau_b": stats.kendalltau, "weighted_tau": stats.weightedtau}
        assert batch[1, 1] == pytest.approx(ref[name](x[1, 1], y[1, 1]).statistic, abs=1e-12)


@pytest.mark.parametrize("name", list(FIVE))
def test_constant_sides_are_nan_without_a_warning(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(FIVE[name]([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
        assert np.isnan(FIVE[name]([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]))


def test_snap_rounds_to_twelve_significant_digits():
    got = rk.snap([1 / 3, 2 / 3, 12345.678901234567, -0.000123456789012345, 0.0, np.inf, np.nan])
    want = [0.333333333333, 0.666666666667, 12345.6789012, -0.000123456789012, 0.0, np.inf, np.nan]
    np.testing.assert_array_equal(got, want)
    assert rk.snap(np.array([3, 1])).dtype == np.float64
    assert rk.spearman([0.1 + 0.2, 0.3, 1.0], [1.0, 2.0, 3.0]) == pytest.approx(stats.spearmanr([1, 1, 2], [1, 2, 3])
                                                                                 .statistic, abs=1e-12)


def test_two_items_and_bad_arguments():
    # two RMs: every coefficient is defined (scipy agrees for the taus)
    assert rk.kendall_tau_b([1.0, 2.0], [3.0, 4.0]) == 1.0 == stats.kendalltau([1, 2], [3, 4]).statistic
    assert rk.spearman([1.0, 2.0], [4.0, 3.0]) == -1.0
    with pytest.raises(ValueError, match=r"differ in shape: \(3,\) vs \(2,\)"):
        rk.spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="^need at least one item per row$"):
        rk.kendall_tau_b(1.0, 2.0)
    with pytest.raises(ValueError, match="persistence"):
        rk.rbo_scores([1, 2, 3], [1, 2, 3], p=0.0)
    with pytest.raises(ValueError, match="^a ranking lists the same item twice$"):
        rk.rbo_ext(["a", "b", "a"], ["a", "b"])
    with pytest.raises(ValueError, match="^RBO of an empty ranking is undefined$"):
        rk.rbo_ext([], ["a"])


def test_ndcg_boundaries():
    # one relevant item: ideal DCG is exactly 1 (gain 1 at the top); ranked last of 3 it earns 1/log2(4)
    assert rk.ndcg([3, 2, 1], [1, 0, 0]) == 1.0
    assert rk.ndcg([1, 2, 3], [1, 0, 0]) == pytest.approx(0.5, abs=1e-15)
    # a perfect order is exactly 1 (the tie-aware DCG sums the discounts differently and rounds to 1 + 2e-16)
    assert rk.ndcg([5, 4, 3, 2, 1], [5, 4, 3, 2, 1]) == 1.0


def test_rbo_ext_short_lists_by_eq_32():
    # Webber et al. eq. 32 with s = 1, l = 2 by hand: S = [a], L = [a, b]: X_1 = X_2 = 1,
    # (1-p)/p (p + p^2/2 + p^2/2) + p^2 = 1; L = [b, a]: X_1 = 0, X_2 = 1: (1-p)/p (p^2/2) + p^2/2 = p/2
    assert rk.rbo_ext(["a"], ["a", "b"], p=0.9) == pytest.approx(1.0, abs=1e-12)
    assert rk.rbo_ext(["a"], ["b", "a"], p=0.9) == pytest.approx(0.45, abs=1e-12)
    assert rk.rbo_ext([1, 2, 3, 4, 5], [2, 3, 4, 1, 5]) == pytest.approx(0.828, abs=1e-12)  # p = 0.9 by default
    # items of any hashable type, tie groups mixing them: only the ranking counts
    mixed = rk.rbo_ext([{1, "b"}, 2.5, "c"], ["c", {2.5, 1}, "b"], p=0.8, ties="a")
    named = rk.rbo_ext([{"i1", "b"}, "i2.5", "c"], ["c", {"i2.5", "i1"}, "b"], p=0.8, ties="a")
    assert mixed == pytest.approx(named, abs=1e-15)


def test_permutation_pvalue_edges():
    x = np.arange(3.0)
    # 3! = 6 = n_perm: exact enumeration; |rho| = 1 for the identity and the reversal
    assert rk.permutation_pvalue(x, x, rk.spearman, n_perm=6, seed=0) == pytest.approx(2 / 6, abs=1e-15)
    # two items: both orders reach |rho| = 1
    assert rk.permutation_pvalue(x[:2], x[:2], rk.spearman, n_perm=10, seed=0) == 1.0
    # one draw (3! > 1): p = (1 + hits) / 2 with every |T*| = |T| here
    const = lambda a, b: 1.0 if np.ndim(b) == 1 else np.ones(len(b))  # noqa: E731
    assert rk.permutation_pvalue(x, x, const, n_perm=1, seed=0) == 1.0
    # the statistic undefined (a constant side): no p
    assert math.isnan(rk.permutation_pvalue(x, np.ones(3), rk.spearman, n_perm=100, seed=0))


def test_ranks_memo_gives_the_same_ranks_and_copies():
    """Inside ranks_memo() an input ranked before (same shape and bytes) comes from the memo: the same
    values as a fresh sort (ties, NaN rows), a copy the caller may change, least recently used
    dropped beyond its byte budget; outside, nothing is kept."""
    rng = np.random.default_rng(3)
    arrays = [np.round(rng.normal(size=(50, 9)), 1), rng.normal(size=(7, 12)), np.array([1.0, np.nan, 2.0])]
    fresh = [rk.average_ranks(a) for a in arrays]
    with rk.ranks_memo(max_bytes=2 * fresh[0].nbytes) as memo:
        for _ in range(3):
            for a, want in zip(arrays, fresh):
                got = rk.average_ranks(a.copy())  # another object, the same bytes
                np.testing.assert_array_equal(got, want)
                got[...] = -1.0  # the caller's copy: the memo keeps its own
        assert memo.misses + memo.hits == 9 and memo.hits >= 3
        assert memo.bytes <= 2 * fresh[0].nbytes
        with rk.ranks_memo() as inner:  # nested: the outer memo
            assert inner is memo
        np.testing.assert_array_equal(rk.average_ranks(arrays[1]), fresh[1])
    assert rk.rankmemo._MEMO is None
    # the correlation stage under the memo equals the stage without it (one coefficient over bootstrap rows)
    x, y = np.round(rng.normal(size=(200, 15)), 1), rng.normal(size=(200, 15))
    plain = [rk.spearman(x, y), rk.kendall_tau_b(x, y), rk.weighted_tau(x, y), rk.ndcg(x, y)]
    plain += [rk.rbo_scores(x, y), rk.rbo_scores(x, y, ties="a")]
    nan_x = x.copy()
    nan_x[3, 4] = np.nan  # a NaN row: the pairwise tie groups
    plain += [rk.weighted_tau(nan_x, y), rk.kendall_tau_b(nan_x, y)]
    with rk.ranks_memo() as memo:
        for _ in range(2):  # the second pass reads every rank, sign matrix and tie group from the memo
            memoed = [rk.spearman(x, y), rk.kendall_tau_b(x, y), rk.weighted_tau(x, y), rk.ndcg(x, y),
                      rk.rbo_scores(x, y), rk.rbo_scores(x, y, ties="a"), rk.weighted_tau(nan_x, y),
                      rk.kendall_tau_b(nan_x, y)]
            for a, b in zip(plain, memoed):
                np.testing.assert_array_equal(a, b)
        assert memo.hits > memo.misses
        kept = rk._tie_blocks(x)[1]
        assert not kept.flags.writeable  # the memo's own arrays: read-only for the callers that share them
    assert rk._tie_blocks(x)[1].flags.writeable  # outside: computed afresh


def _tied_batches(seed: int):
    """Batches with heavy ties, signed zeros, NaN rows and several leading axes."""
    rng = np.random.default_rng(seed)
    for t in range(400):
        n = int(rng.integers(1, 40))
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 4)), n) if t % 3 == 0 else (int(rng.integers(1, 7)), n)
        a = rng.integers(0, int(rng.integers(1, 9)), shape).astype(float) if t % 2 else rng.normal(size=shape)
        if t % 7 == 0:
            a[a == 0] = -0.0
        if t % 11 == 0:
            a[rng.random(shape) < 0.1] = np.nan
        yield a


def _lex_rank_by_pairs(g1, l1, g2, l2):
    """The definition `rankmetrics._lex_positions` computes by sorting, from the comparison matrices
    (the code weighted tau used before): the items above each item by the first key, by the second
    among its equals there, and the later identical ones."""
    rank = g1.sum(-1)
    eq1 = ~(g1 | l1)
    if (eq1.sum(-1) > 1).any():
        later = np.triu(np.ones(eq1.shape[-2:], dtype=bool), k=1)  # later[i, j] = j > i
        rank = rank + (eq1 & g2).sum(-1) + (eq1 & ~(g2 | l2) & later).sum(-1)
    return rank


def test_sorted_tie_blocks_and_lex_positions_equal_their_pairwise_definitions():
    """The sort-based counts equal the n x n comparison matrices' (integers: exactly), in any shape."""
    for a in _tied_batches(0):
        above, size = rk._tie_blocks(a)
        ref_above, ref_size = rk._tie_blocks_by_pairs(a)
        assert np.array_equal(above, ref_above) and np.array_equal(size, ref_size)
        assert above.dtype == ref_above.dtype and size.dtype == ref_size.dtype
        b = np.where(np.isnan(a), 0.0, a)  # _lex_positions' callers pass NaN-free keys
        c = np.random.default_rng(a.size).integers(0, 3, a.shape).astype(float)
        for first, second in ((b, c), (c, b)):
            g1, l1 = rk._compare(first)
            g2, l2 = rk._compare(second)
            assert np.array_equal(rk._lex_positions(first, second), _lex_rank_by_pairs(g1, l1, g2, l2))


def test_sort_ranks_any_sort_order_gives_scipys_average_ranks():
    for a in _tied_batches(1):
        ref = np.apply_along_axis(stats.rankdata, -1, np.nan_to_num(a, nan=0.0))
        ref[np.isnan(a).any(-1)] = np.nan
        assert np.array_equal(rk.sort_ranks(a), ref, equal_nan=True)
