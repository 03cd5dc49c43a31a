"""The verdict rule on a run's own picks under judges with a known answer (`correlation.null_world`).

Every RM's best-of-N choice on every question is kept as the run made it (its selection weights over
the N shared samples, `prbench.downstream.bon.selection_weights` at the headline estimator and k;
with several BoN sample sets, those of set 0);
only the judge's rating of each sample is replaced, and the same code as the run
(`prbench.analysis.comparison.family_cells` with the run's question bootstrap,
`prbench.analysis.verdict.decide_family`) decides the declared family again. The benchmark
accuracies, the other methods' cells and the bootstrap weights stay the run's.

Judges (`null_world.judges`):
- `random`: a fresh N(0, 1) rating per sample, unrelated to both benchmarks (a null world: every
  decision is false); each draw redraws it.
- `shuffled`: the run's own ratings permuted among the samples of each question (a null world that
  keeps the ratings' levels and ties).
- `other_user` (the offline demo world only): each sample rated for another user's latent aspects
  (a derangement of the users within each subset, redrawn each draw) by the demo world's own
  vocabulary (`prbench.data.vocab_judge`: word matching, a mechanism no RM uses): a judge of the
  real kind, unrelated to this user.
- `graded` (demo only, not drawn): judge = w x the user's own aspects + (1 - w) x the closing tip's
  soundness, both read from the vocabulary, for w = 0, 0.1, ..., 1: a world whose answer moves from
  the general baseline to the personalized benchmark.

The table (results/tables/null_world.csv): per judge world and RM set (all of the run's RMs, and
seeded subsets of `rm_subsets` RMs), the share of draws in which the family decides any cell, and for
which side; the run's own BoN cells with their p and q, and the share of `random` draws whose
|difference| reaches the run's (a calibration of the run's p against its own null world).
"""
from __future__ import annotations

import logging
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd

from ..downstream.bon import curves as bon_curves
from ..io import iter_jsonl, write_csv
from ..seeding import stable_seed
from . import rankmetrics, verdict
from .comparison import family_cells
from .inputs import collect
from .scores import Evaluated, ReplicatedScore, Score, evaluate_scores

log = logging.getLogger("prbench.analysis.null_world")

COLUMNS = ["world", "w", "rms", "draws", "cell", "decided", "personalized", "baseline", "limit", "diff", "p", "q",
           "verdict", "null_exceed"]
NULL_JUDGES = ("random", "shuffled", "other_user")


def selection(samples: list[dict], judged: list[dict], rm_rows: dict, estimator: str, k: int, n: int):
    """(qids, subsets, W (R, Q, N) selection weights over the judged samples, G (Q, N) the run's
    ratings): W[r, q] @ G'[q] is RM r's BoN value on question q under ratings G' (NaN: a question
    the run's estimator excluded for that RM, as `bon.curves.cell`)."""
    subset_of = {}
    for row in samples:
        subset_of.setdefault(row["question_id"], row["subset"])
    qids = sorted(subset_of)
    G = bon_curves._matrix(judged, "score", qids, n, "judged.jsonl")
    judged_mask = ~np.isnan(G)
    W = np.zeros((len(rm_rows), len(qids), n))
    for r, rows in enumerate(rm_rows.values()):
        R = bon_curves._matrix(rows, "score", qids, n, "rm_scores")
        for q in range(len(qids)):
            ok = judged_mask[q]
            if estimator == "expected":
                if ok.sum() < k:
                    W[r, q] = np.nan
                    continue
                W[r, q, ok] = bon_curves.expected_weights(R[q][ok], k)
            else:
                w = bon_curves.selection_weights(estimator, R[q], k)
                W[r, q] = np.nan if (~ok[w > 0]).any() else np.where(ok, w, 0.0)
    return qids, [subset_of[q] for q in qids], W, G


def _bon_values(W: np.ndarray, G: np.ndarray) -> np.ndarray:
    """(R, Q): each RM's BoN value per question under ratings G (unjudged samples weigh 0)."""
    return np.einsum("rqn,qn->rq", W, np.nan_to_num(G, nan=0.0))


def _evaluate(score, values: np.ndarray, qids: list, units, weights: np.ndarray) -> Evaluated:
    """The BoN score with per-question values (R, Q) in place of the run's, evaluated as the run's."""
    num = np.zeros_like(score.num)
    den = np.zeros_like(score.den)
    cols = np.array([units.index[q] for q in qids])
    ok = np.isfinite(values)
    num[:, cols] = np.where(ok, values, 0.0)
    den[:, cols] = ok.astype(float)
    s = Score(score.key, score.stratum, num, den)  # sample set 0's picks: a plain score, whatever the run's
    ones = np.ones((1, len(units)))
    return Evaluated(s, rankmetrics.snap(s.evaluate(ones)[0]), rankmetrics.snap(s.evaluate(weights)))


def _subset(e: Evaluated, idx: np.ndarray) -> Evaluated:
    return Evaluated(e.score, e.point[idx], e.boot[:, idx])


class Harness:
    """The run's family with its BoN cells' ratings replaceable."""

    def __init__(self, col, n_boot: int, seed: int, signals, confirmatory, fdr: float, min_rms, bon: dict):
        self.col, self.fdr, self.min_rms, self.signals, self.confirmatory = col, fdr, min_rms, signals, confirmatory
        self.bench, self.down = evaluate_scores(col, n_boot, seed)
        self.weights = {name: u.weights(n_boot, seed) for name, u in col.units.items()}
        self._cache: dict = {}  # the cells whose score objects a draw keeps (all but the BoN ones)
        self.keys, _ = family_cells(self.bench, self.down, signals, confirmatory, self._cache)
        self.bon = {}  # down index -> (W, G, qids, subsets)
        for i, e in enumerate(self.down):
            key = e.score.key
            sig = (signals or {}).get("bon") or {}
            if key["downstream"] != "bon" or key["measure"] != "judge_score" or key["policy"] not in bon:
                continue
            if str(key["estimator"]) != str(sig.get("estimator")) or key["k"] != sig.get("k"):
                continue
            qids, subsets, W, G = bon[key["policy"]]
            values = _bon_values(W, G)
            units = col.units[e.score.stratum]
            run = _evaluate(e.score, values, qids, units, np.ones((1, len(units))))
            if isinstance(e.score, ReplicatedScore):  # several sample sets: the null worlds read set 0's picks
                log.warning("null_world: policy %s has several BoN sample sets; the null worlds redraw the "
                            "ratings of sample set 0's picks only", key["policy"])
            elif not np.allclose(run.point, e.point, equal_nan=True, atol=1e-9):  # nothing fell through
                raise ValueError(f"null_world: the BoN selection weights of policy {key['policy']} do not "
                                 f"reproduce the run's {key['estimator']} k={key['k']} judge scores")
            self.bon[i] = (W, G, qids, subsets)
        if not self.bon:
            raise ValueError("null_world: no BoN headline cell in the declared family (correlation.null_world "
                             "needs bon and its headline measure in correlation.confirmatory)")

    def decide(self, ratings: dict, idx: np.ndarray | None = None) -> verdict.Family:
        """The family under new ratings {down index: G' (Q, N)}, over the RMs idx (None = all)."""
        down = list(self.down)
        for i, G in ratings.items():
            W, _, qids, _ = self.bon[i]
            e = self.down[i]
            down[i] = _evaluate(e.score, _bon_values(W, G), qids, self.col.units[e.score.stratum],
                                self.weights[e.score.stratum])
        bench = self.bench
        if idx is not None:
            bench, down = [_subset(e, idx) for e in bench], [_subset(e, idx) for e in down]
        # the run's own cells are reused (a read-only view: the redrawn BoN cells are not kept)
        view = MappingProxyType(self._cache) if idx is None else None
        _, cells = family_cells(bench, down, self.signals, self.confirmatory, view)
        return verdict.decide_family(cells, self.fdr, self.min_rms)


def _judges(world: str, harness: Harness, rng, vocab):
    """One draw of ratings {down index: G'} for a null world."""
    out = {}
    for i, (_, G, _, _) in harness.bon.items():
        if world == "random":
            out[i] = rng.standard_normal(G.shape)
        elif world == "shuffled":
            out[i] = rng.permuted(G, axis=1)
        elif world == "other_user":
            out[i] = vocab[i].other_user(rng)
        else:
            raise ValueError(f"correlation.null_world.judges: unknown judge {world!r} (known: {list(NULL_JUDGES)})")
    return out


def run(harness: Harness, judges, draws: int, rm_subsets, seed: int, vocab=None, graded: bool = False) -> pd.DataFrame:
    rows = []
    n_all = len(harness.col.rms)
    sets = ["all"] + [str(k) for k in rm_subsets if 4 <= k < n_all]
    fam0 = harness.decide({})
    bon_cells = [j for j, k in harness.keys.iterrows() if k["downstream"] == "bon"]
    mcse = np.sqrt(harness.fdr * (1 - harness.fdr) / max(draws, 1))
    exceed = {}
    for world in judges:
        for label in sets:
            rng = np.random.default_rng(stable_seed(seed, "null-world", world, label))
            verdicts, diffs = [], []
            for _ in range(draws):
                idx = None if label == "all" else np.sort(rng.choice(n_all, int(label), replace=False))
                fam = harness.decide(_judges(world, harness, rng, vocab), idx)
                verdicts.append(fam.verdict)
                diffs.append(fam.diff)
            v, d = np.array(verdicts), np.array(diffs)
            wins = np.isin(v, [verdict.PERSONALIZED, verdict.BASELINE])
            rows.append({"world": world, "rms": n_all if label == "all" else int(label), "draws": draws,
                         "cell": "family", "decided": wins.any(-1).mean(),
                         "personalized": (v == verdict.PERSONALIZED).any(-1).mean(),
                         "baseline": (v == verdict.BASELINE).any(-1).mean(), "limit": harness.fdr + 3 * mcse})
            if label == "all":
                for j in bon_cells:
                    exceed[(world, j)] = float((np.abs(d[:, j]) >= abs(fam0.diff[j]) - 1e-12).mean())
    for j in bon_cells:
        k = harness.keys.iloc[j]
        rows.append({"world": "run", "rms": int(fam0.n[j]), "draws": 0, "cell": f"bon vs {k['benchmark_b']}",
                     "diff": fam0.diff[j], "p": fam0.p[j], "q": fam0.q[j], "verdict": fam0.verdict[j],
                     "null_exceed": exceed.get(("random", j), np.nan)})
    if graded and vocab:
        for w in np.round(np.arange(0, 1.0001, 0.1), 1):
            fam = harness.decide({i: vocab[i].graded(w) for i in harness.bon})
            for j in bon_cells:
                k = harness.keys.iloc[j]
                rows.append({"world": "graded", "w": w, "rms": int(fam.n[j]), "draws": 1,
                             "cell": f"bon vs {k['benchmark_b']}", "diff": fam.diff[j], "p": fam.p[j],
                             "q": fam.q[j], "verdict": fam.verdict[j]})
    return pd.DataFrame(rows, columns=COLUMNS)


class VocabRatings:
    """The demo world's vocabulary judges on one policy's samples (`prbench.data.vocab_judge`):
    each sample's fit to every rubric pole of its subset, computed once; `other_user` rates each
    question's samples for another user's poles (a fresh derangement of the users within each subset
    per draw), `graded` mixes the own user's fit with the closing tip's soundness."""

    def __init__(self, samples: list[dict], qids: list[str], n: int, judge_keys):
        from ..data import vocab_judge as VJ

        keys = {k["question_id"]: k for k in iter_jsonl(judge_keys)}
        index = {q: i for i, q in enumerate(qids)}
        self.user = [VJ.user_of(q) for q in qids]
        self.subset = {}
        self.user_poles = {}
        for q in qids:
            if q not in keys:
                raise ValueError(f"{judge_keys}: no rubric aspects for question {q}")
            self.user_poles.setdefault(VJ.user_of(q), VJ.poles_from_aspects(keys[q]["rubric_aspects"]))
        poles = sorted({p for ps in self.user_poles.values() for p in ps}, key=repr)
        self.pole_index = {p: i for i, p in enumerate(poles)}
        self.fit = np.full((len(qids), n, len(poles)), np.nan)
        self.tip = np.full((len(qids), n), np.nan)
        for row in samples:
            q, s = index.get(row["question_id"]), int(row["sample_idx"])
            if q is None:
                continue
            self.subset[self.user[q]] = row["subset"]
            words = VJ.tokens(row["answer"] or "")
            self.fit[q, s] = [VJ.aspect_fit(words, p) for p in poles]
            self.tip[q, s] = VJ.tip_quality_scores([row["answer"]])[0]

    def rate(self, user_of_question: list[str]) -> np.ndarray:
        """(Q, N): each sample's mean fit over the poles of the given user of its question."""
        out = np.empty(self.tip.shape)
        for q, u in enumerate(user_of_question):
            cols = [self.pole_index[p] for p in self.user_poles[u]]
            out[q] = self.fit[q][:, cols].mean(-1)
        return out

    def other_user(self, rng) -> np.ndarray:
        """(Q, N): each sample rated for another user of its subset (`vocab_judge.other_users`)."""
        from ..data.vocab_judge import other_users

        other = other_users({u: self.subset.get(u) for u in self.user_poles}, rng)
        return self.rate([other[u] for u in self.user])

    def graded(self, w: float) -> np.ndarray:
        return w * self.rate(self.user) + (1 - w) * self.tip


def run_null_world(rms, pair_files, downstream_tables, bon_files: dict, out_csv, n_boot: int, seed: int, fdr: float,
                   min_rms, confirmatory, signals, bench_kinds, runs, spec: dict, n: int,
                   judge_keys=None) -> pd.DataFrame:
    """Entry point of rule `null_world`. bon_files: {policy: (samples, judged, {rm: rm_scores path})};
    judge_keys: the demo world's results/data/judge_keys/personalized.jsonl (other_user, graded)."""
    col = collect(rms, pair_files, downstream_tables, bench_kinds, runs)
    sig = (signals or {}).get("bon") or {}
    bon, sample_rows = {}, {}
    for policy, (samples, judged, rm_paths) in bon_files.items():
        s_rows, j_rows = list(iter_jsonl(samples)), list(iter_jsonl(judged))
        rm_rows = {rm: list(iter_jsonl(rm_paths[rm])) for rm in rms}
        bon[policy] = selection(s_rows, j_rows, rm_rows, str(sig.get("estimator")), int(sig.get("k")), n)
        sample_rows[policy] = s_rows
    harness = Harness(col, n_boot, seed, signals, confirmatory, fdr, min_rms, bon)
    judges = list(spec["judges"])
    vocab = None
    if "other_user" in judges or spec["graded"]:
        if judge_keys is None:
            raise ValueError("correlation.null_world: other_user and graded need the demo world's judge keys")
        vocab = {i: VocabRatings(sample_rows[harness.down[i].score.key["policy"]], harness.bon[i][2], int(n),
                                 judge_keys) for i in harness.bon}
    with rankmetrics.ranks_memo():  # the benchmarks' replicates meet every draw: ranked once per RM set
        table = run(harness, judges, int(spec["draws"]), list(spec["rm_subsets"]), seed, vocab, bool(spec["graded"]))
    Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    write_csv(out_csv, table, float_format="%.6g")
    for _, r in table.iterrows():
        log.info("%s", {k: v for k, v in r.items() if not (isinstance(v, float) and np.isnan(v))})
    return table
