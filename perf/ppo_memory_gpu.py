"""GPU check of the PPO memory plan: the plan's estimate beside the measured peak.

    python perf/ppo_memory_gpu.py --out perf/gpu_runs/<name>.json [--prompt-tokens 2048 8192]

Needs one CUDA GPU; downloads nothing. Two measurements, each beside `prbench.downstream.ppo.memory.plan`:

1. **Training process**: one real PPO step (`prbench.downstream.ppo.train.train_ppo`, trl's PPOTrainer) of a policy
   with the exact shape of `Qwen/Qwen2.5-0.5B-Instruct` (vocab 151,936, hidden 896, 24 layers;
   random weights, the project's Qwen replica tokenizer) as one of 2 training processes of a
   batch-128 run sees it: local rollout batch 64 (`--batch-size`), per-process mini-batch 8 as
   micro-batch 4 x accumulation 2, rollout chunk 4, gradient checkpointing, response length 512
   (a random policy never stops early: every response is full length), prompts filled to
   `--prompt-tokens` with profile posts. The RM is the `length` scorer, which uses no GPU, as on a
   training process whose RM lives on its own GPU. Measured: `torch.cuda.max_memory_allocated` and
   `max_memory_reserved` over the run, against the plan's `train_gpu_gb`.
2. **RM forward**: a `LlamaForSequenceClassification` with the exact shape of
   `Skywork/Skywork-Reward-V2-Llama-3.1-8B` (random weights, bf16) scoring one rollout chunk of
   prompt + response tokens, against the plan's "reward model (bf16) + one forward chunk".

The last line reads `plan/measured (training): <r> at <P> prompt tokens; plan/measured (RM): <r>`.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

GB = 1e9
QWEN_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True)
LLAMA_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8)
# The paper layout (config.yaml ppo: batch 128, mini-batch 16, micro-batch 4, chunk 4) as one of
# the two training processes of a 3-GPU job sees it.
LOCAL_PPO = dict(batch_size=64, mini_batch_size=8, per_device_batch_size=4, local_rollout_forward_batch_size=4,
                 gradient_checkpointing=True, response_length=512, ppo_epochs=1, actor_lr=5e-7, critic_lr=5e-6,
                 total_episodes=64, temperature=1.0, kl_coef=0.0, reward_scale=0.1, nan_reward=0.0, save_steps=100)


def build_policy(out: Path, seed: int = 0) -> Path:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from prbench.replica.build import QWEN_ENDOFTEXT, QWEN_IM_END, qwen_tokenizer

    tok = qwen_tokenizer()
    pad, eos = tok.convert_tokens_to_ids(QWEN_ENDOFTEXT), tok.convert_tokens_to_ids(QWEN_IM_END)
    cfg = Qwen2Config(max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6, bos_token_id=pad,
                      eos_token_id=eos, pad_token_id=pad, use_sliding_window=False, **QWEN_05B)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config = GenerationConfig(bos_token_id=pad, pad_token_id=pad, eos_token_id=[eos, pad])
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def prompt_rows(n: int, posts: int = 80, seed: int = 0) -> list[dict]:
    import random

    from prbench.replica.data import tokenizer_corpus

    words = " ".join(tokenizer_corpus()).split()
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        profile = [" ".join(rng.choice(words) for _ in range(120)) for _ in range(posts)]
        q = " ".join(rng.choice(words) for _ in range(20)) + "?"
        rows.append({"question_id": f"q{i}", "subset": "A", "question": q, "profile": profile,
                     "profile_categories": ["Art"] * posts})
    return rows


def measure_training(prompt_tokens: int, work: Path, release: bool = True, overrides: dict | None = None) -> dict:
    import torch
    import trl.experimental.ppo.ppo_trainer as trl_ppo
    from transformers import AutoTokenizer

    import prbench.downstream.ppo.rollout as rollout_mod
    import prbench.downstream.ppo.train as ppo_mod
    from prbench.downstream.ppo.memory import model_shape, plan
    from prbench.downstream.ppo.rollout import releasing_rollout_scores
    from prbench.downstream.ppo.train import train_ppo
    from prbench.downstream.prompt_rows import cap_prompt_rows
    from prbench.downstream.reward_adapter import render_policy_prompt, tokenize_prompt
    from prbench.io import write_jsonl
    from prbench.rms.length import LengthRM

    policy = work / "policy"
    if not (policy / "config.json").exists():
        build_policy(policy)
    tok = AutoTokenizer.from_pretrained(policy)
    cfg = dict(LOCAL_PPO, max_prompt_tokens=prompt_tokens, **(overrides or {}))
    rows, stats = cap_prompt_rows(prompt_rows(cfg["batch_size"]), tok, prompt_tokens)
    lengths = [len(tokenize_prompt(tok, render_policy_prompt(tok, r))) for r in rows]
    prompts = work / f"prompts_{prompt_tokens}.jsonl"
    write_jsonl(prompts, rows)
    p = plan(model_shape(str(policy)), None, cfg, gpus=1, limit_gb=80)
    phases = {}
    target, name = (rollout_mod, "releasing_batch_generation") if release else (trl_ppo, "batch_generation")
    orig = getattr(target, name)

    def timed_generation(*args, **kw):  # the peak up to the end of the first generation
        out = orig(*args, **kw)
        phases.setdefault("generation_peak_allocated_gb", round(torch.cuda.max_memory_allocated() / GB, 2))
        phases.setdefault("after_generation_allocated_gb", round(torch.cuda.memory_allocated() / GB, 2))
        return out

    setattr(target, name, timed_generation)
    ppo_mod.releasing_rollout_scores = lambda: releasing_rollout_scores(enabled=release)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    run = work / f"run_{prompt_tokens}_{int(release)}_{cfg['batch_size']}_{cfg['total_episodes']}"
    summary = train_ppo(str(policy), None, prompts, run, run / "model", run / "log.csv", cfg, seed=0,
                        rm=LengthRM({"name": "length"}), device="cuda")
    secs = time.time() - t0
    setattr(target, name, orig)
    ppo_mod.releasing_rollout_scores = releasing_rollout_scores
    alloc, reserved = torch.cuda.max_memory_allocated() / GB, torch.cuda.max_memory_reserved() / GB
    return {"release_rollout_scores": release, "batch_size": cfg["batch_size"],
            "total_episodes": cfg["total_episodes"], "prompt_tokens_cap": prompt_tokens,
            "prompt_tokens_min": min(lengths), "prompt_tokens_max": max(lengths),
            "posts_dropped": stats["posts_dropped"], "seconds": round(secs, 1), "steps": summary["steps"],
            "measured_peak_allocated_gb": round(alloc, 2), "measured_peak_reserved_gb": round(reserved, 2),
            **phases, "plan_train_gpu_gb": p.train_gpu_gb, "plan_parts_gb": p.parts_gb,
            "plan_over_measured": round(p.train_gpu_gb / reserved, 3)}


def measure_rm(prompt_tokens: list[int], response_length: int = 512, chunk: int = 4) -> list[dict]:
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from prbench.downstream.ppo.memory import ModelShape

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    cfg = LlamaConfig(num_labels=1, pad_token_id=0, max_position_embeddings=131072, **LLAMA_8B)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForSequenceClassification(cfg).eval()
    torch.set_default_dtype(torch.float32)
    weights = torch.cuda.memory_allocated() / GB
    n_params = sum(p.numel() for p in model.parameters())
    shape = ModelShape("llama-3.1-8b-seqcls", params=float(n_params), source="measured", **{
        k: LLAMA_8B[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "num_key_value_heads", "intermediate_size")})
    pol = ModelShape("qwen", params=0.494e9, source="known", **{k: QWEN_05B[k] for k in (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "intermediate_size")})
    out = [_rm_point(model, cfg, shape, pol, P, response_length, chunk, weights) for P in prompt_tokens]
    del model
    torch.cuda.empty_cache()
    return out


def _rm_point(model, cfg, shape, pol, prompt_tokens, response_length, chunk, weights) -> dict:
    import torch

    from prbench.downstream.ppo.memory import plan

    T = prompt_tokens + response_length
    ids = torch.randint(1, cfg.vocab_size, (chunk, T), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        t0 = time.time()
        model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.float().cpu()
        torch.cuda.synchronize()
        secs = time.time() - t0
    peak = torch.cuda.max_memory_allocated() / GB
    p = plan(pol, shape, dict(LOCAL_PPO, max_prompt_tokens=prompt_tokens), gpus=1, limit_gb=80)
    planned = p.parts_gb["reward model (bf16) + one forward chunk"]
    return {"tokens_per_row": T, "chunk": chunk, "params": shape.params, "weights_gb": round(weights, 2),
            "measured_peak_gb": round(peak, 2), "forward_seconds": round(secs, 2), "plan_gb": planned,
            "plan_over_measured": round(planned / peak, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt-tokens", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--train-prompt-tokens", type=int, nargs="*", default=None,
                    help="prompt lengths of the training check (default: --prompt-tokens)")
    ap.add_argument("--release", choices=["on", "off", "both"], default="on",
                    help="rollout scores released as read (prbench.downstream.ppo.rollout), trl's own lifetime, "
                         "or both")
    ap.add_argument("--batch-size", type=int, default=None, help="local rollout batch (default 64)")
    ap.add_argument("--steps", type=int, default=1, help="PPO steps per measurement")
    ap.add_argument("--out", default="ppo_memory_gpu.json")
    ap.add_argument("--rm-prompt-tokens", type=int, nargs="*", default=None,
                    help="prompt lengths of the RM forward check (default: --prompt-tokens; none: skip it)")
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("perf/ppo_memory_gpu.py needs a CUDA GPU")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "training": [], "rm": None}
    out = Path(a.out)
    rm_tokens = a.prompt_tokens if a.rm_prompt_tokens is None else a.rm_prompt_tokens
    if rm_tokens:
        res["rm"] = measure_rm(rm_tokens)
        print(json.dumps(res["rm"]), flush=True)
        out.write_text(json.dumps(res, indent=1))
    with tempfile.TemporaryDirectory() as td:
        over = {}
        if a.batch_size:
            over.update(batch_size=a.batch_size, mini_batch_size=min(8, a.batch_size))
        over["total_episodes"] = a.steps * over.get("batch_size", LOCAL_PPO["batch_size"])
        releases = {"on": [True], "off": [False], "both": [False, True]}[a.release]
        for P, rel in [(P, rel) for P in (a.train_prompt_tokens or a.prompt_tokens) for rel in releases]:
            r = measure_training(P, Path(td), release=rel, overrides=over)
            res["training"].append(r)
            print(json.dumps(r), flush=True)
            out.write_text(json.dumps(res, indent=1))
    last = res["training"][-1]
    rm = f"{res['rm'][-1]['plan_over_measured']:.2f}" if res["rm"] else "skipped"
    print(f"plan/measured (training): {last['plan_over_measured']:.2f} at {last['prompt_tokens_cap']} prompt tokens; "
          f"plan/measured (RM): {rm}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
