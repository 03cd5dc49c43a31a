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
# stage -> its job scripts (perf/README.md, "The demo's wall time"); unlisted scripts are their own stage
STAGE_SCRIPTS = {
    "the policy's SFT": ("train_demo_policy",),
    "PPO training": ("train_ppo",),
    "GRPO training": ("train_grpo",),
    "policy evaluation (PPO, GRPO) and base answers": ("eval_policy", "base_answers"),
    "BoN": ("sample_bon", "merge_samples", "score_bon", "score_bon_family", "judge_bon", "bon_table", "bon_measures"),
    "benchmark scoring": ("score_benchmark", "score_benchmark_part", "accuracy_table", "benchmark_reports"),
    "the RMs' training": ("train_demo_rm", "rm_family"),
    "the judge's calibration and validity": ("calibrate_judge", "judge_validity"),
    "data": ("demo_world", "prepare_personalized", "prepare_baseline"),
    "analysis": ("correlations", "null_world", "figures", "leaderboard", "manifest", "missing_rms", "policy_table",
                 "claim_table", "judged_measures"),
}
STAGES = {script: stage for stage, scripts in STAGE_SCRIPTS.items() for script in scripts}
SNAKEMAKE = "Snakemake itself"


def script_of(argv: list[str]) -> str:
    """The job script a process ran (Snakemake copies it to .snakemake/scripts/tmpXXXX.<name>.py),
    Snakemake for its own process, else the first argument."""
    joined = " ".join(argv)
    m = re.search(r"tmp[^/.]+\.(\w+)\.py", joined)
    if m:
        return m.group(1)
    if argv and "snakemake" in Path(argv[0]).name:
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
    if not rows:
        raise SystemExit(f"{log}: no process records (did the command run Python with PRB_CPU_LOG set?)")
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
