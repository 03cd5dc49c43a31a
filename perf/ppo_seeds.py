"""PPO's learning across training seeds, pooled as tables/ppo.csv pools a config's seeds (perf/README.md,
"PPO's learning across training seeds"): per seed and pooled, the judge-score difference to the base
policy (prbench.downstream.evaluation.paired_diff: per question the mean over seeds, a bootstrap over
questions) and the reward rise (prbench.downstream.reward_rise.reward_rise over the seeds' logs).

    python perf/ppo_seeds.py results/ppo_tune/ppo/constant16_s0 results/ppo_tune/ppo/constant16_s0_seed1 ...

Each folder is a `perf/ppo_tune/sweep.py run` output (eval_model.jsonl, train_log.csv); the bootstrap
seed is the table's (stable_seed(seed, "ppo-table-diff", policy, rm)) with the demo's config seed.
"""
import argparse
from pathlib import Path

import pandas as pd
import yaml

from prbench.downstream.evaluation import paired_diff
from prbench.downstream.reward_rise import reward_rise
from prbench.io import read_jsonl
from prbench.seeding import stable_seed

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="sweep.py run folders, one per training seed")
    ap.add_argument("--rm", default="pers_profile")
    ap.add_argument("--policy", default="demo_policy")
    args = ap.parse_args()
    cfg = yaml.safe_load((REPO / "configs/demo.yaml").read_text())
    n_boot, seed = cfg["ppo"].get("bootstrap", 1000), cfg.get("seed", 0)
    boot_seed = stable_seed(seed, "ppo-table-diff", args.policy, args.rm)
    frames, logs = [], []
    print("run | diff to base [95% CI] | reward rise [95% CI]")
    for r, run in enumerate(args.runs):
        df = pd.DataFrame(read_jsonl(Path(run) / "eval_model.jsonl")).assign(replicate=r)
        d = paired_diff(df, n_boot, boot_seed)
        rise = reward_rise([Path(run) / "train_log.csv"])
        print(f"{Path(run).name} | {d['diff_base']:+.3f} [{d['diff_ci_low']:+.3f}, {d['diff_ci_high']:+.3f}] | "
              f"{rise[0]:+.2f} [{rise[1]:+.2f}, {rise[2]:+.2f}]")
        frames.append(df)
        logs.append(Path(run) / "train_log.csv")
    d = paired_diff(pd.concat(frames, ignore_index=True), n_boot, boot_seed)
    rise = reward_rise(logs)
    print(f"pooled ({len(args.runs)} seeds) | {d['diff_base']:+.3f} [{d['diff_ci_low']:+.3f}, "
          f"{d['diff_ci_high']:+.3f}] | {rise[0]:+.2f} [{rise[1]:+.2f}, {rise[2]:+.2f}]")
    ok = d["diff_ci_low"] > 0 and rise[1] > 0
    print(f"criterion (both intervals above 0): {'holds' if ok else 'does not hold'}")


if __name__ == "__main__":
    main()
