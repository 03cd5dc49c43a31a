"""Judge calls of our BoN protocol vs the authors' scheme, for the paper configuration.

Ours: every unique (question, sample) is judged once (cached) and every RM / k / estimator is
computed from those judgements: Q * N calls, independent of the number of RMs and of k.
Authors' scheme: judge the best-of-k output of every RM at every k: Q * |RMs| * |ks| calls.
Ours is lower whenever |RMs| * |ks| > N.

    .venv/bin/python perf/bench_judge_cost.py [--config config.yaml] [--ks 1,2,4,8,16]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from prbench.validation import load_config  # noqa: E402

# Questions per subset of the released Personalized RewardBench test split (the paper's sizes).
PAPER_SUBSET_SIZES = {"Art_and_Entertainment": 767, "Lifestyle_and_Personal_Development": 989,
                      "Society_and_Culture": 1074}


def judge_calls(n_questions: int, n: int, n_rms: int, ks: list[int]) -> dict:
    ours = n_questions * n
    authors = n_questions * n_rms * len(ks)
    return {"questions": n_questions, "n": n, "rms": n_rms, "ks": len(ks), "ours": ours, "authors": authors,
            "ratio": authors / ours}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(Path(__file__).resolve().parents[1] / "config.yaml"))
    ap.add_argument("--ks", default=None, help="comma-separated k values (default: bon.ks of the config)")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    n = int(cfg["bon"]["n"])
    rms = list(cfg["reward_models"])
    subsets = cfg["data"]["personalized"]["subsets"]
    missing = [s for s in subsets if s not in PAPER_SUBSET_SIZES]
    if missing:
        raise SystemExit(f"config key data.personalized.subsets: no known size for {missing}")
    q = sum(PAPER_SUBSET_SIZES[s] for s in subsets)
    k_sets = [[int(k) for k in args.ks.split(",")]] if args.ks else [list(cfg["bon"]["ks"]), list(range(1, n + 1))]
    print(f"paper config: {len(subsets)} subsets, {q} questions, N={n}, {len(rms)} RMs ({', '.join(rms)})")
    ok = True
    for ks in k_sets:
        r = judge_calls(q, n, len(rms), ks)
        label = ",".join(map(str, ks)) if len(ks) <= 6 else f"1..{max(ks)}"
        print(f"k in {{{label}}}: pipeline {r['ours']:,} judge calls | authors' scheme {r['authors']:,} "
              f"({r['ratio']:.2f}x the pipeline's)")
        if len(rms) * len(ks) > n and not r["ours"] < r["authors"]:
            ok = False
    print("adding an RM or a k value costs the pipeline 0 judge calls; the authors' scheme "
          f"{q * len(k_sets[0]):,} per RM (k in bon.ks) and {q * len(rms):,} per k value")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
