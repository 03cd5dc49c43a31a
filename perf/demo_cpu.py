"""Exact CPU seconds per job of a Snakemake run, and Snakemake's own: per-process accounting.

    .venv/bin/python perf/demo_cpu.py run LOG -- .venv/bin/snakemake --cores 2 --profile profiles/demo
    .venv/bin/python perf/demo_cpu.py summary LOG [--by script|stage]

`run` starts the command with PRB_CPU_LOG=LOG and perf/cpu_accounting/ first on PYTHONPATH, so every
Python process of the run (Snakemake, each job's script) appends its own user + system CPU seconds
to LOG at exit (perf/cpu_accounting/sitecustomize.py); then it prints the summary. `summary` groups a
log's processes by job script (the workflow_scripts/ file a job ran) or by stage, and gives
Snakemake's own CPU apart. Unlike Snakemake's `cpu_time` (sampled, so short jobs and the first
seconds of a job read low), these are the kernel's counts for each process; a process killed
before it exits is missing (the count of processes is printed).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
# job script -> stage (perf/README.md, "The demo's wall time"); unlisted scripts are their own stage
STAGES = {
    "train_demo_policy": "the policy's SFT", "train_ppo": "PPO training", "train_grpo": "GRPO training",
    "eval_policy": "policy evaluation (PPO, GRPO) and base answers", "base_answers":
        "policy evaluation (PPO, GRPO) and base answers",
    "sample_bon": "BoN", "merge_samples": "BoN", "score_bon": "BoN", "score_bon_family": "BoN",
    "judge_bon": "BoN", "bon_table": "BoN", "bon_measures": "BoN",
    "score_benchmark": "benchmark scoring", "score_benchmark_part": "benchmark scoring",
    "accuracy_table": "benchmark scoring", "benchmark_reports": "benchmark scoring",
    "train_demo_rm": "the RMs' training", "rm_family": "the RMs' training",
    "calibrate_judge": "the judge's calibration and validity", "judge_validity":
        "the judge's calibration and validity",
    "demo_world": "data", "prepare_personalized": "data", "prepare_baseline": "data",
    "correlations": "analysis", "null_world": "analysis", "figures": "analysis", "leaderboard": "analysis",
    "manifest": "analysis", "missing_rms": "analysis", "policy_table": "analysis", "claim_table": "analysis",
    "judged_measures": "analysis",
}
SNAKEMAKE = "Snakemake itself"


def script_of(argv: list[str]) -> str:
    """The job script a process ran (Snakemake copies it to .snakemake/scripts/tmpXXXX.<name>.py),
    Snakemake for its own process, else the first argument."""
    joined = " ".join(argv)
    m = re.search(r"tmp[^/.]+\.(\w+)\.py", joined)
    if m:
        return m.group(1)
    if argv and Path(argv[0]).name == "snakemake" or "snakemake" in joined.split(" ")[0]:
        return SNAKEMAKE
    return Path(argv[0]).name if argv else "?"


def summarize(log: str | os.PathLike, by: str = "stage") -> list[tuple[str, int, float]]:
    """(group, processes, CPU seconds) by group, largest first."""
    groups: dict[str, list] = defaultdict(lambda: [0, 0.0])
    with open(log, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                rec = json.loads(line)
                name, cpu = script_of(rec["argv"]), float(rec["cpu"])
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(f"{log}, line {n}: not a record of perf/cpu_accounting ({e})") from e
            key = STAGES.get(name, name) if by == "stage" and name != SNAKEMAKE else name
            groups[key][0] += 1
            groups[key][1] += cpu
    return sorted(((k, v[0], v[1]) for k, v in groups.items()), key=lambda r: -r[2])


def print_summary(log, by: str) -> None:
    rows = summarize(log, by)
    total = sum(r[2] for r in rows)
    width = max(len(r[0]) for r in rows)
    for name, n, cpu in rows:
        print(f"{name:<{width}}  {n:>4} processes  {cpu:8.1f} CPU-s  {100 * cpu / total:5.1f}%")
    print(f"{'all Python processes':<{width}}  {sum(r[1] for r in rows):>4} processes  {total:8.1f} CPU-s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the command after -- with per-process accounting, then summarize")
    r.add_argument("log")
    r.add_argument("--by", choices=["script", "stage"], default="stage")
    s = sub.add_parser("summary", help="summarize a log")
    s.add_argument("log")
    s.add_argument("--by", choices=["script", "stage"], default="stage")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    a, command = ap.parse_args(argv[:cut]), argv[cut + 1:]
    if a.cmd == "run":
        if not command:
            ap.error("run: give the command after --")
        if os.path.exists(a.log):
            ap.error(f"run: {a.log} exists; give a new log file")
        env = dict(os.environ, PRB_CPU_LOG=os.path.abspath(a.log),
                   PYTHONPATH=os.pathsep.join([str(HERE / "cpu_accounting")]
                                              + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        rc = subprocess.call(command, env=env)
        if os.path.exists(a.log):
            print_summary(a.log, a.by)
        return rc
    print_summary(a.log, a.by)
    return 0


if __name__ == "__main__":
    sys.exit(main())
