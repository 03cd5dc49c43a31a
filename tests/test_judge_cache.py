"""The sharded judge cache: concurrent jobs, one writer per shard, nothing lost, the
same results as a serial run; shards cut by a killed job are skipped or repaired, with a warning."""
import json
import logging
import math
import multiprocessing as mp
import time

import pytest

from prbench import judge as J


class HashJudge(J.RubricJudge):
    """Cheap deterministic judge: ratings from the answer's characters; answers with 'bad' are
    unparseable (NaN, 2 failures). A small delay per chunk interleaves concurrent writers."""

    judge_id = "hash-v1"

    def __init__(self, delay=0.0):
        self.delay, self.calls = delay, 0

    def judge(self, items):
        self.calls += len(items)
        time.sleep(self.delay)
        out = []
        for it in items:
            if "bad" in it.answer:
                out.append(J.JudgeResult(float("nan"), [None] * len(it.aspects), 2))
            else:
                r = [(sum(map(ord, it.answer)) + i) % 3 for i in range(len(it.aspects))]
                out.append(J.JudgeResult(sum(r) / len(r), r, 0))
        return out


class NoJudge(J.RubricJudge):
    judge_id = "hash-v1"  # same id: reads HashJudge's entries; must never be asked

    def judge(self, items):
        raise AssertionError(f"cache miss for {len(items)} items")


def _items():
    return [J.JudgeItem(f"question {q}", f"answer {q}-{a}{' bad' if (q + a) % 11 == 0 else ''}",
                        ["aspect one", "aspect two"][: 1 + q % 2]) for q in range(12) for a in range(5)]


def _worker(cache_dir, shard, idx, barrier, out_path, stagger):
    items = _items()
    barrier.wait()  # start together, staggered a little: later jobs read shards being written
    time.sleep(stagger)
    res = J.judge_items_cached(HashJudge(delay=0.01), [items[i] for i in idx], cache_dir, shard, chunk=3)
    with open(out_path, "w") as fh:
        json.dump([[None if math.isnan(r.score) else r.score, r.ratings, r.failures] for r in res], fh)


def _flat(res):
    return [[None if math.isnan(r.score) else r.score, r.ratings, r.failures] for r in res]


def test_concurrent_writers_lose_nothing_and_match_serial(tmp_path):
    items = _items()
    # four jobs over overlapping slices (each item in 2-3 jobs), each with its own shard
    slices = [list(range(0, 35)), list(range(20, 60)), list(range(10, 50)), list(range(0, 60, 2))]
    serial = _flat(J.judge_items_cached(HashJudge(), items, tmp_path / "serial", "one.jsonl"))
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(len(slices))
    cache = tmp_path / "cache"
    procs = [ctx.Process(target=_worker,
                         args=(cache, f"job{i}.jsonl", idx, barrier, tmp_path / f"out{i}.json", 0.03 * i))
             for i, idx in enumerate(slices)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    for i, idx in enumerate(slices):  # each job got exactly the serial results for its items
        got = json.loads((tmp_path / f"out{i}.json").read_text())
        assert got == [serial[j] for j in idx]
    # one shard per job, every line a whole record, and together they hold every item
    assert sorted(p.name for p in cache.iterdir()) == [f"job{i}.jsonl" for i in range(len(slices))]
    keys = set()
    for shard in cache.iterdir():
        data = shard.read_bytes()
        assert data.endswith(b"\n")
        keys |= {json.loads(line)["key"] for line in data.splitlines()}
    assert keys == {J.item_key("hash-v1", it) for it in items}
    # a later job finds everything in the shards, with the serial results (NaNs and failures kept)
    later = _flat(J.judge_items_cached(NoJudge(), items, cache, "later.jsonl"))
    assert later == serial and any(r[0] is None and r[2] == 2 for r in later)
    assert not (cache / "later.jsonl").exists()  # nothing new judged, nothing written
    # the merge does not depend on which shards exist: any single shard plus the rest re-judged agrees
    for shard in sorted(cache.iterdir()):
        solo = tmp_path / f"solo-{shard.stem}"
        solo.mkdir()
        (solo / shard.name).write_bytes(shard.read_bytes())
        assert _flat(J.judge_items_cached(HashJudge(), items, solo, "fill.jsonl")) == serial


def test_killed_job_shard_is_skipped_by_others_and_repaired_by_its_job(tmp_path, caplog):
    items = _items()[:10]
    cache = tmp_path / "cache"
    serial = _flat(J.judge_items_cached(HashJudge(), items, tmp_path / "ref", "ref.jsonl"))
    full = (tmp_path / "ref" / "ref.jsonl").read_bytes().splitlines(keepends=True)
    cache.mkdir()
    # job A was killed mid-write: 4 whole records, then half a line
    (cache / "a.jsonl").write_bytes(b"".join(full[:4]) + full[4][: len(full[4]) // 2])
    # some other shard was damaged in the middle (e.g. a filesystem hiccup): garbage line, then a record
    (cache / "b.jsonl").write_bytes(b"\x00\x00not json\n" + b'{"key": 1}\n' + full[5])
    caplog.set_level(logging.INFO, logger="prbench.judge")
    j = HashJudge()
    res = _flat(J.judge_items_cached(j, items, cache, "c.jsonl"))
    assert res == serial
    assert j.calls == 10 - 5  # records 0-3 (shard a) and 5 (shard b) reused; the rest judged
    assert "2 malformed line(s) ignored" in caplog.text and "partial last line ignored" in caplog.text
    # job A reruns: its partial last record is cut (warned), its whole records reused, the rest appended
    caplog.clear()
    (cache / "c.jsonl").unlink()
    ja = HashJudge()
    assert _flat(J.judge_items_cached(ja, items, cache, "a.jsonl")) == serial
    assert ja.calls == 10 - 5
    assert "dropping a partial last record" in caplog.text
    lines = (cache / "a.jsonl").read_bytes().splitlines()
    assert len(lines) == 4 + 5 and all(json.loads(line)["judge_id"] == "hash-v1" for line in lines)
    assert _flat(J.judge_items_cached(NoJudge(), items, cache, "d.jsonl")) == serial


def test_conflicting_shards_are_resolved_by_name_order_and_logged(tmp_path, caplog):
    item = J.JudgeItem("q", "a", ["x"])
    key = J.item_key("hash-v1", item)
    cache = tmp_path / "cache"
    cache.mkdir()
    for name, score in (("b.jsonl", 2.0), ("a.jsonl", 1.0)):
        (cache / name).write_text(json.dumps({"key": key, "judge_id": "hash-v1", "score": score,
                                              "ratings": [int(score)], "failures": 0}) + "\n")
    caplog.set_level(logging.WARNING, logger="prbench.judge")
    assert J.judge_items_cached(NoJudge(), [item], cache, "c.jsonl")[0].score == 1.0  # a.jsonl first
    assert "1 item(s) judged differently in two shards" in caplog.text


def test_missing_cache_dir_is_created_and_bad_shard_names_refused(tmp_path):
    res = J.judge_items_cached(HashJudge(), _items()[:2], tmp_path / "new" / "cache", "x.jsonl")
    assert len(res) == 2 and (tmp_path / "new" / "cache" / "x.jsonl").exists()
    for bad in ("", "x.sqlite", "../x.jsonl"):
        with pytest.raises(ValueError, match="judge cache: shard"):
            J.judge_items_cached(HashJudge(), _items()[:1], tmp_path / "c", bad)
