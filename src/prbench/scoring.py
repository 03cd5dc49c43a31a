"""Benchmark scoring: accuracy of one RM on one benchmark, and the tidy table over all of them.

Pointwise RMs score every unique response once (a pair's chosen and rejected are two rows;
identical (question, profile, answer) triples are scored once), then the scores are regrouped
into pairs. Pairwise RMs (`rm.pairwise`) call `compare()` on the pairs directly. A pair is
correct only when the chosen answer is strictly preferred: ties and failures (NaN scores,
unparseable judge output) count as wrong and are reported separately.
"""
from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .io import iter_jsonl, read_json, write_csv, write_json, write_jsonl
from .prompts import PairRequest, ScoreRequest
from .seeding import stable_seed
from .stats import bootstrap_ci

log = logging.getLogger("prbench.scoring")

PAIR_FIELDS = {"pair_id": str, "subset": str, "section": str, "question_id": str, "question": str,
               "profile": list, "chosen": str, "rejected": str}
LEVELS = ("subset", "section")
TABLE_COLUMNS = ["rm", "benchmark", "level", "group", "n", "correct", "ties", "failures", "accuracy",
                 "ci_low", "ci_high"]


def load_pairs(path: str | Path) -> list[dict]:
    """Canonical benchmark pairs; a missing or mistyped field raises naming file, line and field."""
    rows, seen = [], set()
    for lineno, row in enumerate(iter_jsonl(path), 1):
        for key, typ in PAIR_FIELDS.items():
            if key not in row:
                raise ValueError(f"{path}: row {lineno}: missing field {key!r}")
            if not isinstance(row[key], typ):
                raise ValueError(f"{path}: row {lineno}: field {key!r} must be {typ.__name__}, "
                                 f"got {type(row[key]).__name__}")
        if not all(isinstance(p, str) for p in row["profile"]):
            raise ValueError(f"{path}: row {lineno}: field 'profile' must be a list of strings")
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


def score_pairs(rm, rows: Sequence[dict]) -> tuple[list[dict], dict]:
    """Per-pair results (the `.pairs.jsonl` rows) and counts of what was scored."""
    info: dict = {"pairs": len(rows)}
    extra: list[dict] = [{} for _ in rows]
    if getattr(rm, "pairwise", False):
        out = rm.compare([PairRequest(r["question"], r["chosen"], r["rejected"], tuple(r["profile"]),
                                      tuple(r.get("profile_categories", ()))) for r in rows])
        prefs = np.asarray(out.prefs, dtype=float)
        sc, sr = prefs, 1.0 - prefs
        for e, d in zip(extra, out.details or [{}] * len(rows)):
            if d:
                e["judge"] = d
        info["judge_calls"] = sum(len(d.get("raw", [])) for d in (out.details or []))
    else:
        index: dict[tuple, int] = {}
        reqs: list[ScoreRequest] = []
        slots = []
        for r in rows:
            pair_slots = []
            for ans in (r["chosen"], r["rejected"]):
                key = (r["question"], tuple(r["profile"]), ans)
                if key not in index:
                    index[key] = len(reqs)
                    reqs.append(ScoreRequest(r["question"], ans, tuple(r["profile"]), tuple(r.get("profile_categories", ()))))
                pair_slots.append(index[key])
            slots.append(pair_slots)
        info["responses"] = 2 * len(rows)
        info["unique_responses"] = len(reqs)
        out = rm.score(reqs)
        scores = np.asarray(out.scores, dtype=float)
        if scores.shape != (len(reqs),):
            raise RuntimeError(f"RM {rm.name}: score() returned {scores.shape} scores for {len(reqs)} requests")
        sc = np.asarray([scores[a] for a, _ in slots])
        sr = np.asarray([scores[b] for _, b in slots])
        prefs = np.asarray([_pref(c, r) for c, r in zip(sc, sr)])
        if out.raw is not None:
            for e, (a, b) in zip(extra, slots):
                e["raw_chosen"], e["raw_rejected"] = out.raw[a], out.raw[b]
    results = []
    for r, c, rj, p, e in zip(rows, sc, sr, prefs, extra):
        failure = bool(math.isnan(p))
        results.append({
            "pair_id": r["pair_id"], "question_id": r["question_id"], "subset": r["subset"],
            "section": r["section"], "score_chosen": _num(c), "score_rejected": _num(rj),
            "pref": None if failure else float(p), "correct": bool((not failure) and p == 1.0),
            "tie": bool((not failure) and p == 0.5), "failure": failure, **e,
        })
    return results, info


def group_stats(results: Sequence[dict], n_boot: int, seed: int) -> dict:
    correct = np.asarray([r["correct"] for r in results], dtype=float)
    acc, lo, hi = bootstrap_ci(correct, n_boot=n_boot, seed=seed)
    return {"n": len(results), "correct": int(correct.sum()), "ties": int(sum(r["tie"] for r in results)),
            "failures": int(sum(r["failure"] for r in results)), "accuracy": acc,
            "ci_low": None if math.isnan(lo) else lo, "ci_high": None if math.isnan(hi) else hi}


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


def score_benchmark(bench_path: str | Path, spec: dict, pairs_out: str | Path, acc_out: str | Path,
                    bench: str, seed: int = 0, scoring: dict | None = None, rm=None) -> dict:
    """Score one benchmark with one RM; write the per-pair jsonl and the accuracy JSON."""
    from .rms import load_reward_model

    scoring = scoring or {}
    rows = load_pairs(bench_path)
    if rm is None:
        run_spec = dict(spec)
        run_spec.setdefault("seed", seed)
        run_spec.setdefault("max_length", scoring.get("max_length", 4096))
        run_spec.setdefault("max_tokens_per_batch", scoring.get("max_tokens_per_batch", 16384))
        rm = load_reward_model(run_spec)
    log.info("RM %s (%s) on %s: %d pairs from %s", spec.get("name"), spec.get("kind"), bench, len(rows), bench_path)
    t0 = time.perf_counter()
    results, info = score_pairs(rm, rows)
    info["seconds"] = round(time.perf_counter() - t0, 3)
    summary = summarize(results, spec.get("name", rm.name), bench, int(scoring.get("bootstrap", 1000)), seed)
    summary["scoring"] = info
    summary["diagnostics"] = rm.diagnostics()
    o = summary["overall"]
    log.info("accuracy %.4f [%s, %s] n=%d correct=%d ties=%d failures=%d (%.1fs)", o["accuracy"], o["ci_low"],
             o["ci_high"], o["n"], o["correct"], o["ties"], o["failures"], info["seconds"])
    if o["failures"]:
        log.warning("%d of %d pairs failed (unparseable or NaN scores); counted as wrong", o["failures"], o["n"])
    log.info("diagnostics: %s", summary["diagnostics"])
    write_jsonl(pairs_out, results)
    write_json(acc_out, summary)
    return summary


def accuracy_rows(summary: dict) -> list[dict]:
    rows = []
    base = {"rm": summary["rm"], "benchmark": summary["benchmark"]}
    rows.append({**base, "level": "overall", "group": "all", **_stats_cols(summary["overall"])})
    for level in LEVELS:
        for g, st in summary.get(level, {}).items():
            rows.append({**base, "level": level, "group": g, **_stats_cols(st)})
    return rows


def _stats_cols(st: dict) -> dict:
    return {k: st[k] for k in ("n", "correct", "ties", "failures", "accuracy", "ci_low", "ci_high")}


def accuracy_table(acc_paths: Sequence[str | Path], out_csv: str | Path):
    """The tidy `benchmark_accuracy.csv`: one row per (rm, benchmark, level, group)."""
    import pandas as pd

    rows = []
    for p in acc_paths:
        summary = read_json(p)
        for key in ("rm", "benchmark", "overall"):
            if key not in summary:
                raise ValueError(f"{p}: accuracy JSON lacks {key!r}")
        rows.extend(accuracy_rows(summary))
    df = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    level_order = {"overall": 0, "section": 1, "subset": 2}
    df = df.assign(_lv=df["level"].map(level_order)).sort_values(["benchmark", "_lv", "group", "rm"]).drop(columns="_lv")
    write_csv(out_csv, df)
    return df
