"""Speed target: the demo data stage (demo_world + prepare_*) in under 2 minutes on 2 cores.

Runs the three data rules in a throw-away copy of the checkout (so it neither locks nor
touches the working tree's results/) and prints the wall time and each job's benchmark row.
Usage: .venv/bin/python perf/data_stage_speed.py [--limit 120]
"""
import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = ["results/data/reports/personalized.json", "results/data/reports/general.json"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=float, default=120.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "wt"
        shutil.copytree(REPO, wt, ignore=shutil.ignore_patterns(".venv", "results", ".snakemake", "logs",
                                                                  "job_times", ".git"))
        smk = Path(sys.executable).parent / "snakemake"
        t = time.time()
        subprocess.run([str(smk), "--cores", "2", *TARGETS, "--configfile", "configs/demo.yaml"], cwd=wt, check=True,
                       capture_output=True)
        wall = time.time() - t
        for f in sorted((wt / "job_times" / "data").glob("*.tsv")):
            print(f.stem, f.read_text().splitlines()[-1].split("\t")[0], "s")
    print(f"data stage wall time: {wall:.1f} s (limit {args.limit:.0f} s)")
    sys.exit(0 if wall < args.limit else 1)


if __name__ == "__main__":
    main()
