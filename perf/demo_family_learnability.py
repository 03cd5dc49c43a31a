"""Can a family of frozen-encoder heads span the accuracies the demo study needs?

Trains the RM family of configs/demo.yaml (prbench.rms.family, the code the DAG runs) on a finished
demo run's training files, scores both benchmarks and the run's BoN samples, and prints per member:
personalized and general accuracy, and the mean judge score of its best-of-n pick (ties averaged);
then the Spearman coefficients across members and the seconds each part took. Writes under --out.

    .venv/bin/python perf/demo_family_learnability.py [RUN_DIR] [--out /tmp/family]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from prbench.downstream.bon.family import score_bon_family
from prbench.io import read_jsonl
from prbench.rms.family import family_members
from prbench.scoring.family import train_and_score_family
from prbench.validation import load_config


def best_of_n(scores_path: Path, judged: dict) -> float:
    by_q: dict[str, list] = {}
    for r in read_jsonl(scores_path):
        by_q.setdefault(r["question_id"], []).append((r["score"], judged[(r["question_id"], r["sample_idx"])]))
    vals = []
    for pairs in by_q.values():
        s = np.array([a for a, _ in pairs], dtype=float)
        j = np.array([b for _, b in pairs], dtype=float)
        vals.append(np.nanmean(j[s == s.max()]))
    return float(np.mean(vals))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", nargs="?", default=".")
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--out", default="/tmp/family")
    ap.add_argument("--policy", default="demo_policy")
    a = ap.parse_args()
    run, out = Path(a.run_dir), Path(a.out)
    cfg = load_config(a.config)
    (family, members), = family_members(cfg).items()
    specs = {m: {**cfg["reward_models"][m], "name": m} for m in members}
    encoder = specs[members[0]]["encoder"]
    benches = {b: {"path": str(run / f"results/data/benchmarks/{b}.jsonl"),
                   "kind": (cfg["data"]["baselines"].get(b) or {}).get("kind"),
                   "pairs_out": {m: str(out / m / f"{b}.pairs.jsonl") for m in members},
                   "acc_out": {m: str(out / m / f"{b}.accuracy.json") for m in members}}
               for b in ["personalized", *cfg["data"]["baselines"]]}
    models = {m: str(out / "models" / m) for m in members}
    t0 = time.perf_counter()
    train = {s: str(run / f"results/data/train/{s}.jsonl") for s in ("personalized", "general")}
    res = train_and_score_family(specs, train, models, benches, int(cfg["seed"]), {"bootstrap": 200}, encoder)
    t1 = time.perf_counter()
    bon = run / "results/bon" / a.policy
    score_bon_family(str(bon / "samples.jsonl"), str(run / "results/data/prompts/eval.jsonl"), specs, models,
                     {m: str(out / f"bon_{m}.jsonl") for m in members}, encoder)
    t2 = time.perf_counter()
    judged = {(r["question_id"], r["sample_idx"]): r["score"] for r in read_jsonl(bon / "judged.jsonl")}
    rows = [(m, res[m]["personalized"], res[m]["general"], best_of_n(out / f"bon_{m}.jsonl", judged)) for m in members]
    print(f"{'member':28s} personalized  general  best-of-n judge score")
    for m, p, g, b in rows:
        print(f"{m:28s} {p:12.3f} {g:8.3f} {b:8.3f}")
    p, g, b = (np.array([r[i] for r in rows]) for i in (1, 2, 3))
    print(f"family {family}: {len(members)} members; personalized {p.min():.3f}-{p.max():.3f}, "
          f"general {g.min():.3f}-{g.max():.3f}")
    print(f"Spearman personalized-general {spearmanr(p, g)[0]:.3f}, personalized-BoN {spearmanr(p, b)[0]:.3f}, "
          f"general-BoN {spearmanr(g, b)[0]:.3f}")
    print(f"train + benchmark scoring {t1 - t0:.0f} s, BoN scoring {t2 - t1:.0f} s (wall)")


if __name__ == "__main__":
    main()
