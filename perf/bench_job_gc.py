"""The cyclic collector's share of model jobs, with prbench.job.start's settings and without them.

    .venv/bin/python perf/bench_job_gc.py RUN_DIR [TARGET ...] [--config configs/test.yaml] [--rounds 3]

RUN_DIR is a finished run of the config (e.g. `snakemake --directory RUN_DIR --configfile
configs/test.yaml --cores 2`). Each round forces the TARGETs (default: two benchmark scoring jobs, the
judge and one RM's BoN scores, all independent) once with start()'s collector settings ("job") and
once as before them ("default": its gc.disable, gc.freeze and gc.set_threshold calls made no-ops),
alternately. A `sitecustomize` on PYTHONPATH times every collection in every process Snakemake
starts (gc.callbacks) and records the process's CPU. Prints per setting the collector's CPU-s and
the processes' CPU-s (the host's speed varies between runs; the collector's own time is the steady
figure), and checks that both settings write the same bytes. Results: perf/README.md, "CI time".
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from helpers import without_wall_clock  # noqa: E402  (tests/, on the path above)

TARGETS = ["results/scores/pers_profile/general.accuracy.json",
           "results/scores/general_only/personalized.accuracy.json", "results/bon/demo_policy/judged.jsonl",
           "results/bon/demo_policy/rm_scores/pers_profile.jsonl"]

PROBE = '''
import atexit, gc, os, sys, time
if os.environ.get("GC_BENCH_MODE") == "default":  # start()'s collector calls made no-ops: the code before them
    def _skip(fn):
        def call(*a, **k):
            if sys._getframe(1).f_globals.get("__name__") != "prbench.job":
                return fn(*a, **k)
        return call
    gc.disable, gc.freeze, gc.set_threshold = _skip(gc.disable), _skip(gc.freeze), _skip(gc.set_threshold)
_t = [0.0, 0.0, 0]
def _cb(phase, info):
    if phase == "start":
        _t[0] = time.process_time()
    else:
        _t[1] += time.process_time() - _t[0]
        _t[2] += 1
gc.callbacks.append(_cb)
@atexit.register
def _write():
    with open(os.environ["GC_BENCH_OUT"], "a") as fh:
        fh.write(f"{_t[1]:.4f}\\t{_t[2]}\\t{time.process_time():.4f}\\n")
'''


def digest(run: Path, targets: list[str]) -> str:
    """The targets' bytes, a JSON report's wall-clock fields left out (tests/helpers.py)."""
    h = hashlib.sha256()
    for t in targets:
        path = run / t
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:  # a directory output: its files
            if not f.is_file():
                continue
            data = f.read_bytes()
            if f.suffix == ".json":
                data = json.dumps(without_wall_clock(json.loads(data), set()), sort_keys=True).encode()
            h.update(str(f.relative_to(run)).encode() + b"\0" + data)
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("targets", nargs="*", default=TARGETS)
    ap.add_argument("--config", default="configs/test.yaml")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    smk = Path(sys.executable).parent / "snakemake"
    totals = {m: [0.0, 0, 0.0, 0] for m in ("job", "default")}  # gc s, collections, process CPU s, processes
    digests = set()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(PROBE)
        for _ in range(args.rounds):
            for mode in ("default", "job"):
                out = Path(tmp) / f"{mode}.tsv"
                out.unlink(missing_ok=True)
                env = {**os.environ, "GC_BENCH_MODE": mode, "GC_BENCH_OUT": str(out), "HF_HUB_OFFLINE": "1",
                       "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
                       "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")]))}
                proc = subprocess.run([str(smk), "--directory", str(args.run), "--configfile", args.config, "--cores",
                                       "1", "--force", *args.targets], cwd=REPO, env=env, capture_output=True,
                                      text=True)
                if proc.returncode:
                    sys.exit(f"snakemake failed ({mode}):\n{proc.stderr[-3000:]}")
                for line in out.read_text().splitlines():
                    g, n, cpu = line.split("\t")
                    t = totals[mode]
                    t[0] += float(g)
                    t[1] += int(n)
                    t[2] += float(cpu)
                    t[3] += 1
                digests.add(digest(args.run, args.targets))
    for mode, (g, n, cpu, procs) in totals.items():
        print(f"{mode:8s} {procs} processes: collector {g:.2f} CPU-s in {n} collections, processes {cpu:.1f} CPU-s "
              f"({100 * g / cpu:.1f}%)")
    print("outputs: the same bytes under both" if len(digests) == 1 else f"outputs DIFFER: {len(digests)} digests")


if __name__ == "__main__":
    main()
