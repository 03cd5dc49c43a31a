"""Prefix-cached scoring vs full sequences for a decoder RM (targets: BoN >= 4x, pairs >= 1.4x).

    OMP_NUM_THREADS=2 .venv/bin/python perf/bench_prefix_scoring.py [--threads 2] [--repeats 2]

A Qwen2-architecture sequence classifier is built locally (random init, `--layers` layers of
width `--hidden`; ChatML template with Qwen's special tokens), so it runs offline. Inputs have
the paper's shape: a prompt of a question and 10 profile posts (about 1,500-2,000 tokens) and
answers of about 150 tokens, in two shapes:
- bon: `--prompts` prompts with 16 answers each (Best-of-N);
- pairs: `--pairs` prompts with a chosen and a rejected answer each (benchmark scoring).
Both ways run in one process on the same encoded features through the same ClassifierRM,
alternating, `--repeats` times (the minimum counts): full = every answer as a whole sequence
(`score_full`, length-bucketed), prefix = rms/prefix.py. Fails unless max |diff| <= 1e-4.
The last line reads `bon: <x>x faster, pairs: <y>x faster, tokens <t>x fewer, max |diff| <d>`
(tokens: the BoN shape's token count, full over prefix).
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from prbench.prompts import ScoreRequest  # noqa: E402
from prbench.rms import load_reward_model  # noqa: E402

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = ("garden tomato compost seedling pruning soil telescope nebula planet orbit galaxy recipe saucepan spice "
         "oven braise bike gear saddle helmet trail guitar chord melody rhythm concert weekend advice relax work "
         "morning evening budget travel museum painting novel poetry film series camera lens harbour mountain").split()


def build_model(out: Path, hidden: int, layers: int, seed: int) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForSequenceClassification

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator([" ".join(WORDS), "user assistant Question Post ?."] * 4, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=specials[1:])
    tok.chat_template = CHATML
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                      num_attention_heads=max(1, hidden // 32), num_key_value_heads=max(1, hidden // 64),
                      max_position_embeddings=4096, num_labels=1, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    Qwen2ForSequenceClassification(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def requests(rng: random.Random, n_prompts: int, answers: int) -> list[ScoreRequest]:
    reqs = []
    for _ in range(n_prompts):
        q = text(rng, 12) + "?"
        profile = tuple(text(rng, rng.randint(70, 95)) + "." for _ in range(10))
        for _ in range(answers):
            reqs.append(ScoreRequest(q, text(rng, rng.randint(65, 85)) + ".", profile))
    return reqs


def timed(fn, feats) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    out = fn(feats)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=2, help="BoN shape: prompts with 16 answers each")
    ap.add_argument("--pairs", type=int, default=8, help="pair shape: prompts with 2 answers each")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens-per-batch", type=int, default=16384)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="bench_prefix_") as tmp:
        path = build_model(Path(tmp) / "qwen2_rm", args.hidden, args.layers, seed=0)
        rm = load_reward_model({"name": "qwen2_bench", "kind": "classifier", "path": str(path), "use_profile": True,
                                "max_length": 4096, "max_tokens_per_batch": args.max_tokens_per_batch,
                                "progress": False})
        assert rm.prefix is not None, "the Qwen2 classifier must take the prefix path"
        shapes = {"bon": requests(rng, args.prompts, 16), "pairs": requests(rng, args.pairs, 2)}
        feats = {k: rm.encode(v) for k, v in shapes.items()}
        print(f"model Qwen2ForSequenceClassification hidden {args.hidden} x {args.layers} layers, "
              f"threads {args.threads}, budget {args.max_tokens_per_batch} tokens/batch")
        for k, fs in feats.items():
            p = [f["prefix_len"] for f in fs]
            a = [len(f["input_ids"]) - f["prefix_len"] for f in fs]
            full, cached = rm.prefix.tokens_saved(fs)
            print(f"{k}: {len(fs)} answers, prompt tokens {min(p)}-{max(p)}, answer tokens {min(a)}-{max(a)}; "
                  f"tokens run: full {full:,}, prefix {cached:,} ({full / cached:.2f}x fewer)")
        rm.score_full(feats["pairs"][:2])  # warm-up
        rm.prefix.score(feats["pairs"][:2])
        times = {(k, w): [] for k in feats for w in ("full", "prefix")}
        diffs = []
        for _ in range(args.repeats):
            for k, fs in feats.items():
                tf, sf = timed(rm.score_full, fs)
                tp, sp = timed(rm.prefix.score, fs)
                times[(k, "full")].append(tf)
                times[(k, "prefix")].append(tp)
                diffs.append(float(np.max(np.abs(sf - sp))))
        speed = {}
        for k in feats:
            f, p = min(times[(k, "full")]), min(times[(k, "prefix")])
            speed[k] = f / p
            print(f"{k}: full {f:.2f} s, prefix {p:.2f} s "
                  f"(runs full {', '.join(f'{t:.2f}' for t in times[(k, 'full')])}; "
                  f"prefix {', '.join(f'{t:.2f}' for t in times[(k, 'prefix')])})")
        tok_full, tok_cached = rm.prefix.tokens_saved(feats["bon"])
        d = max(diffs)
        ok = speed["bon"] >= 4 and speed["pairs"] >= 1.4 and d <= 1e-4
        print(f"targets bon >= 4x, pairs >= 1.4x, max |diff| <= 1e-4: {'PASS' if ok else 'FAIL'}")
        print(f"bon: {speed['bon']:.2f}x faster, pairs: {speed['pairs']:.2f}x faster, "
              f"tokens {tok_full / tok_cached:.2f}x fewer, max |diff| {d:.1e}")
        if d > 1e-4:
            sys.exit(1)


if __name__ == "__main__":
    main()
