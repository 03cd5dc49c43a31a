"""Where a finished demo run spent its time: every job's benchmark file (job_times/**/*.tsv).

    .venv/bin/python perf/demo_job_seconds.py [RUN_DIR] [--top 25]

Prints the jobs by CPU seconds (Snakemake's `cpu_time`; on a loaded machine `s`, the wall time,
mixes in waiting for the other jobs), the totals, and the floor of the demo's wall time on an idle
2-core machine: half the job seconds (two one-thread jobs at a time), which the critical path
(demo_world -> prepare_personalized -> train_demo_policy -> BoN / PPO -> tables) does not exceed
while it stays under half the total.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path


def job_times(run_dir: Path) -> list[tuple[str, float, float]]:
    rows = []
    for f in sorted((run_dir / "job_times").rglob("*.tsv")):
        with f.open(encoding="utf-8") as fh:
            recs = list(csv.DictReader(fh, delimiter="\t"))
        if not recs:
            raise ValueError(f"{f}: no benchmark row")
        last = recs[-1]
        try:
            rows.append((str(f.relative_to(run_dir / "job_times").with_suffix("")), float(last["s"]),
                         float(last["cpu_time"])))
        except (KeyError, ValueError) as e:
            raise ValueError(f"{f}: no numeric 's' and 'cpu_time' columns ({e})") from e
    if not rows:
        raise SystemExit(f"{run_dir / 'job_times'}: no benchmark files")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?", default=".", type=Path)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args(argv)
    rows = sorted(job_times(a.run_dir), key=lambda r: -r[2])
    print(f"{'job':55s} {'wall s':>8s} {'cpu s':>8s}")
    for name, s, cpu in rows[: a.top]:
        print(f"{name:55s} {s:8.1f} {cpu:8.1f}")
    wall, cpu = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{len(rows)} jobs: {wall:.0f} job-seconds (wall), {cpu:.0f} CPU seconds; "
          f"idle 2-core floor ~ {cpu / 2 / 60:.1f} min (CPU seconds / 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
