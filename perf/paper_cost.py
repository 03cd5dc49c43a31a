"""The paper run's cost table: work and H100 GPU-hours per stage, from a config.

    .venv/bin/python perf/paper_cost.py [--config config.yaml] [--train-prompts 3717,5574,5785]

A thin caller of the cost model `prbench.plan.cost` (its docstring: what is read from the config, and
every unit cost measured or assumed, with its source); `python -m prbench.plan` prints the same rows
per stage and per RM size class beside the job counts and the power. Above its last line this prints
the BoN stages and the run total at N = 16 and N = 128 samples per question (`bon.n`; the config's
own N too when it is neither): the authors' BoN/sample.sh defaults N to 16, while their README and
the K_VALUES of BoN/score.py and BoN/evaluate.py sweep k up to 128, which needs N = 128. Its last line
is `total: <h> GPU-hours on H100` (at the config's N).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

# the cost model; stages and TRAIN_QUESTIONS are also read by tests/test_paper_cost.py
from prbench.plan.cost import TEST_QUESTIONS, TRAIN_QUESTIONS, UNIT, bon_totals, stages, u  # noqa: E402
from prbench.validation import load_config  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--train-prompts", default=None,
                    help="LaMP-QA train prompts per subset, comma-separated in the config's subset order")
    a = ap.parse_args(argv)
    cfg = load_config(a.config)
    subsets = cfg["data"]["personalized"]["subsets"]
    train_q = dict(TRAIN_QUESTIONS)
    if a.train_prompts:
        vals = [int(x) for x in a.train_prompts.split(",")]
        if len(vals) != len(subsets):
            raise SystemExit(f"--train-prompts: {len(vals)} values for {len(subsets)} subsets")
        train_q.update(dict(zip(subsets, vals)))
    rows = stages(cfg, train_q)
    used = []
    w = max(len(r["stage"]) for r in rows)
    print(f"{'stage':{w}s}  {'GPU-h':>8s}  work")
    for r in rows:
        print(f"{r['stage']:{w}s}  {r['gpu_h']:8.1f}  {r['work']}")
        used += [x for x in r["units"] if x not in used]
    print("unit costs:")
    for k in used:
        print(f"  {k} = {u(k):g}: {UNIT[k][1]}")
    n_test = sum(TEST_QUESTIONS[s] for s in subsets)
    print(f"  data: personalized test {n_test:,} questions (perf/bench_judge_cost.py); "
          f"LaMP-QA train {sum(train_q[s] for s in subsets):,} prompts"
          + (" (--train-prompts)" if a.train_prompts else " (ASSUMED)"))
    own = int(cfg["bon"]["n"])
    for n, (bon_h, total_h) in bon_totals(cfg, train_q).items():
        why = {16: "BoN/sample.sh's default", 128: "their README's and K_VALUES' k up to 128"}.get(n, "")
        tag = "; ".join(x for x in ("config bon.n" if n == own else "", why) if x)
        print(f"BoN at N = {n} ({tag}): {bon_h:.1f} GPU-hours in BoN stages, total {total_h:.0f} GPU-hours on H100")
    print(f"total: {sum(r['gpu_h'] for r in rows):.0f} GPU-hours on H100")
    return 0


if __name__ == "__main__":
    sys.exit(main())
