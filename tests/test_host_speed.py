"""perf/host_speed.py: the fixed probe runs its parts, keeps the best of the repeats and appends one JSON
line that names the CPU (the probe's numbers are only comparable when the sizes stay fixed)."""
import importlib.util
import itertools
import json

from helpers import REPO

spec = importlib.util.spec_from_file_location("host_speed", REPO / "perf" / "host_speed.py")
hs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hs)


def test_probe_records_the_best_run_and_the_cpu(tmp_path, monkeypatch):
    out = tmp_path / "probe.jsonl"
    # the parts themselves are stood in by fixed timings: the recording is what is under test here
    timings = {"train": iter([(3.0, 3.1), (2.0, 2.2), (2.5, 2.4)]), "encode": itertools.repeat((1.0, 1.0))}
    monkeypatch.setattr(hs, "PARTS", {k: (lambda k=k: next(timings[k])) for k in timings})
    rec = hs.main(["--parts", "train", "encode", "--repeats", "3", "--out", str(out)])
    assert rec["parts"]["train"] == {"cpu_s": 2.0, "wall_s": 2.2, "runs_cpu_s": [3.0, 2.0, 2.5]}
    assert rec["total_cpu_s"] == 3.0
    assert isinstance(rec["cpu"], str) and rec["cpu"]
    hs.main(["--parts", "encode", "--repeats", "1", "--out", str(out)])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2 and lines[0] == rec and list(lines[1]["parts"]) == ["encode"]


def test_generate_part_runs_at_its_pinned_size(monkeypatch):
    monkeypatch.setattr(hs, "GEN_BATCHES", 1)
    monkeypatch.setattr(hs, "GEN_NEW", 4)
    cpu, wall = hs.part_generate()
    assert cpu > 0 and wall > 0
