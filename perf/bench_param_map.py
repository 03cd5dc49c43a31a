"""CPU of one config's whole param-key map in one process (tests/param_keys.py, what
tests/test_param_keys.py builds for each of its configs): every leaf key's edits, a DAG each.

    .venv/bin/python perf/bench_param_map.py paper|demo|replica [--out map.json]

Prints the CPU seconds of this process (`time.process_time`: subprocesses such as git are not
counted), the wall seconds, the DAGs built and the keys; --out writes the map (key -> rules, edits,
refusals) as JSON, so two trees' maps can be compared with `cmp`. Results: perf/README.md, "CI time".
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import param_keys  # noqa: E402  (tests/, on the path above)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", choices=sorted(param_keys.CONFIGS))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cfg = yaml.safe_load((REPO / param_keys.CONFIGS[args.config]).read_text())
    count = {"dags": 0}
    build = param_keys.job_params

    def counted(*a, **k):
        count["dags"] += 1
        return build(*a, **k)

    param_keys.job_params = counted
    cpu, wall = time.process_time(), time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        result = param_keys.param_map(cfg, Path(tmp))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    print(f"{args.config}: {cpu:.1f} CPU-s, {wall:.1f} s wall, {count['dags']} DAGs, {len(result)} keys")
    if args.out:
        args.out.write_text(json.dumps({k: [r.rules, r.edits, r.invalid] for k, r in result.items()},
                                       sort_keys=True, indent=0))


if __name__ == "__main__":
    main()
