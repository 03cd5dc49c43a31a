"""The correlation stage's per-RM scores as per-unit sums, and their bootstrap evaluation.

A unit is one question (personalized benchmark and downstream measures share their units; each
baseline has its own). Every per-RM score is a weighted mean of per-unit sums, so a bootstrap draw is
one weight vector over units (`Units.weights`: multinomial counts within each subset) and all draws
are evaluated with one matrix product (`Score.evaluate`). A downstream measure whose runs have
several replicates (BoN sample sets, PPO / GRPO training seeds) is a `ReplicatedScore`: each draw
also resamples the run's replicates (R of R, with replacement; once for all RMs when the method's
replicates are shared, `prbench.downstream.Method.shared_replicates`, else per RM) and averages the
drawn replicates' question means. Used by `prbench.analysis.correlation`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .. import downstream
from ..seeding import stable_seed
from . import rankmetrics

# ---- units and scores ----------------------------------------------------------------------------


class Units:
    """The resampling units (question ids) of one stratum, each with its subset."""

    def __init__(self, name: str):
        self.name = name
        self.index: dict[str, int] = {}
        self.subset: list[str] = []

    def add(self, qid: str, subset: str) -> int:
        i = self.index.get(qid)
        if i is None:
            i = self.index[qid] = len(self.subset)
            self.subset.append(subset)
        return i

    def __len__(self) -> int:
        return len(self.subset)

    def weights(self, n_boot: int, seed: int) -> np.ndarray:
        """(n_boot, n_units) multinomial counts, resampling within each subset (stratified)."""
        rng = np.random.default_rng(stable_seed(seed, "correlation-bootstrap", self.name))
        w = np.zeros((n_boot, len(self)), dtype=float)
        subsets = np.asarray(self.subset)
        for s in sorted(set(self.subset)):
            idx = np.flatnonzero(subsets == s)
            w[:, idx] = rng.multinomial(len(idx), np.full(len(idx), 1.0 / len(idx)), size=n_boot)
        return w


@dataclass
class Score:
    """One per-RM quantity: value[r] = sum_u w_u num[r, u] / sum_u w_u den[r, u]."""

    key: dict
    stratum: str
    num: np.ndarray
    den: np.ndarray
    n_rep: np.ndarray | None = None  # (R,) replicates per RM of a downstream measure; None for a benchmark

    def evaluate(self, weights: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (weights @ self.num.T) / (weights @ self.den.T)


@dataclass
class ReplicatedScore(Score):
    """A downstream measure whose runs have several replicates (sample sets, training seeds).

    rep_num/rep_den (J, R, U): the per-unit sums of each replicate j; has (J, R): RM r has replicate j
    with at least one finite value (a replicate whose values are all NaN is neither averaged nor
    drawn). A replicate's value is its question mean (`Score.evaluate` on its sums); the RM's
    measure is the mean over its replicates of those values (in a draw, a drawn replicate without a
    value on the drawn questions is left out). `evaluate_drawn` takes the replicate counts of each bootstrap draw.
    shared: the replicates are shared by every RM (BoN's sample sets: replicate j of every RM ranks
    the same samples), so a draw resamples the replicate indices once for all RMs; otherwise each
    RM's replicates are independent runs (training seeds) and are resampled per RM. num/den (the
    pooled sums) are unused."""

    rep_num: np.ndarray | None = None
    rep_den: np.ndarray | None = None
    has: np.ndarray | None = None
    shared: bool = False

    def per_replicate(self, weights: np.ndarray) -> np.ndarray:
        """(J, B, R): each replicate's question mean under each weight vector."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.stack([(weights @ n.T) / (weights @ d.T) for n, d in zip(self.rep_num, self.rep_den)])

    def evaluate_drawn(self, weights: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """(B, R): the mean over drawn replicates (counts (B, R, J): how often each is drawn) of
        their question means; NaN where no drawn replicate has a value."""
        return mean_over_replicates(self.per_replicate(weights), counts)

    def evaluate(self, weights: np.ndarray) -> np.ndarray:
        """Every present replicate once (the point estimate)."""
        counts = np.broadcast_to(self.has.T[None].astype(float), (len(weights), *self.has.T.shape))
        return self.evaluate_drawn(weights, counts)

    def draws(self, n_boot: int, seed: int, rms: Sequence[str]) -> np.ndarray:
        """(n_boot, R, J) replicate counts: R of R drawn with replacement, once for all RMs
        (shared) or per RM (independent); seeded by (method, policy[, RM]), so every measure of a run
        sees the same draws."""
        n_rep, n_rms = self.has.shape
        counts = np.zeros((n_boot, n_rms, n_rep))
        base = ("correlation-replicates", self.key["downstream"], self.key["policy"])
        if self.shared:
            ids = np.flatnonzero(self.has.any(1))
            rng = np.random.default_rng(stable_seed(seed, *base))
            c = rng.multinomial(len(ids), np.full(len(ids), 1.0 / len(ids)), size=n_boot)
            counts[:, :, ids] = c[:, None, :]
            return counts * self.has.T[None]
        for r in range(n_rms):
            ids = np.flatnonzero(self.has[:, r])
            if len(ids):
                rng = np.random.default_rng(stable_seed(seed, *base, rms[r]))
                counts[:, r, ids] = rng.multinomial(len(ids), np.full(len(ids), 1.0 / len(ids)), size=n_boot)
        return counts


def mean_over_replicates(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """values (J, B, R), counts (B, R, J) -> (B, R): sum_j c_j v_j / sum_j c_j over finite v_j."""
    v = np.moveaxis(values, 0, -1)
    ok = np.isfinite(v) & (counts > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, v * counts, 0.0).sum(-1) / np.where(ok, counts, 0.0).sum(-1)


@dataclass
class OfficialScore(Score):
    """A baseline's official score: value[r] = sum_c coef_c * (w @ num_c[r]) / (w @ den_c[r])
    (`prbench.scoring.official`); num/den are unused (zeros), the components live in `parts`."""

    parts: list = field(default_factory=list)  # [(coef, num (R, U), den (R, U))]

    def evaluate(self, weights: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return sum(coef * (weights @ num.T) / (weights @ den.T) for coef, num, den in self.parts)


def _add(store: dict, key: dict, stratum: str, r: int, u: int, num: float, den: float = 1.0, rep: int = 0) -> None:
    """Accumulate one observation of RM r on unit u (replicate rep) under the score identified by key."""
    entry = store.setdefault(tuple(key.items()), (stratum, {}))
    entry[1].setdefault(r, []).append((u, num, den, rep))


def _sums(entries, n: int) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(entries, dtype=float)
    u = arr[:, 0].astype(int)
    num, den = np.zeros(n), np.zeros(n)
    np.add.at(num, u, arr[:, 1])
    np.add.at(den, u, arr[:, 2])
    return num, den


def _materialise(store: dict, rms: list[str], units: dict[str, Units], replicates: dict | None = None) -> list[Score]:
    """The scores of a store. replicates: {(method, policy): {RM index: [replicate ids]}} of the
    downstream measures; a measure with an RM of several replicates is a `ReplicatedScore`."""
    out = []
    for key, (stratum, per_rm) in store.items():
        n = len(units[stratum])
        kd = dict(key)
        present = (replicates or {}).get((kd.get("downstream"), kd.get("policy")), {})
        if any(len(v) > 1 for v in present.values()):
            out.append(_replicated(kd, stratum, per_rm, present, len(rms), n))
            continue
        num = np.zeros((len(rms), n))
        den = np.zeros((len(rms), n))
        for r, entries in per_rm.items():
            num[r], den[r] = _sums(entries, n)
        out.append(Score(kd, stratum, num, den, n_rep=_n_rep(present, len(rms)) if present else None))
    return out


def _n_rep(present: dict, n_rms: int) -> np.ndarray:
    out = np.zeros(n_rms, dtype=int)
    for r, reps in present.items():
        out[r] = len(reps)
    return out


def _replicated(key: dict, stratum: str, per_rm: dict, present: dict, n_rms: int, n: int) -> "ReplicatedScore":
    ids = sorted({x for reps in present.values() for x in reps})
    j_of = {x: j for j, x in enumerate(ids)}
    num = np.zeros((len(ids), n_rms, n))
    den = np.zeros((len(ids), n_rms, n))
    has = np.zeros((len(ids), n_rms), dtype=bool)
    for r, reps in present.items():
        has[[j_of[x] for x in reps], r] = True
    for r, entries in per_rm.items():
        by_rep: dict[int, list] = {}
        for e in entries:
            by_rep.setdefault(int(e[3]), []).append(e)
        for x, es in by_rep.items():
            num[j_of[x], r], den[j_of[x], r] = _sums(es, n)
    has &= den.sum(-1) > 0  # a replicate without any finite value has no mean: not drawn, not averaged
    method = key["downstream"]
    shared = bool(downstream.REGISTRY[method].shared_replicates) if method in downstream.REGISTRY else False
    return ReplicatedScore(key, stratum, num.sum(0), den.sum(0), n_rep=has.sum(0), rep_num=num, rep_den=den,
                           has=has, shared=shared)


@dataclass
class Evaluated:
    score: Score
    point: np.ndarray  # (R,)
    boot: np.ndarray  # (B, R)
    replicate_sd: np.ndarray | None = None  # (R,) SD across the RM's replicate values (NaN with < 2)


def evaluate_scores(col, n_boot: int, seed: int) -> tuple[list[Evaluated], list[Evaluated]]:
    """Point values and bootstrap replicates of every score. A draw resamples the questions (one
    weight vector per stratum, shared by every score) and, for a downstream measure with several
    replicates, that run's replicates (`ReplicatedScore.draws`) before averaging them."""
    weights = {name: u.weights(n_boot, seed) for name, u in col.units.items()}
    ones = {name: np.ones((1, len(u))) for name, u in col.units.items()}

    def ev(s: Score) -> Evaluated:
        # values equal up to floating-point noise are exact ties (rankmetrics.snap)
        if isinstance(s, ReplicatedScore):
            reps = s.per_replicate(ones[s.stratum])[:, 0, :]  # (J, R)
            boot = s.evaluate_drawn(weights[s.stratum], s.draws(n_boot, seed, col.rms))
            return Evaluated(s, rankmetrics.snap(s.evaluate(ones[s.stratum])[0]), rankmetrics.snap(boot),
                             replicate_sd(reps, s.has))
        sd = None if s.n_rep is None else np.full(len(col.rms), np.nan)
        return Evaluated(s, rankmetrics.snap(s.evaluate(ones[s.stratum])[0]),
                         rankmetrics.snap(s.evaluate(weights[s.stratum])), sd)

    return [ev(s) for s in col.benchmarks], [ev(s) for s in col.downstream]


def replicate_sd(values: np.ndarray, has: np.ndarray) -> np.ndarray:
    """(R,) sample SD (ddof 1) of each RM's finite replicate values (values, has: (J, R)); NaN with < 2."""
    out = np.full(values.shape[1], np.nan)
    for r in range(values.shape[1]):
        v = values[has[:, r], r]
        v = v[np.isfinite(v)]
        if len(v) >= 2:
            out[r] = float(np.std(v, ddof=1))
    return out
