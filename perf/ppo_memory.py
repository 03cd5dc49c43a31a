"""Memory plan of the PPO runs of a config (prbench.downstream.ppo.memory), printed before any GPU is used.

    .venv/bin/python perf/ppo_memory.py [--config config.yaml] [--gpus N] [--policy P] [--rm R]

Prints the plan of every (policy, RM) run (or the one named) at the GPU count `train_ppo` requests
(`ppo.gpus`, else the smallest that fits `resources.gpu_mem_gb`; `--gpus` overrides), and ends with
the largest one: `peak per GPU: <X> GB on <G> GPUs (limit <L> GB)`. Exits 1, naming the config keys
to change, when a plan does not fit.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from prbench.downstream.ppo.memory import format_plan, plan_for_config, refusal  # noqa: E402
from prbench.validation import load_config  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--gpus", type=int, default=None, help="plan at this GPU count instead of the rule's")
    ap.add_argument("--policy", default=None)
    ap.add_argument("--rm", default=None)
    a = ap.parse_args(argv)
    cfg = load_config(a.config)
    runs = [(p, r) for p in cfg["policies"] for r in cfg["reward_models"]
            if (a.policy in (None, p)) and (a.rm in (None, r))]
    if not runs:
        raise SystemExit(f"no (policy, rm) run matches --policy {a.policy} --rm {a.rm} in {a.config}")
    worst = None
    for p, r in runs:
        pl = plan_for_config(cfg, p, r, gpus=a.gpus)
        print(format_plan(pl, f"{p} x {r}"))
        if worst is None or pl.peak_gb > worst.peak_gb:
            worst = pl
    bad = not worst.fits
    if bad:
        print(refusal(worst), file=sys.stderr)
    print(f"peak per GPU: {worst.peak_gb:.1f} GB on {worst.gpus} GPUs (limit {worst.limit_gb:g} GB)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
