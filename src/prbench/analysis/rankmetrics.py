"""Rank-agreement coefficients between two score vectors over the same items (here: RMs).

Every function takes arrays of shape (..., n) and works row-wise, so one call scores all
bootstrap replicates (rows) at once. A row with a NaN, or where a coefficient is undefined
(for example one side constant), gives NaN for that row.

* `spearman`      Spearman's rho: Pearson correlation of average ranks (as scipy.stats.spearmanr).
* `kendall_tau_b` Kendall's tau-b (as scipy.stats.kendalltau, variant "b").
* `weighted_tau`  scipy.stats.weightedtau with its defaults (hyperbolic weigher 1/(r+1),
                  additive pair weights, rank=True: the mean of the values obtained ranking by
                  (x, y) and by (y, x), decreasing).
* `ndcg`          NDCG of the ranking by `scores` with `relevance` as linear gain, shifted per row
                  to be non-negative (relevance - min(relevance)); tied scores get the mean
                  discount of the positions they share (the expected DCG under random tie-breaking).
* `rbo_scores`    extrapolated rank-biased overlap RBO_ext (Webber, Moffat, Zobel 2010, eq. 32) of
                  the two rankings by decreasing score, with tie-aware variants (see `rbo_ext`).
* `rbo_ext`       the general RBO_ext on explicit rankings (lists whose elements are items or sets
                  of tied items), lists of unequal length and non-conjoint domains allowed.

Exact ties. Before any coefficient is computed, every value is rounded to `TIE_DIGITS` (12)
significant digits (`snap`), so values equal up to floating-point noise (e.g. the same mean summed
in another order) are ties in every coefficient, in the bootstrap and in the permutation test.
`snapped=True` tells a coefficient that its caller has snapped both arrays already (one bootstrap
matrix meets every coefficient and downstream measure: it is rounded once).
When either side is constant across the items, every coefficient is undefined and gives NaN
(NDCG and RBO included: a constant side has no ranking to agree with).

Tie handling in RBO. ``ties="w"`` (default) is Webber et al.'s own treatment (their Sec. 4.3,
called RBO^w by Corsi & Urbano, SIGIR 2024): a tie group occupying ranks t..b is entirely in the
prefix from depth t on, and the agreement at depth d is 2 X_d / (|S_:d| + |L_:d|) where the prefix
sizes count every item in it. It treats a tie as real equality, so RBO(x, x) = 1 with ties. This
is what we use: equal benchmark accuracies or equal downstream means are equal, not unknown.
``ties="a"`` (Corsi & Urbano's RBO^a) is the expectation of RBO when ties are broken uniformly at
random: a tied item contributes the fraction of its group's ranks already seen, and A_d = X_d / d.
Without ties both equal the classical RBO_ext.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from . import rankmemo
from .rankmemo import BytesLRU, ranks_memo  # noqa: F401 (the memo's home; re-exported for callers)

__all__ = [
    "snap",
    "TIE_DIGITS",
    "average_ranks",
    "ranks_memo",
    "spearman",
    "kendall_tau_b",
    "weighted_tau",
    "ndcg",
    "rbo_scores",
    "rbo_ext",
    "permutation_pvalue",
    "COEFFICIENTS",
]


TIE_DIGITS = 12


_POW10_OFFSET = 400
with np.errstate(over="ignore"):
    _POW10 = 10.0 ** np.arange(-_POW10_OFFSET, _POW10_OFFSET + 1, dtype=float)  # 10.0 ** k for k = -400 .. 400


def snap(a, digits: int = TIE_DIGITS) -> np.ndarray:
    """Values rounded to `digits` significant digits (NaN/inf and 0 unchanged): equal up to
    floating-point noise becomes exactly equal."""
    a = np.array(a, dtype=float, copy=True)
    m = np.isfinite(a) & (a != 0)
    if m.all():  # the common case: no masked copy, the powers of 10 from a table (the same values)
        exp = np.floor(np.log10(np.abs(a))).astype(np.int64)
        scale = _POW10[digits - 1 - exp + _POW10_OFFSET]
        return np.round(a * scale) / scale
    if m.any():
        v = a[m]
        exp = np.floor(np.log10(np.abs(v)))
        scale = 10.0 ** (digits - 1 - exp)
        a[m] = np.round(v * scale) / scale
    return a


def _constant_rows(a: np.ndarray) -> np.ndarray:
    return (a == a[..., :1]).all(-1)


def _pair(x, y, snapped: bool = False) -> tuple[np.ndarray, np.ndarray, bool]:
    if snapped:
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    else:
        x, y = snap(x), snap(y)
    if x.shape != y.shape:
        raise ValueError(f"score arrays differ in shape: {x.shape} vs {y.shape}")
    if x.ndim == 0:
        raise ValueError("need at least one item per row")
    squeeze = x.ndim == 1
    if squeeze:
        x, y = x[None], y[None]
    return x, y, squeeze


def _finish(values: np.ndarray, bad: np.ndarray, squeeze: bool):
    values = np.where(bad, np.nan, values)
    return float(values[0]) if squeeze else values


def _bad_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return ~(np.isfinite(x).all(-1) & np.isfinite(y).all(-1))


def average_ranks(a) -> np.ndarray:
    """Ranks 1..n along the last axis, ties get their average rank (scipy's rankdata 'average', NaN
    propagated: a row with a NaN is all NaN). One sort per row: a tie group at sorted positions
    start..end gets (start + end) / 2 + 1. Inside `ranks_memo()`, an input ranked before is not
    sorted again."""
    return rankmemo.memoized("ranks", np.asarray(a, dtype=float), sort_ranks, copy=True)


def _group_bounds(step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) sorted position of each sorted value's group of equals; step: value != previous."""
    n = step.shape[-1] + 1
    pos = np.broadcast_to(np.arange(n), step.shape[:-1] + (n,))
    edge = np.ones(step.shape[:-1] + (1,), dtype=bool)
    start = np.maximum.accumulate(np.where(np.concatenate([edge, step], -1), pos, 0), axis=-1)
    end = np.minimum.accumulate(np.where(np.concatenate([step, edge], -1), pos, n - 1)[..., ::-1], axis=-1)
    return start, end[..., ::-1]


def sort_ranks(a: np.ndarray) -> np.ndarray:
    """`average_ranks` of a float array, always sorted (never from the memo)."""
    n = a.shape[-1] if a.ndim else 0
    if n == 0:
        return a.copy()
    order = np.argsort(a, axis=-1)  # NaN last; any order inside a tie group gives its average rank
    s = np.take_along_axis(a, order, -1)
    step = s[..., 1:] != s[..., :-1]
    if step.all():  # no ties (a simulation's continuous draws)
        r = np.broadcast_to(np.arange(n), a.shape) + 1.0
    else:
        start, end = _group_bounds(step)
        r = (start + end) / 2.0 + 1.0
    ranks = np.empty(a.shape)
    np.put_along_axis(ranks, order, r, -1)
    nan = np.isnan(s[..., -1])
    if nan.any():
        ranks[nan] = np.nan
    return ranks


def spearman(x, y, snapped: bool = False):
    """Spearman's rho per row (Pearson correlation of average ranks)."""
    x, y, squeeze = _pair(x, y, snapped)
    rx = average_ranks(x)
    ry = average_ranks(y)
    rx = rx - rx.mean(-1, keepdims=True)
    ry = ry - ry.mean(-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(-1) * (ry * ry).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(-1) / den
    rho = np.clip(rho, -1.0, 1.0)
    return _finish(rho, _bad_rows(x, y) | (den == 0), squeeze)


def _compare(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gt, lt): gt[..., i, j] = a_j > a_i, lt[..., i, j] = a_j < a_i (boolean (..., n, n))."""
    return a[..., None, :] > a[..., :, None], a[..., None, :] < a[..., :, None]


def _signs(gt: np.ndarray, lt: np.ndarray) -> np.ndarray:
    """sign(a_j - a_i) as int8 (..., n, n): symmetric in sign, 0 on the diagonal and for ties."""
    return gt.view(np.int8) - lt.view(np.int8)


def _sign_matrix(a: np.ndarray) -> np.ndarray:
    """`_signs` of `_compare(a)`, through the rank memo (read-only)."""
    return rankmemo.memoized("signs", a, lambda v: _signs(*_compare(v)))


def kendall_tau_b(x, y, snapped: bool = False):
    """Kendall's tau-b per row: (C - D) / sqrt((n0 - n1)(n0 - n2)).

    Over the full sign matrices: each pair is counted twice in the sums, once in each half."""
    x, y, squeeze = _pair(x, y, snapped)
    sx, sy = _sign_matrix(x), _sign_matrix(y)
    num = (sx * sy).sum((-2, -1), dtype=np.int64)
    nx = np.count_nonzero(sx, axis=(-2, -1)).astype(np.int64)
    ny = np.count_nonzero(sy, axis=(-2, -1)).astype(np.int64)
    den = np.sqrt(nx.astype(float) * ny)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = num / den
    tau = np.clip(tau, -1.0, 1.0)
    return _finish(tau, _bad_rows(x, y) | (den == 0), squeeze)


def _lex_positions(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Each item's 0-based position in the order by decreasing first key, then decreasing second,
    then decreasing index (NaN-free (..., n) keys; numpy's stable lexsort, reversed)."""
    n = first.shape[-1]
    index = np.broadcast_to(-np.arange(n), first.shape)
    order = np.lexsort((index, -second, -first), axis=-1)
    rank = np.empty(first.shape, dtype=np.int64)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(n), first.shape), -1)
    return rank


def weighted_tau(x, y, snapped: bool = False):
    """scipy.stats.weightedtau(x, y) (hyperbolic weigher, additive, rank=True), per row.

    A pair (i, j) weighs w_i + w_j, w = 1 / (rank + 1) with the rank by decreasing lexicographic order
    on (x, y) (then on (y, x): the mean of the two). Sums over pairs of (w_i + w_j) a_ij with a
    symmetric and 0 on the diagonal are sums over items of w_i (sum_j a_ij)."""
    x, y, squeeze = _pair(x, y, snapped)
    bad = _bad_rows(x, y)
    xs = np.where(bad[..., None], 0.0, x)
    ys = np.where(bad[..., None], 0.0, y)
    agree = (_sign_matrix(xs) * _sign_matrix(ys)).sum(-1, dtype=np.int64)  # per item: concordant - discordant
    n = x.shape[-1]
    ne_x = n - _tie_blocks(xs)[1]  # per item: the items unequal to it
    ne_y = n - _tie_blocks(ys)[1]
    taus, zero = [], bad
    for rank in (_lex_positions(xs, ys), _lex_positions(ys, xs)):
        w = 1.0 / (rank + 1.0)
        den = np.sqrt((w * ne_x).sum(-1) * (w * ne_y).sum(-1))
        with np.errstate(invalid="ignore", divide="ignore"):
            taus.append(np.clip((w * agree).sum(-1) / den, -1.0, 1.0))
        zero = zero | (den == 0)
    return _finish((taus[0] + taus[1]) / 2.0, zero, squeeze)


def _tie_blocks_by_pairs(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_tie_blocks` from the (..., n, n) comparison matrices: the definition (any NaN handling)."""
    gt, lt = _compare(a)
    above = gt.sum(-1)
    return above, a.shape[-1] - above - lt.sum(-1)


def _tie_blocks(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item: items strictly above it (0-based top rank), its tie-group size (read-only arrays,
    through the rank memo)."""
    return rankmemo.memoized("ties", a, _sorted_tie_blocks)


def _sorted_tie_blocks(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_tie_blocks` by one sort per row (the order inside a group of equal values is never read:
    only where each group starts and ends)."""
    n = a.shape[-1]
    if n == 0 or np.isnan(a).any():  # NaN compares unequal to all: the pairwise definition
        return _tie_blocks_by_pairs(a)
    order = np.argsort(a, axis=-1)
    s = np.take_along_axis(a, order, -1)
    start, end = _group_bounds(s[..., 1:] != s[..., :-1])
    above, size = np.empty(a.shape, dtype=np.int64), np.empty(a.shape, dtype=np.int64)
    np.put_along_axis(above, order, n - 1 - end, -1)
    np.put_along_axis(size, order, end - start + 1, -1)
    return above, size


def ndcg(scores, relevance, snapped: bool = False):
    """NDCG@n of the ranking by decreasing `scores`, gain = relevance - min(relevance) per row.

    Linear gain, discount 1/log2(position + 1). Items with tied scores receive the mean discount
    of the positions their tie group occupies. NaN when every shifted relevance is 0 or the scores
    are constant.
    """
    x, rel, squeeze = _pair(scores, relevance, snapped)
    bad = _bad_rows(x, rel)
    x = np.where(bad[..., None], 0.0, x)
    rel = np.where(bad[..., None], 0.0, rel)
    n = x.shape[-1]
    gain = rel - rel.min(-1, keepdims=True)
    disc = 1.0 / np.log2(np.arange(2, n + 2))
    cum = np.concatenate([[0.0], np.cumsum(disc)])
    above, size = _tie_blocks(x)
    item_disc = (cum[above + size] - cum[above]) / size
    dcg = (gain * item_disc).sum(-1)
    ideal = (-np.sort(-gain, axis=-1) * disc).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        val = np.clip(dcg / ideal, 0.0, 1.0)  # <= 1 exactly; clip rounding error
    return _finish(val, bad | (ideal <= 0) | _constant_rows(x), squeeze)


def _count_up_to(top: np.ndarray, n: int) -> np.ndarray:
    """c[..., e] = #{items with top <= e}, e = 0 .. n - 1 (top: integers in 0 .. n - 1): one bincount."""
    rows = top.reshape(-1, n)
    flat = (rows + n * np.arange(len(rows))[:, None]).ravel()
    return np.bincount(flat, minlength=rows.size).reshape(top.shape[:-1] + (n,)).cumsum(-1)


def _contributions(a: np.ndarray) -> np.ndarray:
    """RBO^a: c[..., item, depth_index], how much of the item is in the prefix of depth (index + 1)
    when its tie group is broken at random (the fraction of the group's ranks already seen)."""
    n = a.shape[-1]
    top, size = _tie_blocks(a)
    bottom = top + size - 1
    e = np.arange(n)  # depth - 1
    t = top[..., None]
    b = bottom[..., None]
    frac = (e - t + 1) / (b - t + 1.0)
    return np.where(e >= b, 1.0, np.where(e >= t, frac, 0.0))


def rbo_scores(x, y, p: float = 0.9, ties: str = "w", snapped: bool = False):
    """RBO_ext of the rankings of the same n items by decreasing x and by decreasing y, per row.

    With both rankings complete over the same items, eq. 32 of Webber et al. reduces to
    RBO_ext = (1-p)/p * sum_{d=1..n} A_d p^d + p^n (since X_n / n = 1).
    """
    _check_rbo_args(p, ties)
    x, y, squeeze = _pair(x, y, snapped)
    bad = _bad_rows(x, y)
    x = np.where(bad[..., None], 0.0, x)
    y = np.where(bad[..., None], 0.0, y)
    n = x.shape[-1]
    depth = np.arange(1, n + 1)
    if ties == "w":  # an item is in every prefix from its tie group's top rank on
        tx, ty = _tie_blocks(x)[0], _tie_blocks(y)[0]
        overlap = _count_up_to(np.maximum(tx, ty), n)  # (..., depth): items in both prefixes
        agree = 2.0 * overlap / (_count_up_to(tx, n) + _count_up_to(ty, n))
    else:
        cx = _contributions(x)
        cy = _contributions(y)
        agree = (cx * cy).sum(-2) / depth
    val = np.clip((1.0 - p) / p * (agree * p**depth).sum(-1) + p**n, 0.0, 1.0)
    return _finish(val, bad | _constant_rows(x) | _constant_rows(y), squeeze)


def _check_rbo_args(p: float, ties: str) -> None:
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p}")
    if ties not in ("w", "a"):
        raise ValueError(f"RBO ties must be 'w' (Webber et al.) or 'a' (random tie-breaking), got {ties!r}")


def _flatten(ranking) -> tuple[list, list[int], list[int]]:
    """Items in order, with each item's top and bottom 0-based rank (equal unless tied)."""
    items, top, bottom = [], [], []
    r = 0
    for group in ranking:
        members = sorted(group, key=str) if isinstance(group, (set, frozenset)) else [group]
        for m in members:
            items.append(m)
            top.append(r)
            bottom.append(r + len(members) - 1)
        r += len(members)
    if len(set(items)) != len(items):
        raise ValueError("a ranking lists the same item twice")
    return items, top, bottom


def rbo_ext(x, y, p: float = 0.9, ties: str = "w") -> float:
    """Extrapolated RBO between two rankings (Webber, Moffat, Zobel 2010, eq. 32, tie-aware).

    `x`, `y`: sequences whose elements are items or sets of tied items, e.g.
    ``["a", {"b", "c"}, "d"]``. Lists may differ in length and in their items. For the part
    beyond the shorter list (length s) the agreement at depth s is extrapolated, as in eq. 32.
    """
    _check_rbo_args(p, ties)
    fx, fy = _flatten(x), _flatten(y)
    short, long_ = (fx, fy) if len(fx[0]) <= len(fy[0]) else (fy, fx)
    s, n_long = len(short[0]), len(long_[0])
    if s == 0:
        raise ValueError("RBO of an empty ranking is undefined")
    universe = list(dict.fromkeys(short[0] + long_[0]))
    index = {item: i for i, item in enumerate(universe)}

    def contrib(flat):
        c = np.zeros((len(universe), n_long))
        e = np.arange(n_long)
        for item, t, b in zip(*flat):
            if ties == "w":
                c[index[item]] = e >= t
            else:
                c[index[item]] = np.where(e >= b, 1.0, np.where(e >= t, (e - t + 1) / (b - t + 1.0), 0.0))
        return c

    cs, cl = contrib(short), contrib(long_)
    overlap = (cs * cl).sum(0)  # seen overlap X_d, d = 1..n_long
    depth = np.arange(1, n_long + 1)
    agree = np.empty(n_long)
    first = slice(0, s)
    if ties == "w":
        agree[first] = 2 * overlap[first] / (cs[:, first].sum(0) + cl[:, first].sum(0))
    else:
        agree[first] = overlap[first] / depth[first]
    a_s = agree[s - 1]
    if n_long > s:
        # depths s+1..n_long: the shorter list is unseen there; assume its new items overlap the longer
        # list's new items at the rate A_s, weighted by how much of each new item is in the prefix
        short_items = set(short[0])
        new_rows = [index[it] for it in long_[0] if it not in short_items]
        rest = np.arange(s, n_long)
        new_c = cl[new_rows][:, rest]
        with np.errstate(invalid="ignore"):
            mean_new = np.where((new_c > 0).any(0), new_c.sum(0) / np.maximum((new_c > 0).sum(0), 1), 0.0)
        x_ext = overlap[rest] + (rest - s + 1) * a_s * mean_new
        if ties == "w":
            agree[rest] = 2 * x_ext / (depth[rest] + cl[:, rest].sum(0))
        else:
            agree[rest] = x_ext / depth[rest]
    tail = (overlap[n_long - 1] + (n_long - s) * a_s) / n_long * p ** (n_long + 1) / (1 - p)
    return float((1 - p) / p * ((agree * p**depth).sum() + tail))


COEFFICIENTS = {
    "spearman": spearman,
    "kendall_tau_b": kendall_tau_b,
    "weighted_tau": weighted_tau,
    "ndcg": ndcg,
    "rbo": rbo_scores,
}


def permutation_pvalue(x, y, stat, n_perm: int, seed: int) -> float:
    """Two-sided permutation p-value of stat(x, y) under shuffling y across items.

    When n! <= n_perm every permutation is enumerated (exact p-value, identity included);
    otherwise n_perm random permutations are drawn and p = (1 + #{|T*| >= |T|}) / (n_perm + 1).
    """
    x = snap(x)
    y = snap(y)
    n = len(x)
    observed = stat(x, y)
    if n_perm <= 0 or not np.isfinite(observed) or n < 2:
        return float("nan")
    if math.factorial(n) <= n_perm:
        perms = np.array(list(itertools.permutations(range(n))))
        exact = True
    else:
        rng = np.random.default_rng(seed)
        perms = rng.permuted(np.broadcast_to(np.arange(n), (n_perm, n)).copy(), axis=1)
        exact = False
    values = stat(np.broadcast_to(x, perms.shape), y[perms])
    hits = int((np.abs(values) >= abs(observed) - 1e-12).sum())
    return hits / len(perms) if exact else (hits + 1) / (len(perms) + 1)
