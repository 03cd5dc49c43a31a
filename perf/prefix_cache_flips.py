"""How many benchmark pair outcomes change between `prefix_cache` on and off, on the replica run
(configs/replica.yaml: tiny random replicas of the paper's classifier RMs, CPU, float32). Scores the
personalized benchmark with every classifier RM twice in a scratch folder, the second time with
`prefix_cache: false` on every classifier entry (Snakemake reruns exactly the scoring jobs), and
compares each pair's credit and scores. The count is the replica's, not a bf16 8B model's on a GPU.

    .venv/bin/python perf/prefix_cache_flips.py [--workdir /tmp/prefix_flips]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _score(workdir: Path, config: Path, targets: list[str]) -> None:
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--snakefile", str(REPO / "Snakefile"), "--directory",
           str(workdir / "run"), "--configfile", str(config), "--cores", "1", *targets]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="/tmp/prefix_flips")
    args = ap.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cfg = yaml.safe_load((REPO / "configs" / "replica.yaml").read_text())
    rms = [name for name, e in cfg["reward_models"].items() if e.get("kind") == "classifier"]
    targets = [f"results/scores/{rm}/personalized.pairs.jsonl" for rm in rms]
    (work / "on.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    for rm in rms:
        cfg["reward_models"][rm]["prefix_cache"] = False
    (work / "off.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    _score(work, work / "on.yaml", targets)
    on = {rm: _rows(work / "run" / t) for rm, t in zip(rms, targets)}
    diag = {rm: json.loads((work / "run" / f"results/scores/{rm}/personalized.accuracy.json").read_text())
            ["diagnostics"] for rm in rms}
    _score(work, work / "off.yaml", targets)
    total = flips = 0
    for rm, t in zip(rms, targets):
        off = _rows(work / "run" / t)
        assert [r["pair_id"] for r in off] == [r["pair_id"] for r in on[rm]]
        changed = sum(a["credit"] != b["credit"] for a, b in zip(on[rm], off))
        worst = max(max(abs(a["score_chosen"] - b["score_chosen"]), abs(a["score_rejected"] - b["score_rejected"]))
                    for a, b in zip(on[rm], off))
        print(f"{rm} (adapter {diag[rm].get('adapter')}, prefix cache used: {diag[rm].get('prefix_cache')}): "
              f"{changed} of {len(off)} pair outcomes change, largest score difference {worst:.3g}")
        total, flips = total + len(off), flips + changed
    print(f"all classifier replicas: {flips} of {total} pair outcomes change between prefix_cache on and off")


if __name__ == "__main__":
    main()
