"""PPO rollout: today's path (generate's float32 scores, per chunk) vs the new one (token ids in
one generate call, logprobs from a forward per forward chunk), with HF's multinomial draw or the
inverse-CDF sampler (ppo.rollout_sampler), on CPU, in one process, alternating.

    nice .venv/bin/python perf/bench_ppo_rollout.py [--rounds 3] [--threads 1] [--profile]

Pinned model shape (built locally, random init, no download): a Qwen2ForCausalLM with the real
Qwen2.5 vocabulary size 151,936, hidden 64, 2 layers, 4 attention heads (2 KV heads),
intermediate 128, tied embeddings, float32. Pinned workload: a local batch of 16 prompts of 128
tokens (left-padded random ids), up to 64 sampled response tokens at temperature 1.0 (top_k 0,
top_p 1.0, no EOS: every row decodes all 64 tokens, as a worst case), the rollout logprobs of
every response token computed as trl 1.12's PPO loop computes them.

Time is the CPU time of the main thread (`time.thread_time`; torch runs its ops there with
`--threads 1`), so other jobs on a busy machine do not count; wall seconds are printed beside it.
Arms (each round runs them in this order; `--rounds` rounds; the median time counts):
- scores@4:  today's path, trl's chunk of 4 rows per generate call (config.yaml's
  local_rollout_forward_batch_size), `prbench.downstream.ppo.rollout.releasing_batch_generation`
  + `selective_log_softmax` per chunk;
- scores@16: today's path with the whole local batch in one chunk;
- forward:   the new path, `ids_batch_generation` with a generation chunk of 16 and a forward
  chunk of 4, tokens drawn by HF's multinomial (ppo.rollout_sampler multinomial);
- forward+icdf: the same with the inverse-CDF sampler (ppo.rollout_sampler inverse_cdf,
  `prbench.downstream.ppo.sampler`: one uniform per row and decode step, in the sampler's own
  decode loop; the same distribution, other tokens for the seed).
Peak memory: the process's resident set sampled every millisecond during the arm, minus its
value just before, with glibc mapping every allocation above 32 MiB on its own and returning it
to the OS when freed (MALLOC_MMAP_THRESHOLD_, fixed by re-executing the script), so the resident
set follows the large tensors (scores, logits: 155 MB a chunk of 4 rows here) while the small
per-step buffers reuse the heap; the largest over the rounds counts. max |logprob diff|: for
`forward`, its forward logprobs against today's generate scores for the same sampled tokens
(scores@4's rollouts, one more run); for `forward+icdf`, which draws other tokens, its forward
logprobs (response_logits + trl's selective_log_softmax, as PPO trains on them) against the
log-probability the sampler drew each of its own tokens with, from the decode step's logits / T
(the values today's scores hold), over every response token of one more forward+icdf run.

`--profile` adds one profiled run per arm (the share of its op time in the sampling's draw,
softmax, argmax and divisions over the vocabulary, the matmuls, and trl's log-softmax) and times
the sampling draw alone: torch.multinomial with one sample draws an exponential per vocabulary
entry and row each decode step (a serial kernel on CPU, about 20 ns each here), the same draws on
every arm, so that time bounds how much faster any path can be while drawing the same tokens
for the same seed.

The last line reads `rollout: <x>x faster, peak memory <y>x lower, max |logprob diff| <d>`
(forward+icdf vs scores@4; the targets: x >= 2.5, y >= 1, d <= 1e-5); the line before it gives the
same comparison for `forward` (multinomial). With the multinomial draw x stays near 1.3x on this
CPU: the draw alone bounds it near 2.5-2.7x (`--profile`). The inverse-CDF sampler removes the
draw and decodes in its own KV-cache loop (`decode_inverse_cdf`: no per-step logits copy or
vocabulary argmax), numbers in perf/README.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

SHAPE = dict(vocab_size=151936, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, tie_word_embeddings=True, max_position_embeddings=1024)
BATCH, PROMPT, RESPONSE, TEMPERATURE, FORWARD_CHUNK = 16, 128, 64, 1.0, 4
PAD, EOS = 151643, 151645


MMAP_THRESHOLD = str(32 * 2**20)


def _reexec_with_mmap_threshold() -> None:
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") != MMAP_THRESHOLD:
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=MMAP_THRESHOLD)
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


class PeakRSS:
    """Peak resident set (bytes) above its value at entry, sampled every millisecond."""

    def __init__(self):
        import psutil

        self.proc = psutil.Process()

    def __enter__(self):
        self.base = self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._poll, daemon=True)
        self._t.start()
        return self

    def _poll(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.001)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)
        self.delta = self.peak - self.base


def build():
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**SHAPE, pad_token_id=PAD, eos_token_id=EOS, bos_token_id=None)).eval()
    model.generation_config = GenerationConfig(pad_token_id=PAD, eos_token_id=None)
    g = torch.Generator().manual_seed(1)
    queries = torch.randint(0, 151000, (BATCH, PROMPT), generator=g)
    lengths = torch.randint(PROMPT // 2, PROMPT + 1, (BATCH,), generator=g)
    for i, n in enumerate(lengths.tolist()):  # left padding, as trl's collator pads prompts
        queries[i, : PROMPT - n] = PAD
    gen = GenerationConfig(max_new_tokens=RESPONSE, min_new_tokens=RESPONSE, temperature=TEMPERATURE + 1e-7,
                           top_k=0, top_p=1.0, do_sample=True, pad_token_id=PAD, eos_token_id=None)
    return model, queries, gen


def scores_path(model, queries, gen, chunk):
    """Today's path: trl's generate per chunk with its scores, logprobs as trl's loop reads them."""
    from trl.trainer.utils import selective_log_softmax

    from prbench.downstream.ppo.rollout import releasing_batch_generation

    qr, scores = releasing_batch_generation(model, queries, chunk, PAD, gen)
    ctx = queries.shape[1]
    lps = [selective_log_softmax(scores[i:i + chunk], qr[i:i + chunk, ctx:]) for i in range(0, BATCH, chunk)]
    return qr, __import__("torch").cat(lps)


def forward_path(model, queries, gen, sampler="multinomial"):
    """The new path: one generate call of token ids (drawn by `sampler`, ppo.rollout_sampler),
    logprobs from forwards of FORWARD_CHUNK rows."""
    import torch
    from trl.trainer.utils import selective_log_softmax

    from prbench.downstream.ppo.rollout import ids_batch_generation

    qr, logits = ids_batch_generation(model, queries, queries.shape[0], PAD, gen, forward_chunk=FORWARD_CHUNK,
                                      temperature=TEMPERATURE, sampler=sampler)
    ctx = queries.shape[1]
    lps = [selective_log_softmax(logits[i:i + FORWARD_CHUNK], qr[i:i + FORWARD_CHUNK, ctx:])
           for i in range(0, qr.shape[0], FORWARD_CHUNK)]
    return qr, torch.cat(lps)


def icdf_logprob_diff(model, queries, gen) -> float:
    """max |forward logprob - the sampler's own log-probability| over the tokens of one forward+icdf
    rollout batch: the logprobs PPO trains on against the probability each token was drawn with
    (the decode step's logits / T, as today's scores hold them)."""
    import torch

    import prbench.downstream.ppo.sampler as sampler_mod

    made, real = [], sampler_mod.InverseCDFSampler

    def recording(temperature, record=False):
        made.append(real(temperature, record=True))
        return made[-1]

    sampler_mod.InverseCDFSampler = recording
    try:
        _, new = forward_path(model, queries, gen, "inverse_cdf")
    finally:
        sampler_mod.InverseCDFSampler = real
    drawn = torch.stack(made[0].logprobs, 1)
    return (new.double() - drawn).abs().max().item()


PROFILED_OPS = ("aten::exponential_", "aten::mm", "aten::logsumexp", "aten::_softmax", "aten::argmax", "aten::div",
                "aten::exp_", "aten::exp2_")


def profile_arms(arms) -> dict:
    """Self CPU seconds per arm of the ops that dominate (PROFILED_OPS: the sampling's draw, softmax,
    argmax and divisions over the vocabulary, the LM head's and layers' matmuls, and aten::logsumexp
    with its children, trl's log-softmax of the rollout logprobs; aten::exp2_, the inverse-CDF
    sampler's weights, and aten::exp_ outside logsumexp, where they were before 2026-11-25) and of
    the rest, one profiled run each."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for name, fn in arms.items():
        torch.manual_seed(100)
        with profile(activities=[ProfilerActivity.CPU]) as p:
            fn()
        events = p.key_averages()
        total = sum(e.self_cpu_time_total for e in events) / 1e6
        ops = {e.key: e.self_cpu_time_total / 1e6 for e in events}
        # logsumexp calls itself once inside (logsumexp -> logsumexp_out): its children, counted once
        lse = [e for e in p.events() if e.name == "aten::logsumexp" and not any(
            c.name == "aten::logsumexp" for c in _ancestors(e))]
        ops = {op: ops.get(op, 0.0) for op in PROFILED_OPS if op not in ("aten::logsumexp", "aten::exp_")}
        ops["aten::logsumexp"] = sum(e.cpu_time_total for e in lse) / 1e6
        # exp_ outside logsumexp (whose children are counted there): the inverse-CDF sampler's weights
        # before they moved to exp2_
        ops["aten::exp_"] = sum(e.self_cpu_time_total for e in p.events() if e.name == "aten::exp_" and not any(
            c.name == "aten::logsumexp" for c in _ancestors(e))) / 1e6
        out[name] = dict(ops, total=total, other=total - sum(ops.values()))
    return out


def draw_seconds() -> float:
    """CPU seconds of the random draws torch.multinomial makes for one rollout batch (num_samples=1:
    an exponential per vocabulary entry and row, then argmax of probs / draw), timed like the arms."""
    import torch

    q = torch.empty(BATCH, SHAPE["vocab_size"])
    q.exponential_(1)  # warm-up
    c0 = time.thread_time()
    for _ in range(RESPONSE):
        q.exponential_(1)
    return time.thread_time() - c0


def _ancestors(event):
    e = event.cpu_parent
    while e is not None:
        yield e
        e = e.cpu_parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile", action="store_true",
                    help="one more round per arm under torch.profiler: where each arm's CPU time goes")
    a = ap.parse_args(argv)
    import torch

    from prbench.downstream.ppo.rollout import response_logits

    torch.set_num_threads(a.threads)
    model, queries, gen = build()
    arms = {"scores@4": lambda: scores_path(model, queries, gen, 4),
            "scores@16": lambda: scores_path(model, queries, gen, 16),
            "forward": lambda: forward_path(model, queries, gen),
            "forward+icdf": lambda: forward_path(model, queries, gen, "inverse_cdf")}
    secs = {k: [] for k in arms}
    peak = dict.fromkeys(arms, 0)
    with torch.no_grad():
        forward_path(model, queries[:2], gen)  # warm-up (lazy inits), not timed
        forward_path(model, queries[:2], gen, "inverse_cdf")
        for r in range(a.rounds):
            for name, fn in arms.items():
                torch.manual_seed(100 + r)
                with PeakRSS() as m:
                    t0, c0 = time.perf_counter(), time.thread_time()
                    fn()
                    secs[name].append(time.thread_time() - c0)
                    wall = time.perf_counter() - t0
                peak[name] = max(peak[name], m.delta)
                print(f"round {r + 1} {name:12s} {secs[name][-1]:7.2f} cpu-s ({wall:6.2f} s wall)  "
                      f"peak +{m.delta / 2**20:8.1f} MiB", flush=True)
        qr, old = scores_path(model, queries, gen, 4)
        ctx = queries.shape[1]
        new = torch.cat([torch.log_softmax(response_logits(model, qr[i:i + 4], ctx, PAD, TEMPERATURE), -1)
                         .gather(-1, qr[i:i + 4, ctx:, None]).squeeze(-1) for i in range(0, BATCH, 4)])
        icdf_diff = icdf_logprob_diff(model, queries, gen)
        prof = profile_arms(arms) if a.profile else None
    diff = (new - old).abs().max().item()
    med = {k: statistics.median(v) for k, v in secs.items()}
    print(f"model: Qwen2 {SHAPE}; batch {BATCH}, prompt {PROMPT}, response {RESPONSE}, forward chunk {FORWARD_CHUNK}, "
          f"{a.threads} thread(s), {a.rounds} rounds")
    for k in arms:
        print(f"{k:12s} median {med[k]:7.2f} cpu-s  peak +{peak[k] / 2**20:8.1f} MiB")
    print(f"sequential decode steps per rollout batch: scores@4 {BATCH // 4 * RESPONSE}, scores@16 {RESPONSE}, "
          f"forward {RESPONSE} (on a GPU a decode step's time barely depends on its rows; on this CPU it grows "
          "with them: sampling and the LM head run over the 151,936-entry vocabulary per row)")
    print(f"scores@16 vs scores@4: {med['scores@4'] / med['scores@16']:.2f}x faster, "
          f"peak memory {peak['scores@4'] / peak['scores@16']:.2f}x lower")
    if prof:
        print("profile (one more round per arm, torch.profiler; shares of the arm's op time, which the profiler "
              "takes from the wall clock, so a busy machine blurs them):")
        for k, ops in prof.items():
            print(f"  {k:12s} " + ", ".join(f"{op} {100 * ops[op] / ops['total']:4.1f}%" for op in PROFILED_OPS)
                  + f", other {100 * ops['other'] / ops['total']:4.1f}%")
        draw = draw_seconds()
        print(f"the sampling draw alone (torch.multinomial's exponential_, one per vocabulary entry, row and decode "
              f"step: {RESPONSE} fills of {BATCH} x {SHAPE['vocab_size']}, the same on every arm, CPU time as above): "
              f"{draw:.2f} cpu-s; with all else free the new path would be at most {med['scores@4'] / draw:.2f}x "
              "faster than scores@4 while drawing the same tokens for the same seed")
    speed, mem = med["scores@4"] / med["forward"], peak["scores@4"] / peak["forward"]
    print(f"rollout, multinomial sampler (forward vs scores@4): {speed:.2f}x faster, peak memory {mem:.2f}x lower, "
          f"max |logprob diff| {diff:.1e}")
    speed, mem = med["scores@4"] / med["forward+icdf"], peak["scores@4"] / peak["forward+icdf"]
    print(f"rollout: {speed:.2f}x faster, peak memory {mem:.2f}x lower, max |logprob diff| {icdf_diff:.1e}")
    return 0


if __name__ == "__main__":
    _reexec_with_mmap_threshold()
    sys.exit(main())
