"""Best-of-N curves: per-question best-of-k values per RM (+ oracle and random references), the tidy
table (rule bon_table) and the downstream measure table (rule bon_measures).

Estimators for a question with N samples, RM scores r and judge scores g:
  - `first_k`  (the authors' protocol): best of the first k samples by RM score; RM-score ties go
    to the EARLIEST sample (the authors' rule);
  - `first_k_tieavg`: as `first_k`, but RM-score ties among the first k are broken by averaging
    the tied samples' judge scores (= uniform random tie-breaking);
  - `expected` (exact expectation over all k-subsets of the N samples): sort by r ascending,
    E = sum_{i=k..N} C(i-1,k-1)/C(N,k) g_(i), with the weights averaged inside RM-score ties
    (equivalent to breaking ties uniformly at random).
NaN RM scores (generative failures) rank lowest (and tie with each other) and are counted.

NaN judge scores (unparseable judgements) drop only what they touch, never the whole question:
  - `first_k` / `first_k_tieavg` (and the random reference under them: sample 0): the selection
    is made by RM score as usual; when a selected sample (for tieavg: any tied selected sample)
    has no judge score, that (question, k) cell is excluded;
  - `expected`: the pool is the question's judged samples (N' of them): the exact expectation over
    the k-subsets of that pool; a cell with N' < k is excluded (random: uniform over the pool);
  - win_vs_random compares with a uniformly random judged sample.
Excluded cells are NaN in the curve files; bon.csv counts them per row (`judge_dropped`, cells
= questions excluded from that row's mean) next to `judge_nan_samples` (the policy's samples
without a judge score), and the log reports both. `judge_failed_samples` counts the policy's samples
whose judgement failed to parse whatever the failure rule: under judge.failure `zero` they score 0.0
(nothing is excluded, judge_nan_samples is 0) and are still counted there.
"""
from __future__ import annotations

import functools
import logging
import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ...io import read_jsonl, write_csv
from ...seeding import stable_seed
from ...stats import bootstrap_ci
from .. import write_measures

log = logging.getLogger("prbench.downstream.bon")

ESTIMATORS = ("first_k", "first_k_tieavg", "expected")
ORACLE = "oracle"
RANDOM = "random"
CURVE_COLUMNS = ["question_id", "subset", "estimator", "k", "judge_score", "win_vs_random"]
ALL_SUBSETS = "all"  # the `subset` of a row over every question (as the PPO and GRPO tables)
TABLE_COLUMNS = ["policy", "rm", "subset", "estimator", "k", "n_questions", "mean", "ci_low", "ci_high",
                 "win_rate", "win_ci_low", "win_ci_high", "rm_failures", "judge_dropped", "judge_nan_samples",
                 "judge_failed_samples"]


# ---------------------------------------------------------------------------------------------
# Selection weights (probability that each sample is the one selected), per estimator
# ---------------------------------------------------------------------------------------------
def _rank_values(rm_scores) -> np.ndarray:
    r = np.asarray(rm_scores, dtype=float)
    return np.where(np.isnan(r), -np.inf, r)


def _tie_groups(values_sorted: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) ranges of equal consecutive values in a sorted array (-inf == -inf)."""
    groups, start = [], 0
    for i in range(1, len(values_sorted) + 1):
        if i == len(values_sorted) or values_sorted[i] != values_sorted[start]:
            groups.append((start, i))
            start = i
    return groups


def expected_weights(rm_scores, k: int) -> np.ndarray:
    """P(sample s is the best-of-k of a uniformly random k-subset), ties broken uniformly.

    Sorted ascending, the sample at 1-based position i is the subset maximum with probability
    C(i-1, k-1) / C(N, k); inside a tie group the weights are averaged.
    """
    r = _rank_values(rm_scores)
    n = len(r)
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of samples N={n}")
    order = np.argsort(r, kind="stable")
    pos_w = _position_weights(n, k).copy()
    rs = r[order]
    for a, b in _tie_groups(rs):
        if b - a > 1:
            pos_w[a:b] = pos_w[a:b].mean()
    w = np.empty(n, dtype=float)
    w[order] = pos_w
    return w


@functools.lru_cache(maxsize=None)
def _position_weights(n: int, k: int) -> np.ndarray:
    """C(i-1, k-1) / C(N, k) for the 1-based sorted positions i = 1..N (read-only: callers copy)."""
    denom = math.comb(n, k)
    w = np.array([math.comb(i - 1, k - 1) / denom for i in range(1, n + 1)], dtype=float)
    w.setflags(write=False)
    return w


def first_k_weights(rm_scores, k: int) -> np.ndarray:
    """The authors' rule: best of the first k samples by RM score, ties go to the earliest sample."""
    r = _rank_values(rm_scores)
    n = len(r)
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of samples N={n}")
    w = np.zeros(n, dtype=float)
    w[int(np.argmax(r[:k]))] = 1.0  # argmax returns the first maximum
    return w


def first_k_tieavg_weights(rm_scores, k: int) -> np.ndarray:
    """Best of the first k samples; tied maxima share the selection equally (= mean judge score)."""
    r = _rank_values(rm_scores)
    n = len(r)
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of samples N={n}")
    head = r[:k]
    top = head == head.max()
    w = np.zeros(n, dtype=float)
    w[:k][top] = 1.0 / top.sum()
    return w


def selection_weights(estimator: str, rm_scores, k: int) -> np.ndarray:
    if estimator == "expected":
        return expected_weights(rm_scores, k)
    if estimator == "first_k":
        return first_k_weights(rm_scores, k)
    if estimator == "first_k_tieavg":
        return first_k_tieavg_weights(rm_scores, k)
    raise ValueError(f"unknown best-of-k estimator {estimator!r} (known: {ESTIMATORS})")


def random_weights(estimator: str, n: int) -> np.ndarray:
    """A single random sample: sample 0 under `first_k`/`first_k_tieavg` (the authors' single draw),
    uniform under `expected`."""
    if estimator in ("first_k", "first_k_tieavg"):
        w = np.zeros(n)
        w[0] = 1.0
        return w
    return np.full(n, 1.0 / n)


def best_of_k(estimator: str, rm_scores, judge_scores, k: int) -> float:
    return float(selection_weights(estimator, rm_scores, k) @ np.asarray(judge_scores, dtype=float))


def win_vs_random(weights: np.ndarray, judge_scores) -> float:
    """P(selected beats an independent uniformly random sample of the N), ties count half."""
    return float(weights @ _beat_rates(np.asarray(judge_scores, dtype=float)))


def _beat_rates(g: np.ndarray) -> np.ndarray:
    """Per sample, P(it beats a uniformly random sample of g), ties counting half (none: empty)."""
    if not len(g):  # a question without a judged sample: no cell reads its rates
        return np.zeros(0)
    beat = (g[:, None] > g[None, :]).astype(float) + 0.5 * (g[:, None] == g[None, :])
    return beat.mean(axis=1)


def _judged_pool(g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A question's judged-sample mask, its judged scores (the pool) and their beat rates: the parts
    of `cell` that do not depend on the estimator, the mode or k (question_curves computes them once)."""
    judged = ~np.isnan(g)
    pool = g[judged]
    return judged, pool, _beat_rates(pool)


# ---------------------------------------------------------------------------------------------
# Curves and the table
# ---------------------------------------------------------------------------------------------
def _matrix(rows: Sequence[dict], field: str, qids: list[str], n: int, what: str) -> np.ndarray:
    """Rows {question_id, sample_idx, <field>} -> (Q, N) float matrix (None -> NaN); checks coverage."""
    index = {q: i for i, q in enumerate(qids)}
    mat = np.full((len(qids), n), np.nan)
    seen = np.zeros((len(qids), n), dtype=bool)
    for row in rows:
        q, s = row["question_id"], int(row["sample_idx"])
        if q not in index:
            continue
        if not 0 <= s < n:
            raise ValueError(f"{what}: sample_idx {s} of question {q} outside 0..{n - 1} (bon.n={n})")
        v = row.get(field)
        mat[index[q], s] = np.nan if v is None else float(v)
        seen[index[q], s] = True
    if not seen.all():
        qi, si = np.argwhere(~seen)[0]
        raise ValueError(f"{what}: missing {int((~seen).sum())} (question, sample) rows, "
                         f"e.g. question {qids[qi]} sample {si}")
    return mat


def cell(estimator: str, mode: str, r, g, k: int, pool: tuple | None = None) -> tuple[float, float]:
    """(judge score, win vs random) of one question at k; (NaN, NaN) when the cell is excluded
    because a sample it needs has no judge score (module docstring).

    mode: 'rm' (select by r), 'oracle' (select by g itself), 'random' (a random sample).
    pool: `_judged_pool(g)` when the caller has it (the same values; computed here otherwise)."""
    g = np.asarray(g, dtype=float)
    judged, scores, beat = _judged_pool(g) if pool is None else pool
    nan = (float("nan"), float("nan"))
    if estimator == "expected":
        if mode == RANDOM:
            if not len(scores):
                return nan
            w = np.full(len(scores), 1.0 / len(scores))
        else:
            if len(scores) < k:
                return nan
            w = expected_weights(scores if mode == ORACLE else np.asarray(r, dtype=float)[judged], k)
        return float(w @ scores), float(w @ beat)
    w = random_weights(estimator, len(g)) if mode == RANDOM else selection_weights(
        estimator, g if mode == ORACLE else r, k)
    if (~judged[w > 0]).any():
        return nan
    return float(w @ np.where(judged, g, 0.0)), float(w[judged] @ beat)


def question_curves(R: np.ndarray, G: np.ndarray, ks: Sequence[int], mode: str) -> dict:
    """Per-question judge score and win rate for every estimator and k (NaN: excluded cell).

    mode: 'rm' (select by R), 'oracle' (select by G itself), 'random' (a random sample)."""
    Q, n = G.shape
    pools = [_judged_pool(G[q]) for q in range(Q)]
    out = {}
    for est in ESTIMATORS:
        for k in ks:
            js, wr = np.empty(Q), np.empty(Q)
            for q in range(Q):
                js[q], wr[q] = cell(est, mode, None if R is None else R[q], G[q], k, pools[q])
            out[(est, k)] = (js, wr)
    return out


def _failed_samples(judged: Sequence[dict], questions: Mapping[str, str], nan_samples: int, n: int,
                    policy: str) -> dict[str, int]:
    """Samples whose judgement failed to parse, whatever judge.failure scored them (NaN or 0.0), over
    every question (ALL_SUBSETS) and per subset (`questions`: question id -> subset).
    A judged row without `failed` (written before the field) failed exactly when its score is null."""
    out = dict.fromkeys([ALL_SUBSETS, *sorted(set(questions.values()))], 0)
    for r in judged:
        q = r.get("question_id")
        if q in questions and bool(r.get("failed", r.get("score") is None)):
            out[ALL_SUBSETS] += 1
            out[questions[q]] += 1
    if out[ALL_SUBSETS] > nan_samples:
        log.warning("policy %s: %d of %d samples' judgements failed to parse and were scored by the failure rule "
                    "(judge.failure zero: 0.0); bon.csv judge_failed_samples", policy, out[ALL_SUBSETS], n)
    return out


def _table_rows(per_q: dict, masks: dict, policy: str, label: str, seed: int, n_boot: int,
                rm_failures: Mapping[str, int], nan_by: Mapping[str, int], failed_samples: Mapping[str, int]) -> list:
    """bon.csv's rows of one RM (or oracle, random): per subset (`all` first) and (estimator, k), the
    mean judge score and win rate over the subset's questions with their bootstrap CIs and counts."""
    rows = []
    for subset, mask in masks.items():
        # same resamples for every RM and k: paired CIs (the pooled rows' seed as before subsets)
        boot_seed = stable_seed(seed, "bon", policy) if subset == ALL_SUBSETS else \
            stable_seed(seed, "bon", policy, subset)
        for (est, k), (js, wr) in per_q.items():
            js_s, wr_s = js[mask], wr[mask]
            ok = ~np.isnan(js_s)
            m, lo, hi = bootstrap_ci(js_s[ok], n_boot=n_boot, seed=boot_seed)
            wm, wlo, whi = bootstrap_ci(wr_s[ok], n_boot=n_boot, seed=boot_seed)
            rows.append({"policy": policy, "rm": label, "subset": subset, "estimator": est, "k": k,
                         "n_questions": int(ok.sum()), "mean": m, "ci_low": lo, "ci_high": hi,
                         "win_rate": wm, "win_ci_low": wlo, "win_ci_high": whi,
                         "rm_failures": rm_failures[subset], "judge_dropped": int((~ok).sum()),
                         "judge_nan_samples": nan_by[subset], "judge_failed_samples": failed_samples[subset]})
    return rows


def _rm_failures(rm: str, rows: Sequence[dict], R: np.ndarray, masks: dict, subset_of: dict) -> dict:
    """Per subset, the RM's scoring failures: NaN scores (ranked lowest) plus unparseable replies
    scored with the fallback value; each logged."""
    nan = int(np.isnan(R).sum())
    if nan:
        log.warning("RM %s: %d NaN scores (failures) ranked lowest", rm, nan)
    fallback_rows = [row for row in rows if row.get("failed") and row.get("score") is not None
                     and row["question_id"] in subset_of]
    if fallback_rows:
        log.warning("RM %s: %d unparseable replies scored with the fallback value "
                    "(reward.generative_failure_score)", rm, len(fallback_rows))
    return {s: int(np.isnan(R[m]).sum()) + sum(
        1 for row in fallback_rows if s == ALL_SUBSETS or subset_of[row["question_id"]] == s)
        for s, m in masks.items()}


def bon_curves(samples: Sequence[dict], judged: Sequence[dict], rm_scores: Mapping[str, Sequence[dict]],
               ks: Sequence[int], n: int, policy: str, seed: int = 0, n_boot: int = 1000):
    """Build per-question curve frames ({rm|_oracle|_random: DataFrame}) and the summary table: per
    (RM, estimator, k) one row over every question (subset `all`, its bootstrap seeded by the policy)
    and one per subset (as the authors summarise BoN, BoN/evaluate.py; seeded by the policy and the
    subset), each row's counts over its own questions' samples (the same resamples for every RM and k
    within a row's questions: paired CIs)."""
    import pandas as pd

    subset_of = {}
    for row in samples:
        subset_of.setdefault(row["question_id"], row["subset"])
    qids = sorted(subset_of)
    if not qids:
        raise ValueError("bon: no samples")
    bad_k = [k for k in ks if not 1 <= k <= n]
    if bad_k:
        raise ValueError(f"config key bon.ks: {bad_k} outside 1..bon.n={n}")
    G = _matrix(judged, "score", qids, n, "judged.jsonl")
    nan_samples = int(np.isnan(G).sum())
    failed_samples = _failed_samples(judged, subset_of, nan_samples, G.size, policy)
    subs = np.array([subset_of[q] for q in qids], dtype=object)
    masks = {ALL_SUBSETS: np.ones(len(qids), dtype=bool), **{s: subs == s for s in sorted(set(subs))}}
    nan_by = {s: int(np.isnan(G[m]).sum()) for s, m in masks.items()}
    if nan_samples == G.size:
        raise ValueError("bon: every sample's judge score is NaN (judge parse failures); nothing to evaluate")
    if nan_samples:
        log.warning("policy %s: %d of %d samples (in %d of %d questions) have no judge score (unparseable); "
                    "only the cells that need them are dropped", policy, nan_samples, G.size,
                    int(np.isnan(G).any(axis=1).sum()), len(qids))
    curves, table = {}, []

    def add(name: str, label: str, mode: str, R: np.ndarray | None, rm_failures: Mapping[str, int]):
        per_q = question_curves(R, G, ks, mode)
        frames, cells = [], 0
        for (est, k), (js, wr) in per_q.items():
            frames.append(pd.DataFrame({"question_id": qids, "subset": list(subs),
                                        "estimator": est, "k": k, "judge_score": js, "win_vs_random": wr}))
            cells += int(np.isnan(js).sum())
        table.extend(_table_rows(per_q, masks, policy, label, seed, n_boot, rm_failures, nan_by, failed_samples))
        if cells:
            log.warning("policy %s, %s: %d (question, estimator, k) cells dropped for an unjudged selected "
                        "sample (bon.csv judge_dropped)", policy, label, cells)
        curves[name] = pd.concat(frames, ignore_index=True)[CURVE_COLUMNS]

    for rm in sorted(rm_scores):
        R = _matrix(rm_scores[rm], "score", qids, n, f"rm_scores/{rm}.jsonl")
        add(rm, rm, "rm", R, _rm_failures(rm, rm_scores[rm], R, masks, subset_of))
    add("_oracle", ORACLE, ORACLE, None, dict.fromkeys(masks, 0))
    add("_random", RANDOM, RANDOM, None, dict.fromkeys(masks, 0))
    return curves, pd.DataFrame(table, columns=TABLE_COLUMNS)


def bon_table(policies: Mapping[str, dict | Sequence[dict]], out_table: str, ks: Sequence[int], n: int,
              seed: int = 0, n_boot: int = 1000) -> "object":
    """policies: {policy: paths} or {policy: [paths of sample set 0, 1, ...]} (`bon.sample_sets`), each
    paths {"samples", "judged", "rm_scores": {rm: path}, "curves_dir"}. Writes each set's
    curves_dir/{rm}.csv, _oracle.csv, _random.csv and the tidy table: one row per (policy, RM,
    estimator, k), over the sample sets when there are several (`combine_sample_sets`)."""
    import pandas as pd

    tables = []
    for policy, sets in policies.items():
        sets = [sets] if isinstance(sets, Mapping) else list(sets)
        set_curves, set_tables = [], []
        for i, paths in enumerate(sets):
            samples = read_jsonl(paths["samples"])
            judged = read_jsonl(paths["judged"])
            rm_rows = {rm: read_jsonl(p) for rm, p in paths["rm_scores"].items()}
            curves, table = bon_curves(samples, judged, rm_rows, ks, n, policy, seed, n_boot)
            cdir = Path(paths["curves_dir"])
            for name, df in curves.items():
                write_csv(cdir / f"{name}.csv", df)
            set_curves.append(curves)
            set_tables.append(table)
            log.info("policy %s, sample set %d: %d RMs, %d questions, %d samples without a judge score", policy, i,
                     len(rm_rows), len({r["question_id"] for r in samples}),
                     int(table.loc[table["subset"] == ALL_SUBSETS, "judge_nan_samples"].iloc[0]))
        tables.append(set_tables[0] if len(sets) == 1 else
                      combine_sample_sets(policy, set_curves, set_tables, seed, n_boot))
    df = pd.concat(tables, ignore_index=True)
    write_csv(out_table, df)
    return df


def _curve_name(label: str) -> str:
    return {ORACLE: "_oracle", RANDOM: "_random"}.get(label, label)


def combine_sample_sets(policy: str, set_curves: Sequence[Mapping], set_tables: Sequence, seed: int = 0,
                        n_boot: int = 1000) -> "object":
    """One policy's table rows over several sample sets (`bon.sample_sets`): each question's value is
    the mean over the sets where its cell is defined (a set whose selected sample has no judge score
    leaves that set out for that question), `mean` is the mean over questions of those values and the
    CI resamples questions (the between-set spread enters only through the per-question means; the
    sets themselves are not resampled). The counts (rm_failures, judge_dropped,
    judge_nan_samples, judge_failed_samples) are summed over the sets; n_questions counts the
    questions with a value in at least one set. Subset rows take their subset's questions, seeded
    as in `bon_curves`."""
    import pandas as pd

    counts = ["rm_failures", "judge_dropped", "judge_nan_samples", "judge_failed_samples"]
    keyed = [{(name, est, int(k)): part.set_index("question_id")[["subset", "judge_score", "win_vs_random"]]
              for name, df in curves.items() for (est, k), part in df.groupby(["estimator", "k"], sort=False)}
             for curves in set_curves]
    out = []
    for i, row in set_tables[0].iterrows():
        subset = row["subset"]
        # as bon_curves: the same resamples for every RM and k
        boot_seed = stable_seed(seed, "bon", policy) if subset == ALL_SUBSETS else \
            stable_seed(seed, "bon", policy, subset)
        key = (_curve_name(row["rm"]), row["estimator"], int(row["k"]))
        parts = [c[key] for c in keyed]
        if subset != ALL_SUBSETS:
            parts = [p[p["subset"].astype(str) == str(subset)] for p in parts]
        qids = parts[0].index
        if any(not p.index.equals(qids) for p in parts[1:]):
            raise ValueError(f"bon: policy {policy}: the sample sets' curves of {key[0]} cover different questions "
                             "(every set must sample the same evaluation questions)")
        vals = {}
        for col in ("judge_score", "win_vs_random"):
            stack = np.stack([p[col].to_numpy(dtype=float) for p in parts])
            have = np.isfinite(stack).sum(axis=0)
            vals[col] = np.where(have > 0, np.nansum(stack, axis=0) / np.maximum(have, 1), np.nan)
        ok = np.isfinite(vals["judge_score"])
        m, lo, hi = bootstrap_ci(vals["judge_score"][ok], n_boot=n_boot, seed=boot_seed)
        wm, wlo, whi = bootstrap_ci(vals["win_vs_random"][ok], n_boot=n_boot, seed=boot_seed)
        new = {**row.to_dict(), "n_questions": int(ok.sum()), "mean": m, "ci_low": lo, "ci_high": hi,
               "win_rate": wm, "win_ci_low": wlo, "win_ci_high": whi}
        new.update({c: int(sum(int(t.loc[i, c]) for t in set_tables)) for c in counts})
        out.append(new)
    return pd.DataFrame(out, columns=TABLE_COLUMNS)


# ---- the downstream contract (prbench.downstream) --------------------------------------------------
CURVE_MEASURES = (("judge_score", "judge_score"), ("win_rate", "win_vs_random"))


def curve_measures(policy: str, rm: str, path, replicate: int = 0) -> "object":
    """One RM's curves file (of sample set `replicate`) as downstream measure rows: judge_score and
    win_rate (vs a random sample) at every k and estimator, and the area under each curve over log2 k
    normalised by the log2 k range (the curve's average height; measure `auc_<measure>`, k empty).
    Rows follow the file's question order."""
    import pandas as pd

    df = pd.read_csv(path)
    missing = [c for c in CURVE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    if df.empty:
        raise ValueError(f"{path}: no rows")
    df["question_id"] = df["question_id"].astype(str)
    first = {q: i for i, q in reversed(list(enumerate(df["question_id"])))}
    subset = {q: str(s) for q, s in zip(df["question_id"][::-1], df["subset"][::-1])}
    rows = []
    for est, sub in df.groupby("estimator", sort=True):
        for measure, col in CURVE_MEASURES:
            table = sub.pivot_table(index="question_id", columns="k", values=col, aggfunc="mean", dropna=False)
            ks = sorted(int(k) for k in table.columns)
            table = table[ks]
            for k in ks:
                rows += [(q, str(est), measure, k, float(v)) for q, v in table[k].items()]
            vals = table.to_numpy(dtype=float)
            if len(ks) > 1:
                lk = np.log2(ks)
                auc = np.trapezoid(vals, lk, axis=1) / (lk[-1] - lk[0])
            else:
                auc = vals[:, 0]
            rows += [(q, str(est), f"auc_{measure}", None, float(v)) for q, v in zip(table.index, auc)]
    rows.sort(key=lambda r: first[r[0]])  # stable: the file's question order, then as built
    return pd.DataFrame([{"policy": policy, "rm": rm, "method": "bon", "estimator": est, "measure": m, "k": k,
                          "replicate": int(replicate), "question_id": q, "subset": subset[q], "value": v}
                         for q, est, m, k, v in rows])


def write_bon_measures(curves: Mapping[tuple, str], out_csv) -> "object":
    """Rule bon_measures: every (policy, RM[, sample set]) curves file -> results/downstream/bon.csv
    (a key without a sample set is set 0)."""
    import pandas as pd

    return write_measures(out_csv, pd.concat([curve_measures(key[0], key[1], path, key[2] if len(key) > 2 else 0)
                                              for key, path in curves.items()], ignore_index=True))
