"""The seeded sampler's cost a decode step: the whole-vocabulary formula against
`prbench.downstream.policy.GumbelSampler`, in one process, alternating, every output compared.

    OMP_NUM_THREADS=1 .venv/bin/python perf/bench_sampler.py [--rounds 5] [--steps 50]

Pinned workload (no config read): 128 rows (configs/demo.yaml's `ppo.eval_batch_size`), the demo
policy's vocabulary of 2,048, temperature 1.0, logits drawn once from a fixed generator: "peaked"
(normal x 6: every row's nucleus lies in its 64 most likely tokens) and "flat" (normal x 0.3: every
row sorts the whole vocabulary), top_p 0.9 (the demo's evaluation) and 1.0 (its BoN sampling).
Arms:
- whole vocabulary: the formula the sampler's docstring states, as it was computed before: the
  noise of every token hashed out of place, top_p_drop's mask, float64 sums, float32 out;
- sampler: GumbelSampler (the noise hashed in place, the token half of the hash cached, and for rows
  whose nucleus lies in the top 64 the noise of those 64 tokens only).
Time: CPU of the main thread (`time.thread_time`) per decode step, the median (and range) over rounds, each
step's output freed before the next (as in `generate`). Before the timing, every step's two outputs
must be equal element for element (torch.equal), else the script stops.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from prbench.downstream import policy as pol

ROWS, VOCAB, PROMPT_LEN = 128, 2048, 10
M32 = 0xFFFFFFFF


def _mix32(x):
    x = ((x >> 16) ^ x) * 0x45D9F3B & M32
    x = ((x >> 16) ^ x) * 0x45D9F3B & M32
    return (x >> 16) ^ x


def whole_vocabulary(row_seeds, step, logits, top_p):
    tokens = torch.arange(logits.shape[-1], dtype=torch.int64)
    row = _mix32((row_seeds ^ _mix32(torch.tensor(step * 0x9E3779B1 & M32))) & M32)
    tokh = _mix32((tokens * 0x85EBCA6B) & M32)
    x = _mix32(_mix32(row[:, None] ^ tokh[None, :]) ^ ((row[:, None] * 0x27D4EB2F) & M32))
    u = (x.to(torch.float64) + 0.5) / 4294967296.0
    if top_p < 1.0:
        logits = logits.masked_fill(pol.top_p_drop(logits, top_p), float("-inf"))
    return (logits.double() - torch.log(-torch.log(u))).to(torch.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    seeds = [(i * 2654435761 + 17) & M32 for i in range(ROWS)]
    seed_t = torch.tensor(seeds, dtype=torch.int64)
    print(f"{ROWS} rows, vocabulary {VOCAB}, {args.steps} steps a round, {args.rounds} rounds; ms of CPU a step")
    for kind, scale in (("peaked", 6.0), ("flat", 0.3)):
        logits = torch.randn(ROWS, VOCAB, generator=gen) * scale
        for top_p in (0.9, 1.0):
            sampler = pol.GumbelSampler(seeds, PROMPT_LEN, 1.0, top_p, 0)
            arms = {"whole vocabulary": lambda s, lg=logits, p=top_p: whole_vocabulary(seed_t, s, lg / 1.0, p),
                    "sampler": lambda s, lg=logits, f=sampler: f(torch.zeros((ROWS, PROMPT_LEN + s),
                                                                          dtype=torch.long), lg)}
            for s in range(args.steps):  # untimed: every step's outputs equal
                if not torch.equal(arms["whole vocabulary"](s), arms["sampler"](s)):
                    raise SystemExit(f"{kind}, top_p {top_p}, step {s}: the sampler's output differs from the formula")
            times: dict[str, list[float]] = {arm: [] for arm in arms}
            for _ in range(args.rounds):
                for arm, run in arms.items():  # each output freed before the next step, as in generate
                    t0 = time.thread_time()
                    for s in range(args.steps):
                        run(s)
                    times[arm].append((time.thread_time() - t0) / args.steps * 1000)
            (old, new), (lo_old, lo_new), (hi_old, hi_new) = (
                [f(times[a]) for a in ("whole vocabulary", "sampler")] for f in (statistics.median, min, max))
            print(f"{kind:7s} top_p {top_p}: whole vocabulary {old:6.2f} ({lo_old:.2f}-{hi_old:.2f})"
                  f"  sampler {new:6.2f} ({lo_new:.2f}-{hi_new:.2f})  ratio of medians {old / new:4.2f}"
                  "  (outputs equal)")


if __name__ == "__main__":
    main()
