"""The judge cache: each unique (judge id, question, answer, aspects) is judged once across RMs,
k values, policies and reruns.

The cache is a folder of append-only JSONL shards, one per job (named after the job's output,
`shard_name`): a job reads every shard and writes only its own, so no file ever has two writers
and no locks are needed (safe on a cluster's shared filesystem, where sqlite locking is not).
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Sequence

from ..io import json_sha256
from .base import JudgeItem, JudgeResult, RubricJudge, log

DEFAULT_CACHE_DIR = "results/cache/judge"
_RECORD_FIELDS = ("key", "judge_id", "score", "ratings", "failures")


def item_key(judge_id: str, item: JudgeItem) -> str:
    # json.dumps' settings of every existing key (unsorted, no default): the cache depends on them
    return json_sha256([judge_id, item.question, item.answer, list(item.aspects)], sort_keys=False, default=None)


def shard_name(out_path: str | Path) -> str:
    """The cache shard a job writes, named after the job's output path (Snakemake runs at most one
    job per output at a time, so each shard has one writer): results/bon/p/judged.jsonl ->
    results+bon+p+judged.jsonl."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "+", Path(out_path).with_suffix("").as_posix()).strip("+")
    if not name:
        raise ValueError(f"judge cache: cannot name a shard after output {out_path!r}")
    return f"{name}.jsonl"


def _parse_record(line: bytes) -> dict | None:
    """One cache record, or None for a line that is not a complete, well-formed record."""
    try:
        rec = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(rec, dict) or any(f not in rec for f in _RECORD_FIELDS):
        return None
    if not isinstance(rec["key"], str) or not isinstance(rec["ratings"], list) or not isinstance(rec["failures"], int):
        return None
    if rec["score"] is not None and not isinstance(rec["score"], (int, float)):
        return None
    return rec


def _read_shard(path: Path, wanted: set[str]) -> tuple[dict[str, dict], int, bool]:
    """Records of `wanted` keys in one shard: ({key: record}, bad complete lines, partial tail?).

    Only complete lines (ending in a newline) are read; a trailing partial line is a record being
    written right now, or the last one of a killed job."""
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    partial = cut < len(data)
    out, bad = {}, 0
    for line in data[:cut].split(b"\n"):
        if not line.strip():
            continue
        rec = _parse_record(line)
        if rec is None:
            bad += 1
        elif rec["key"] in wanted and rec["key"] not in out:
            out[rec["key"]] = rec
    return out, bad, partial


def _recover_own_shard(path: Path) -> None:
    """Before appending: cut a partial last line (left by a killed run of this job) so that the
    next record starts on a line of its own. Only this job writes this shard."""
    if not path.exists():
        return
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    if cut < len(data):
        log.warning("judge cache %s: dropping a partial last record (%d bytes) left by an interrupted run",
                    path, len(data) - cut)
        with open(path, "r+b") as fh:
            fh.truncate(cut)


def _as_result(rec: dict) -> JudgeResult:
    s = rec["score"]
    # records written before the `failed` field: a failure was always NaN (judge.failure exclude)
    failed = bool(rec.get("failed", s is None))
    return JudgeResult(float("nan") if s is None else float(s), list(rec["ratings"]), int(rec["failures"]), failed)


def read_cache(cache_dir: str | Path, keys: set[str]) -> dict[str, JudgeResult]:
    """Every record of `keys` in the shards of `cache_dir` (read-only, no locks).

    Shards are read in name order and the first record of a key wins; keys are content-addressed
    (judge id with model revision and dtype, question, answer, aspects), so shards agree unless
    the judge is not deterministic - such conflicts are counted and logged. Malformed lines and
    partial last lines (a job killed mid-write, or writing now) are skipped and logged."""
    found: dict[str, dict] = {}
    conflicts = 0
    cdir = Path(cache_dir)
    for path in sorted(cdir.glob("*.jsonl")) if cdir.is_dir() else []:
        try:
            recs, bad, partial = _read_shard(path, keys)
        except OSError as exc:
            log.warning("judge cache %s: unreadable (%s), ignored", path, exc)
            continue
        if bad:
            log.warning("judge cache %s: %d malformed line(s) ignored (an interrupted write?)", path, bad)
        if partial:
            log.info("judge cache %s: partial last line ignored (being written, or left by a killed job)", path)
        for k, rec in recs.items():
            if k not in found:
                found[k] = rec
            elif ([found[k].get(f) for f in ("score", "ratings", "failures", "failed")]
                  != [rec.get(f) for f in ("score", "ratings", "failures", "failed")]):
                conflicts += 1
    if conflicts:
        log.warning("judge cache %s: %d item(s) judged differently in two shards (a nondeterministic judge?); "
                    "the first shard in name order is used", cdir, conflicts)
    return {k: _as_result(rec) for k, rec in found.items()}


def _record_line(key: str, judge_id: str, r: JudgeResult) -> str:
    return json.dumps({"key": key, "judge_id": judge_id, "score": None if math.isnan(r.score) else r.score,
                       "ratings": r.ratings, "failures": r.failures, "failed": bool(r.failed)},
                      ensure_ascii=False) + "\n"


def _judge_into_shard(judge: RubricJudge, todo: dict[str, JudgeItem], own: Path, chunk: int,
                      cached: dict[str, JudgeResult]) -> None:
    """Judge `todo` ({key: item}) chunk by chunk, appending one fsynced line per item to the
    job's own shard `own` after each chunk, and add the results to `cached`."""
    own.parent.mkdir(parents=True, exist_ok=True)
    _recover_own_shard(own)
    todo_items = list(todo.items())
    with open(own, "ab") as fh:
        for b in range(0, len(todo_items), chunk):
            part = todo_items[b:b + chunk]
            res = judge.judge([it for _, it in part])
            if len(res) != len(part):
                raise RuntimeError(f"judge {judge.judge_id}: {len(res)} results for {len(part)} items")
            fh.write("".join(_record_line(k, judge.judge_id, r) for (k, _), r in zip(part, res)).encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
            for (k, _), r in zip(part, res):
                cached[k] = JudgeResult(r.score, list(r.ratings), r.failures, r.failed)


def judge_items_cached(judge: RubricJudge, items: Sequence[JudgeItem], cache_dir: str | Path,
                       shard: str, chunk: int = 2048) -> list[JudgeResult]:
    """Judge items through the sharded cache: each unique (judge, question, answer, aspects) once.

    Reads every shard in `cache_dir` (read-only) and appends what it judges to its own shard
    `cache_dir/shard` only, one flushed and fsynced line per item after each chunk, so concurrent
    jobs never write the same file and a killed job keeps every finished chunk. Unparseable
    results (NaN) are cached too, so reruns are identical; their failure counts are returned every
    time (they stay reported)."""
    if not shard or Path(shard).name != shard or not shard.endswith(".jsonl"):
        raise ValueError(f"judge cache: shard must be a file name ending in .jsonl, got {shard!r}")
    keys = [item_key(judge.judge_id, it) for it in items]
    uniq = list(dict.fromkeys(keys))
    cached = read_cache(cache_dir, set(uniq))
    todo = {}
    for k, it in zip(keys, items):
        if k not in cached and k not in todo:
            todo[k] = it
    log.info("judge %s: %d items, %d unique, %d cached, %d to judge (cache shard %s/%s)", judge.judge_id,
             len(items), len(uniq), len(uniq) - len(todo), len(todo), cache_dir, shard)
    if todo:
        hook = getattr(judge, "use_cache_dir", None)  # RubricJudge's; a duck-typed judge may lack it
        if hook is not None:
            hook(cache_dir)
        _judge_into_shard(judge, todo, Path(cache_dir) / shard, chunk, cached)
    return [JudgeResult(cached[k].score, list(cached[k].ratings), cached[k].failures, cached[k].failed)
            for k in keys]
