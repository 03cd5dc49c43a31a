"""PPO's learning across training seeds, as the demo's claim table decides it (prbench.downstream.claim,
tables/ppo_claim.csv; perf/ppo_tune/README.md, "PPO's learning across training seeds"): per seed and pooled, the
judge-score difference to the base policy (per question the mean over seeds; its interval counts
the questions and the seeds' spread) and the reward rise, each seed's and pooled over the seeds.

    python perf/ppo_seeds.py results/ppo_tune/ppo/constant16_s0 results/ppo_tune/ppo/constant16_s0_seed1 ...

Each folder is a `perf/ppo_tune/sweep.py run` output (eval_model.jsonl, train_log.csv).
"""
import argparse
from pathlib import Path

from prbench.downstream.claim import claim_rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="sweep.py run folders, one per training seed")
    ap.add_argument("--rm", default="pers_profile")
    ap.add_argument("--policy", default="demo_policy")
    args = ap.parse_args()
    judged = {r: [Path(run) / "eval_model.jsonl"] for r, run in enumerate(args.runs)}
    logs = {r: [Path(run) / "train_log.csv"] for r, run in enumerate(args.runs)}
    t = claim_rows(judged, logs, args.policy, args.rm)  # the demo's claim table, per run folder
    names = [Path(run).name for run in args.runs] + [f"pooled ({len(args.runs)} seeds)"]
    print("run | diff to base [95% CI] | reward rise [95% CI]")
    for name, row in zip(names, t.itertuples()):
        print(f"{name} | {row.diff_base:+.3f} [{row.diff_ci_low:+.3f}, {row.diff_ci_high:+.3f}] | "
              f"{row.reward_rise:+.2f} [{row.reward_rise_ci_low:+.2f}, {row.reward_rise_ci_high:+.2f}]")
    print(f"criterion (both intervals above 0): {'holds' if t['holds'].iloc[-1] else 'does not hold'}")


if __name__ == "__main__":
    main()
