"""perf/host_speed.py: the fixed probe keeps its pinned sizes, runs each part, keeps the best of the
repeats and appends one JSON line that names the CPU, the sizes and the versions (probes are only
comparable at the same sizes)."""
import importlib.util
import itertools
import json

import pytest
from helpers import REPO

spec = importlib.util.spec_from_file_location("host_speed", REPO / "perf" / "host_speed.py")
hs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hs)


def test_sizes_are_pinned():
    # a change here makes every recorded probe incomparable: perf/README.md's table must be measured anew
    assert (hs.VOCAB, hs.HIDDEN, hs.LAYERS, hs.HEADS) == (2048, 128, 2, 4)
    assert (hs.TRAIN_STEPS, hs.TRAIN_BATCH, hs.TRAIN_LEN) == (24, 16, 256)
    assert (hs.GEN_BATCHES, hs.GEN_ROWS, hs.GEN_PROMPT, hs.GEN_NEW) == (4, 64, 96, 72)
    assert (hs.ENC_SENTENCES, hs.ENC_BATCH) == (512, 64)
    assert sum(p.numel() for p in hs.small_llama().parameters()) == 688_768


@pytest.fixture
def no_thread_change(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the worker's setting stays


def test_probe_records_the_best_run_and_the_cpu(tmp_path, monkeypatch, no_thread_change):
    out = tmp_path / "probe.jsonl"
    # the parts stood in by fixed timings: the recording is what is under test here
    timings = {"train": iter([(3.0, 3.1), (2.0, 2.2), (2.5, 2.4)]), "encode": itertools.repeat((1.0, 1.0))}
    monkeypatch.setattr(hs, "PARTS", {k: (lambda k=k: next(timings[k])) for k in timings})
    rec = hs.main(["--parts", "train", "encode", "--repeats", "3", "--out", str(out)])
    assert rec["parts"]["train"] == {"cpu_s": 2.0, "wall_s": 2.2, "runs_cpu_s": [3.0, 2.0, 2.5]}
    assert rec["total_cpu_s"] == 3.0 and rec["repeats"] == 3
    assert isinstance(rec["cpu"], str) and rec["cpu"]
    assert rec["sizes"]["TRAIN_STEPS"] == 24 and rec["transformers"] and rec["trl"]
    hs.main(["--parts", "encode", "--repeats", "1", "--out", str(out)])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2 and lines[0] == rec and list(lines[1]["parts"]) == ["encode"]


def test_parts_run(monkeypatch):
    """Each part at a reduced size: generation, encoding and the child process's CPU of the imports."""
    monkeypatch.setattr(hs, "GEN_BATCHES", 1)
    monkeypatch.setattr(hs, "GEN_NEW", 4)
    monkeypatch.setattr(hs, "ENC_SENTENCES", 8)
    monkeypatch.setattr(hs, "IMPORTS", "sum(i * i for i in range(3_000_000))")  # CPU in the child, not here
    for part in (hs.part_generate, hs.part_encode, hs.part_imports):
        cpu, wall = part()
        assert cpu > 0 and wall > 0, part.__name__
