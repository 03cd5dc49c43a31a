"""A benchmark scoring job split into parts, for an RM whose one job would outlast a cluster
partition's time limit (`resources.max_runtime_min`, or the RM entry's `benchmark_parts`;
`prbench.plan.resources.benchmark_parts` decides how many).

Part i of n scores the benchmark file's rows [i*L//n, (i+1)*L//n) (`part_rows`, L rows) with the
RM, and writes their per-pair results and the part's counts. The join (rule `score_benchmark` with
parts as its input) checks that the parts cover the file's rows exactly once in order, then computes
the accuracy from all the rows as one job would (`benchmark.finish_benchmark`): the same pairs file
and summary, apart from the counts (summed over the parts) and the RM's diagnostics (`merge_diagnostics`).

What stays the same as one job: a pairwise judge's seeded order. Under `scoring.order_rule:
sequential` one draw is made per comparison in file order, restarted per subset: a part skips the
draws of the rows before it (`order_offsets`). A pointwise RM scores each unique (question, profile,
answer) once per part, so an answer in two parts is scored twice, with the same value up to the
floating-point effect of the batch it lands in.
"""
from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Sequence

from ..config import entry_with_defaults
from ..io import read_json, read_jsonl, write_json, write_jsonl
from . import bestof
from .benchmark import finish_benchmark, is_item, load_pairs, load_rm, timed_scores

log = logging.getLogger("prbench.scoring.parts")


def part_rows(n_rows: int, part: int, parts: int) -> tuple[int, int]:
    """[start, stop) of part `part` (0-based) of `parts` over n_rows rows: contiguous, in file order."""
    if not 0 <= part < parts:
        raise ValueError(f"part {part} of {parts}: parts are numbered 0..{parts - 1}")
    return part * n_rows // parts, (part + 1) * n_rows // parts


def order_offsets(rows: Sequence[dict]) -> dict[str, int]:
    """Per subset, the comparisons a pairwise judge makes for `rows` (the rows before a part): one
    per pair, or per best-of-n item its round robin (`bestof.round_robin`)."""
    out: Counter = Counter()
    for r in rows:
        out[r["subset"]] += len(bestof.round_robin(len(r["chosen"]) + len(r["rejected"]))) if is_item(r) else 1
    return dict(out)


def score_part(bench_path: str | Path, spec: dict, part: int, parts: int, pairs_out: str | Path,
               info_out: str | Path, bench: str, seed: int = 0, scoring: dict | None = None, rm=None) -> dict:
    """Score part `part` of `parts` of one benchmark with one RM: its rows' results (pairs_out) and
    {"part", "parts", "start", "stop", "rows", "scoring", "diagnostics", "pairwise"} (info_out)."""
    scoring = entry_with_defaults(scoring or {}, "scoring")
    rows = load_pairs(bench_path)
    start, stop = part_rows(len(rows), part, parts)
    rm = load_rm(spec, scoring, seed) if rm is None else rm
    log.info("RM %s (%s) on %s, part %d of %d: rows %d-%d of %d from %s", spec.get("name"), spec.get("kind"),
             bench, part + 1, parts, start, stop, len(rows), bench_path)
    results, info = timed_scores(rm, rows[start:stop], order_offsets(rows[:start]))
    meta = {"part": part, "parts": parts, "start": start, "stop": stop, "rows": len(rows), "scoring": info,
            "diagnostics": rm.diagnostics(), "pairwise": bool(getattr(rm, "pairwise", False))}
    write_jsonl(pairs_out, results)
    write_json(info_out, meta)
    return meta


def merge_diagnostics(parts: Sequence[dict]) -> dict:
    """One job's diagnostics from its parts': a value every part agrees on is kept, integer counts
    are summed, anything else (rates, lists) is listed per part; "parts" = how many."""
    keys = list(dict.fromkeys(k for d in parts for k in d))
    out: dict = {}
    for k in keys:
        vals = [d.get(k) for d in parts]
        if all(v == vals[0] for v in vals):
            out[k] = vals[0]
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            out[k] = sum(vals)
        else:
            out[k] = {"per_part": vals}
    out["parts"] = len(parts)
    return out


def merge_parts(bench_path: str | Path, part_pairs: Sequence[str | Path], part_infos: Sequence[str | Path],
                spec: dict, pairs_out: str | Path, acc_out: str | Path, bench: str, seed: int = 0,
                scoring: dict | None = None, bench_kind: str | None = None) -> dict:
    """Join a split job's parts into the pairs jsonl and accuracy JSON one job writes. Refuses parts
    that do not cover the benchmark file's rows exactly once in file order, naming the part file."""
    scoring = entry_with_defaults(scoring or {}, "scoring")
    rows = load_pairs(bench_path)
    if len(part_pairs) != len(part_infos) or not part_pairs:
        raise ValueError(f"{bench}: {len(part_pairs)} part pairs files and {len(part_infos)} part info files")
    results: list[dict] = []
    metas = []
    for i, (pp, ip) in enumerate(zip(part_pairs, part_infos)):
        meta, got = read_json(ip), read_jsonl(pp)
        start, stop = part_rows(len(rows), i, len(part_pairs))
        want = [r["pair_id"] for r in rows[start:stop]]
        if (meta.get("part"), meta.get("parts"), meta.get("rows")) != (i, len(part_pairs), len(rows)):
            raise ValueError(f"{ip}: part {meta.get('part')} of {meta.get('parts')} over {meta.get('rows')} rows, "
                             f"expected part {i} of {len(part_pairs)} over the {len(rows)} rows of {bench_path}")
        if [r.get("pair_id") for r in got] != want:
            raise ValueError(f"{pp}: its pair_ids are not rows {start}-{stop} of {bench_path} in file order "
                             f"({len(got)} rows, {len(want)} expected)")
        results += got
        metas.append(meta)
    # the counts summed over the parts, in one job's key order
    info = {k: sum(m["scoring"].get(k, 0) for m in metas) for k in metas[0]["scoring"]}
    info["seconds"] = round(info["seconds"], 3)  # every part's counts have it (benchmark.timed_scores)
    info["parts"] = len(metas)
    log.info("%s: %d parts joined, %d rows", bench, len(metas), len(results))
    return finish_benchmark(results, info, merge_diagnostics([m["diagnostics"] for m in metas]), spec["name"],
                            bench, scoring, seed, bench_kind, pairs_out, acc_out,
                            pairwise=any(m["pairwise"] for m in metas))
