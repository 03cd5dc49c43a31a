"""The demo policy's SFT in one precision: what the job costs in float32 (what a CPU without native bf16,
such as the family-23 "AMD EPYC", runs) against this host's own choice (`native_bf16`: bf16 autocast
where oneDNN computes bf16), on the same host. One run per process, so each precision pays its own
imports, as the demo's job does.

    OMP_NUM_THREADS=1 .venv/bin/python perf/sft_precision.py fp32 --train <run>/results/data/train/personalized.jsonl
    OMP_NUM_THREADS=1 .venv/bin/python perf/sft_precision.py native --train <run>/results/data/train/personalized.jsonl

Prints the precision, the process's CPU seconds (user + system), wall seconds, the steps and the
training loss; `--epochs` overrides configs/demo.yaml's demo_training.policy.epochs.
"""
from __future__ import annotations

import argparse
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("precision", choices=["fp32", "native"])
    ap.add_argument("--train", default="results/data/train/personalized.jsonl")
    ap.add_argument("--epochs", type=float, default=None)
    args = ap.parse_args()

    import yaml

    from prbench.training import policy as pol

    if args.precision == "fp32":
        pol.native_bf16 = lambda: False  # the trainings' precision rule, as on a CPU without native bf16
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())["demo_training"]["policy"]
    if args.epochs is not None:
        cfg["epochs"] = args.epochs
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        rep = pol.train_demo_policy(args.train, tmp, cfg, seed=0, threads=1)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{args.precision}: {ru.ru_utime + ru.ru_stime:.1f} CPU-s, {time.time() - t0:.1f} s wall, "
          f"bf16 autocast {rep['bf16_autocast']}, {rep['steps']} steps, train loss {rep['train_loss']:.4f} "
          f"({platform.processor() or platform.machine()})")


if __name__ == "__main__":
    main()
