"""Speed of the correlation stage at demo scale and beyond (target: well under a minute
on 2 cores for 1000 bootstraps x ~7 RMs x every benchmark score x every downstream measure).

    OMP_NUM_THREADS=1 .venv/bin/python perf/correlation_speed.py [--rms 7] [--boot 1000]
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from synthetic_analysis import RMS, write_world  # noqa: E402

from prbench.analysis.correlation import collect, correlate  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rms", type=int, default=7)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--perm", type=int, default=1000)
    args = ap.parse_args()
    rms = (RMS + [f"extra_rm{i}" for i in range(args.rms)])[: args.rms]
    with tempfile.TemporaryDirectory() as d:
        w = write_world(d, rms=rms, pairs_per_subset=150, eval_per_subset=60, general_pairs=300)
        t0 = time.perf_counter()
        col = collect(w["rms"], w["pair_files"], w["downstream"])
        t1 = time.perf_counter()
        res = correlate(col, n_boot=args.boot, n_perm=args.perm)
        t2 = time.perf_counter()
    n_pairs = len(col.benchmarks) * len(col.downstream)
    print(f"{len(rms)} RMs, {len(col.benchmarks)} benchmark scores x {len(col.downstream)} downstream measures "
          f"= {n_pairs} pairs x 5 coefficients, {args.boot} bootstraps, {args.perm} permutations")
    print(f"read inputs: {t1 - t0:.2f} s; bootstrap + coefficients + permutations: {t2 - t1:.2f} s; "
          f"{len(res.table)} rows")


if __name__ == "__main__":
    main()
