"""Benchmark scoring: accuracy of one RM on one benchmark, and the tidy table over all of them.

Pointwise RMs score every unique response once (a pair's chosen and rejected are two rows;
identical (question, profile, answer) triples are scored once), then the scores are regrouped
into pairs. Pairwise RMs (`rm.pairwise`) call `compare()` on the pairs directly.

Each pair gets a `credit` in [0, 1]; accuracy is the mean credit.
  - Pointwise RMs (the authors' rule): credit 1 when the chosen answer scores strictly higher,
    else 0 (ties and failures are wrong and reported separately).
  - Pairwise judges: credit = the pair's preference for the chosen answer, the share of the
    asked orders in which the judge picked it (one seeded order per pair by default: 0 or 1, the
    paper's rule; with `both_orders`: 0, 0.5 or 1, i.e. ties count half, so a judge that always
    answers "A" scores about 0.5). `correct` counts the pairs where every asked order picked the
    chosen answer (P(both orders right) with `both_orders`), `position_bias_a` is the share of
    parsed verdicts that were "A", failures (unparseable) get credit 0 and are counted. With
    `scoring.pairwise_failure: predict_a` (the authors) an unparseable reply predicts "A": the
    credit follows that prediction and the pair is still counted in `failures`.

Beside the accuracy, `benchmark_reports` writes the authors' two extra reports:
`position_table` (pairwise RMs: accuracy when the chosen answer is shown as A and as B, the
authors' position bias |difference|, the share of "A" picks, failures) and `margin_table`
(pointwise RMs: the mean chosen-minus-rejected score margin with a bootstrap CI).
"""
from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import entry_with_defaults
from ..data.baselines import has_official
from ..io import iter_jsonl, read_json, read_jsonl, write_csv, write_json, write_jsonl
from ..prompts import PairRequest, ScoreRequest
from ..rms import load_reward_model
from ..seeding import stable_seed
from ..stats import bootstrap_ci
from . import bestof
from .official import official_stats, pair_credit

log = logging.getLogger("prbench.scoring.benchmark")

PAIR_FIELDS = {"pair_id": str, "subset": str, "section": str, "question_id": str, "question": str,
               "profile": list, "chosen": str, "rejected": str}
ITEM_FIELDS = {**PAIR_FIELDS, "chosen": list, "rejected": list, "rule": str}  # best-of-n items (bestof.py)
LEVELS = ("subset", "section")
TABLE_COLUMNS = ["rm", "benchmark", "level", "group", "n", "correct", "ties", "failures", "accuracy",
                 "ci_low", "ci_high", "all_orders_right", "position_bias_a"]


def is_item(row: dict) -> bool:
    """A best-of-n item (answer lists and a `rule`, `prbench.scoring.bestof`) rather than a pair."""
    return "rule" in row


def load_pairs(path: str | Path) -> list[dict]:
    """Canonical benchmark pairs, or best-of-n items (every row of the file one or the other); a
    missing or mistyped field raises naming file, line and field."""
    rows, seen = [], set()
    for lineno, row in enumerate(iter_jsonl(path), 1):
        fields = ITEM_FIELDS if is_item(row) else PAIR_FIELDS
        if rows and is_item(row) != is_item(rows[0]):
            raise ValueError(f"{path}: row {lineno}: pairs and best-of-n items mixed in one benchmark file")
        for key, typ in fields.items():
            if key not in row:
                raise ValueError(f"{path}: row {lineno}: missing field {key!r}")
            if not isinstance(row[key], typ):
                raise ValueError(f"{path}: row {lineno}: field {key!r} must be {typ.__name__}, "
                                 f"got {type(row[key]).__name__}")
        for key in ("profile", "chosen", "rejected") if is_item(row) else ("profile",):
            if not all(isinstance(p, str) for p in row[key]):
                raise ValueError(f"{path}: row {lineno}: field {key!r} must be a list of strings")
        if row["pair_id"] in seen:
            raise ValueError(f"{path}: row {lineno}: duplicate pair_id {row['pair_id']!r}")
        seen.add(row["pair_id"])
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no pairs")
    return rows


def _pref(c: float, r: float) -> float:
    if math.isnan(c) or math.isnan(r):
        return float("nan")
    return 1.0 if c > r else (0.0 if c < r else 0.5)


def _num(x) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def _score_unique(rm, rows: Sequence[dict], answers: Sequence[Sequence[str]]):
    """A pointwise RM's scores of each row's answers, identical (question, profile, answer) triples
    scored once: (scores of the unique requests, per row the indices of its answers' scores, the
    score output)."""
    index: dict[tuple, int] = {}
    reqs: list[ScoreRequest] = []
    slots = []
    for r, ans in zip(rows, answers):
        row_slots = []
        for a in ans:
            key = (r["question"], tuple(r["profile"]), a)
            if key not in index:
                index[key] = len(reqs)
                reqs.append(ScoreRequest(r["question"], a, tuple(r["profile"]), tuple(r.get("profile_categories", ()))))
            row_slots.append(index[key])
        slots.append(row_slots)
    out = rm.score(reqs)
    scores = np.asarray(out.scores, dtype=float)
    if scores.shape != (len(reqs),):
        raise RuntimeError(f"RM {rm.name}: score() returned {scores.shape} scores for {len(reqs)} requests")
    return scores, slots, out


def _offsets_kw(order_offsets) -> dict:
    """compare()'s `order_offsets` only when a part of a split job has some (any RM's compare without)."""
    return {"order_offsets": dict(order_offsets)} if order_offsets else {}


def score_items(rm, rows: Sequence[dict], order_offsets: dict | None = None) -> tuple[list[dict], dict]:
    """Per-item results of best-of-n items (`prbench.scoring.bestof`): pointwise RMs score every
    answer (identical (question, profile, answer) triples once); a pairwise judge compares every two
    answers of an item (`bestof.round_robin`, one order each by the judge's own order rule), an
    answer's score being its win rate. The item's rule then credits it from the scores."""
    info: dict = {"items": len(rows), "responses": sum(len(r["chosen"]) + len(r["rejected"]) for r in rows)}
    answers = [list(r["chosen"]) + list(r["rejected"]) for r in rows]
    if getattr(rm, "pairwise", False):
        reqs, groups, spans = [], [], []
        for r, ans in zip(rows, answers):
            start = len(reqs)
            for i, j in bestof.round_robin(len(ans)):
                reqs.append(PairRequest(r["question"], ans[i], ans[j], tuple(r["profile"]),
                                        tuple(r.get("profile_categories", ()))))
                groups.append(r["subset"])
            spans.append((start, len(reqs)))
        out = rm.compare(reqs, groups=groups, **_offsets_kw(order_offsets))
        prefs = np.asarray(out.prefs, dtype=float)
        info["judge_calls"] = sum(len(d.get("raw", [])) for d in (out.details or []))
        info["comparisons"] = len(reqs)
        item_scores = [bestof.win_rates(len(ans), prefs[a:b]) for ans, (a, b) in zip(answers, spans)]
        details = list(out.details or [{}] * len(reqs))
        judge_failed = [sum(any(d.get("failed") or []) for d in details[a:b]) for a, b in spans]
    else:
        scores, slots, _ = _score_unique(rm, rows, answers)
        info["unique_responses"] = len(scores)
        item_scores = [[float(scores[k]) for k in s] for s in slots]
        judge_failed = [0] * len(rows)
    results = []
    for r, sc, jf in zip(rows, item_scores, judge_failed):
        res = bestof.item_result(sc, len(r["chosen"]), r["rule"])
        extra = {k: r[k] for k in ("ties_type", "ties_prompt") if k in r}
        if getattr(rm, "pairwise", False):
            # an unparseable comparison is a failure even when a rule predicted for it (predict_a)
            extra["judge_failures"] = int(jf)
            res["failure"] = res["failure"] or jf > 0
        results.append({"pair_id": r["pair_id"], "question_id": r["question_id"], "subset": r["subset"],
                        "section": r["section"], **res, **extra})
    return results, info


def score_pairs(rm, rows: Sequence[dict], order_offsets: dict | None = None) -> tuple[list[dict], dict]:
    """Per-pair results (the `.pairs.jsonl` rows) and counts of what was scored (best-of-n items:
    `score_items`). `order_offsets`: a part of a split job's order draws made before its rows
    (`prbench.scoring.parts.order_offsets`)."""
    if rows and is_item(rows[0]):
        return score_items(rm, rows, order_offsets)
    info: dict = {"pairs": len(rows)}
    extra: list[dict] = [{} for _ in rows]
    if getattr(rm, "pairwise", False):
        out = rm.compare([PairRequest(r["question"], r["chosen"], r["rejected"], tuple(r["profile"]),
                                      tuple(r.get("profile_categories", ()))) for r in rows],
                         groups=[r["subset"] for r in rows],  # the file order, per subset (order_rule)
                         **_offsets_kw(order_offsets))
        prefs = np.asarray(out.prefs, dtype=float)
        sc, sr = prefs, 1.0 - prefs
        for e, d in zip(extra, out.details or [{}] * len(rows)):
            if d:
                e["judge"] = d
        info["judge_calls"] = sum(len(d.get("raw", [])) for d in (out.details or []))
    else:
        scores, slots, out = _score_unique(rm, rows, [(r["chosen"], r["rejected"]) for r in rows])
        info["responses"] = 2 * len(rows)
        info["unique_responses"] = len(scores)
        sc = np.asarray([scores[a] for a, _ in slots])
        sr = np.asarray([scores[b] for _, b in slots])
        prefs = np.asarray([_pref(c, r) for c, r in zip(sc, sr)])
        if out.raw is not None:
            for e, (a, b) in zip(extra, slots):
                e["raw_chosen"], e["raw_rejected"] = out.raw[a], out.raw[b]
    pairwise = bool(getattr(rm, "pairwise", False))
    results = []
    for r, c, rj, p, e in zip(rows, sc, sr, prefs, extra):
        unscored = bool(math.isnan(p))
        # a pairwise reply that failed to parse is a failure even when a rule predicted for it (predict_a)
        failure = unscored or any((e.get("judge") or {}).get("failed") or [])
        correct = bool((not unscored) and p == 1.0)
        credit = (0.0 if unscored else float(p)) if pairwise else float(correct)
        results.append({
            "pair_id": r["pair_id"], "question_id": r["question_id"], "subset": r["subset"],
            "section": r["section"], "score_chosen": _num(c), "score_rejected": _num(rj),
            "pref": None if unscored else float(p), "correct": correct, "credit": credit,
            "tie": bool((not unscored) and p == 0.5), "failure": failure, **e,
        })
    return results, info


def group_stats(results: Sequence[dict], n_boot: int, seed: int) -> dict:
    credit = np.asarray([pair_credit(r) for r in results], dtype=float)
    correct = np.asarray([r["correct"] for r in results], dtype=float)
    acc, lo, hi = bootstrap_ci(credit, n_boot=n_boot, seed=seed)
    judged = [r["judge"] for r in results if isinstance(r.get("judge"), dict)]
    picks = [pk for d in judged  # parsed verdicts only (not the predict_a rule's stand-ins)
             for pk, bad in zip(d.get("picks", []), d.get("failed") or [False] * len(d.get("picks", [])))
             if pk is not None and not bad]
    return {"n": len(results), "correct": int(correct.sum()), "ties": int(sum(r["tie"] for r in results)),
            "failures": int(sum(r["failure"] for r in results)), "accuracy": acc,
            "ci_low": None if math.isnan(lo) else lo, "ci_high": None if math.isnan(hi) else hi,
            "all_orders_right": (float(correct.mean()) if judged and results else None),
            "position_bias_a": (sum(pk == "A" for pk in picks) / len(picks)) if picks else None}


def summarize(results: Sequence[dict], rm_name: str, bench: str, n_boot: int, seed: int) -> dict:
    """Accuracy overall and per subset / section, each with a seeded bootstrap 95% CI."""
    summary = {"rm": rm_name, "benchmark": bench,
               "overall": group_stats(results, n_boot, stable_seed(seed, rm_name, bench, "overall"))}
    for level in LEVELS:
        groups: dict[str, list] = {}
        for r in results:
            groups.setdefault(r[level], []).append(r)
        summary[level] = {g: group_stats(rs, n_boot, stable_seed(seed, rm_name, bench, level, g))
                          for g, rs in sorted(groups.items())}
    return summary


def add_official(summary: dict, bench_kind: str | None, results: Sequence[dict], n_boot: int, seed: int) -> None:
    """A baseline's official headline score (prbench.scoring.official) into `summary["official"]`, with the
    benchmark kind recorded so the table job can recompute its bootstrap (no-op for other kinds)."""
    if not has_official(bench_kind):
        return
    summary["bench_kind"] = bench_kind
    summary["official"] = official_stats(bench_kind, results, n_boot,
                                         stable_seed(seed, summary["rm"], summary["benchmark"], "official"))
    left = summary["official"].pop("_left_out")
    if left:
        log.warning("official %s score leaves out pairs of unknown subsets: %s", bench_kind, left)
    log.info("official %s score %.4f", bench_kind, summary["official"]["overall"]["accuracy"])


def load_rm(spec: dict, scoring: dict, seed: int):
    """The RM of a scoring job: its entry with the job's scoring keys (`scoring`: defaults filled)."""
    return load_reward_model({
        "seed": seed, "max_length": scoring["max_length"], "max_tokens_per_batch": scoring["max_tokens_per_batch"],
        # the pairwise judge's benchmark rules (rms.generative); other kinds ignore them
        "order_seed": scoring["order_seed"], "order_rule": scoring["order_rule"],
        "pairwise_parse": scoring["pairwise_parse"], "pairwise_failure": scoring["pairwise_failure"],
        # classifier input rules (rms.classifier); other kinds ignore them
        "add_special_tokens": scoring["add_special_tokens"], "truncation": scoring["truncation"], **spec})


def timed_scores(rm, rows: Sequence[dict], order_offsets: dict | None = None) -> tuple[list[dict], dict]:
    """`score_pairs` with its seconds in the counts."""
    t0 = time.perf_counter()
    results, info = score_pairs(rm, rows, order_offsets)
    info["seconds"] = round(time.perf_counter() - t0, 3)
    return results, info


def score_benchmark(bench_path: str | Path, spec: dict, pairs_out: str | Path, acc_out: str | Path,
                    bench: str, seed: int = 0, scoring: dict | None = None, rm=None,
                    bench_kind: str | None = None) -> dict:
    """Score one benchmark with one RM; write the per-pair jsonl and the accuracy JSON."""
    scoring = entry_with_defaults(scoring or {}, "scoring")  # the job's picked keys; the schema fills the rest
    rows = load_pairs(bench_path)
    rm = load_rm(spec, scoring, seed) if rm is None else rm
    log.info("RM %s (%s) on %s: %d pairs from %s", spec.get("name"), spec.get("kind"), bench, len(rows), bench_path)
    results, info = timed_scores(rm, rows)
    return finish_benchmark(results, info, rm.diagnostics(), spec.get("name", rm.name), bench, scoring, seed,
                            bench_kind, pairs_out, acc_out, pairwise=bool(getattr(rm, "pairwise", False)))


def finish_benchmark(results: list[dict], info: dict, diagnostics: dict, rm_name: str, bench: str, scoring: dict,
                     seed: int, bench_kind: str | None, pairs_out: str | Path, acc_out: str | Path,
                     pairwise: bool) -> dict:
    """The accuracy summary of one RM's per-pair results on one benchmark (a whole job's, or a split
    job's parts joined: `prbench.scoring.parts`); writes the pairs jsonl and the accuracy JSON."""
    summary = summarize(results, rm_name, bench, int(scoring["bootstrap"]), seed)
    add_official(summary, bench_kind, results, int(scoring["bootstrap"]), seed)
    summary["scoring"] = info
    summary["diagnostics"] = diagnostics
    o = summary["overall"]
    log.info("accuracy %.4f [%s, %s] n=%d correct=%d ties=%d failures=%d (%.1fs)", o["accuracy"], o["ci_low"],
             o["ci_high"], o["n"], o["correct"], o["ties"], o["failures"], info["seconds"])
    if o["failures"]:
        rule = "predicted 'A'" if scoring["pairwise_failure"] == "predict_a" and pairwise else "counted as wrong"
        log.warning("%d of %d pairs failed (unparseable or NaN scores); %s", o["failures"], o["n"], rule)
    log.info("diagnostics: %s", summary["diagnostics"])
    write_jsonl(pairs_out, results)
    write_json(acc_out, summary)
    return summary


def accuracy_rows(summary: dict) -> list[dict]:
    rows = []
    base = {"rm": summary["rm"], "benchmark": summary["benchmark"]}
    rows.append({**base, "level": "overall", "group": "all", **_stats_cols(summary["overall"])})
    for g, st in summary.get("official", {}).items():
        rows.append({**base, "level": "official", "group": "all" if g == "overall" else g, **_stats_cols(st)})
    for level in LEVELS:
        for g, st in summary.get(level, {}).items():
            rows.append({**base, "level": level, "group": g, **_stats_cols(st)})
    return rows


def _stats_cols(st: dict) -> dict:
    return {k: st.get(k) for k in ("n", "correct", "ties", "failures", "accuracy", "ci_low", "ci_high",
                                   "all_orders_right", "position_bias_a")}


def accuracy_table(acc_paths: Sequence[str | Path], out_csv: str | Path,
                   pairs_paths: Sequence[str | Path] | None = None, n_boot: int | None = None, seed: int = 0):
    """The tidy `benchmark_accuracy.csv`: one row per (rm, benchmark, level, group).

    Levels: `overall` (mean pair credit), `official` (baselines only: the benchmark's own headline
    score, `prbench.scoring.official`; group `all` = overall, else section or domain), `section`, `subset`.
    With `pairs_paths` (same order as `acc_paths`) and `n_boot`, the CIs are recomputed from the
    per-pair results with `summarize` (the same seeds as `score_benchmark`): the table alone reads
    `scoring.bootstrap`, so changing it reruns only this job (identical numbers at the same value)."""
    import pandas as pd

    if pairs_paths is not None and len(pairs_paths) != len(acc_paths):
        raise ValueError(f"accuracy_table: {len(acc_paths)} accuracy files but {len(pairs_paths)} pairs files")
    rows = []
    for i, p in enumerate(acc_paths):
        summary = read_json(p)
        for key in ("rm", "benchmark", "overall"):
            if key not in summary:
                raise ValueError(f"{p}: accuracy JSON lacks {key!r}")
        if pairs_paths is not None and n_boot is not None:
            results = read_jsonl(pairs_paths[i])
            if len(results) != summary["overall"]["n"]:
                raise ValueError(f"{pairs_paths[i]}: {len(results)} pairs but {p} counts {summary['overall']['n']}")
            kind = summary.get("bench_kind")
            summary = summarize(results, summary["rm"], summary["benchmark"], int(n_boot), seed)
            add_official(summary, kind, results, int(n_boot), seed)
        rows.extend(accuracy_rows(summary))
    df = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    level_order = {"overall": 0, "official": 1, "section": 2, "subset": 3}
    df = (df.assign(_lv=df["level"].map(level_order))
          .sort_values(["benchmark", "_lv", "group", "rm"])
          .drop(columns="_lv"))
    write_csv(out_csv, df)
    return df


# ---- the authors' extra reports: accuracy by answer position, score margins ------------------
POSITION_COLUMNS = ["rm", "benchmark", "level", "group", "n_pairs", "n_chosen_a", "acc_chosen_a", "n_chosen_b",
                    "acc_chosen_b", "position_bias", "share_a", "failures"]
MARGIN_COLUMNS = ["rm", "benchmark", "level", "group", "kind", "n", "mean_margin", "ci_low", "ci_high", "failures"]


def _groups(results: Sequence[dict]):
    """("overall", "all") and every subset / section group of the results, in table order."""
    yield "overall", "all", list(results)
    for level in LEVELS:
        groups: dict[str, list] = {}
        for r in results:
            groups.setdefault(r[level], []).append(r)
        for g, rs in sorted(groups.items()):
            yield level, g, rs


def position_stats(results: Sequence[dict]) -> dict:
    """Accuracy by the position of the chosen answer, over every asked order of every pair (one per
    pair without both_orders, as the authors): an order is right when its effective pick (after the
    failure rule) names the chosen answer; an unparseable order left unpredicted (`wrong`) is wrong.
    `position_bias` = |acc_chosen_a - acc_chosen_b| (the authors' evaluation/pairwise.py);
    `share_a` = the share of parsed picks that were "A" (the project's measure); `failures` =
    pairs with an unparseable reply."""
    right = {True: [], False: []}
    picks_a = parsed = 0
    for r in results:
        d = r.get("judge") or {}
        failed = d.get("failed") or [False] * len(d.get("picks") or [])
        for ca, pk, bad in zip(d.get("chosen_is_a") or [], d.get("picks") or [], failed):
            right[bool(ca)].append(pk is not None and (pk == "A") == bool(ca))
            if not bad and pk is not None:
                parsed += 1
                picks_a += int(pk == "A")
    acc = {k: (float(np.mean(v)) if v else None) for k, v in right.items()}
    bias = abs(acc[True] - acc[False]) if acc[True] is not None and acc[False] is not None else None
    return {"n_pairs": len(results), "n_chosen_a": len(right[True]), "acc_chosen_a": acc[True],
            "n_chosen_b": len(right[False]), "acc_chosen_b": acc[False], "position_bias": bias,
            "share_a": picks_a / parsed if parsed else None, "failures": int(sum(r["failure"] for r in results))}


def margin_stats(results: Sequence[dict], n_boot: int, seed: int) -> dict:
    """Mean score(chosen) - score(rejected) over the pairs both of whose scores exist, with a seeded
    bootstrap CI (prbench.stats.bootstrap_ci); `failures` = pairs left out for a missing score."""
    m = np.asarray([r["score_chosen"] - r["score_rejected"] for r in results
                    if r.get("score_chosen") is not None and r.get("score_rejected") is not None], dtype=float)
    est, lo, hi = bootstrap_ci(m, n_boot=n_boot, seed=seed) if m.size else (float("nan"),) * 3
    return {"n": int(m.size), "mean_margin": None if math.isnan(est) else est,
            "ci_low": None if math.isnan(lo) else lo, "ci_high": None if math.isnan(hi) else hi,
            "failures": len(results) - int(m.size)}


def benchmark_reports(acc_paths: Sequence[str | Path], pairs_paths: Sequence[str | Path], position_csv: str | Path,
                      margin_csv: str | Path, n_boot: int, seed: int = 0):
    """`benchmark_position.csv` (pairwise RMs) and `benchmark_margin.csv` (pointwise RMs) from the
    scoring outputs, one row per (rm, benchmark, level, group); which table an RM enters is read from
    its pairs (a pairwise judge's rows carry `judge`) and its kind (the accuracy file's diagnostics): a
    pairwise judge's best-of-n benchmark (RewardBench 2, judged by round robin) enters neither. Returns
    both data frames."""
    import pandas as pd

    if len(pairs_paths) != len(acc_paths):
        raise ValueError(f"benchmark_reports: {len(acc_paths)} accuracy files but {len(pairs_paths)} pairs files")
    pos_rows, margin_rows = [], []
    for acc_path, pairs_path in zip(acc_paths, pairs_paths):
        summary = read_json(acc_path)
        for key in ("rm", "benchmark"):
            if key not in summary:
                raise ValueError(f"{acc_path}: accuracy JSON lacks {key!r}")
        rm, bench = summary["rm"], summary["benchmark"]
        kind = (summary.get("diagnostics") or {}).get("kind") or ""
        results = read_jsonl(pairs_path)
        pairwise = any(isinstance(r.get("judge"), dict) for r in results)  # A/B orders recorded per pair
        if not pairwise and kind == "generative_pairwise":
            # a pairwise judge's best-of-n items (RewardBench 2 by round robin): no A/B order per pair for
            # the position table, and its per-answer scores are win counts, not reward margins
            continue
        for level, g, rs in _groups(results):
            base = {"rm": rm, "benchmark": bench, "level": level, "group": g}
            if pairwise:
                pos_rows.append({**base, **position_stats(rs)})
            else:
                margin_rows.append({**base, "kind": kind,
                                    **margin_stats(rs, n_boot, stable_seed(seed, rm, bench, "margin", level, g))})
    order = {"overall": 0, "section": 1, "subset": 2}
    out = []
    for rows, cols, path in ((pos_rows, POSITION_COLUMNS, position_csv), (margin_rows, MARGIN_COLUMNS, margin_csv)):
        df = pd.DataFrame(rows, columns=cols)
        if len(df):
            df = (df.assign(_lv=df["level"].map(order)).sort_values(["benchmark", "_lv", "group", "rm"])
                  .drop(columns="_lv"))
        write_csv(path, df)
        out.append(df)
    return tuple(out)
