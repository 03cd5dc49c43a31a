"""The demo policy, built from scratch: tokenizer, model, SFT examples and training.

`train_demo_policy` builds the demo policy: a byte-level BPE tokenizer trained on the demo train
texts (hyphenated words kept whole, so a preference word such as "budget-friendly" is one token
the policy can copy from the profile), a small Llama trained from scratch with trl's SFTTrainer
on (a) the train questions with BOTH the chosen and the rejected answer (so the base policy
follows the user only part of the time and BoN/PPO have headroom) and (b) pairwise-judge
examples built from the train pairs in both orders (target "Result: A" / "Result: B"), plus
pairs against the fixed reference answer the pairwise RM compares with, so the `policy_judge` RM
built from this policy is a real, if weak, judge.

The saved folder is an ordinary HF causal LM: prbench.downstream.policy loads and samples it like any other.
"""
from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Sequence

from .. import prompts as P
from ..config import with_defaults
from ..io import read_jsonl
from ..seeding import seed_everything, stable_seed

log = logging.getLogger("prbench.training.policy")

PAD, EOS, BOT = "<|pad|>", "<|im_end|>", "<|im_start|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
REFERENCE_ANSWER = "I don't know."  # the pairwise RM's default reference answer (rms.generative)


WORD_SPLIT = r" ?[A-Za-z][A-Za-z'\-]*| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+"


def train_tokenizer(texts: Sequence[str], vocab_size: int, model_max_length: int = 1024):
    """Byte-level BPE (tokenizers library) wrapped as a PreTrainedTokenizerFast with chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    # GPT-2-style word split, except that hyphenated words stay whole ("budget-friendly" is one
    # pre-token, so BPE can give it one token): the demo policy then copies a preference word
    # from the profile as one token instead of recombining "-friendly"/"-based" fragments.
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(WORD_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, EOS, BOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(list(texts), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=EOS,
                                  additional_special_tokens=[BOT], model_max_length=model_max_length)
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def build_model(tok, cfg: dict, seed: int, max_positions: int):
    """A seeded Llama for `tok` sized by `cfg` (demo_training.policy; schema defaults filled)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = with_defaults(cfg, "demo_training.policy")
    hidden, heads = int(cfg["hidden_size"]), int(cfg["heads"])
    conf = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 3,
                       num_hidden_layers=int(cfg["layers"]), num_attention_heads=heads,
                       num_key_value_heads=heads, max_position_embeddings=max_positions, tie_word_embeddings=True,
                       pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    torch.manual_seed(seed)
    return LlamaForCausalLM(conf)


def _fit(tok, build, n_posts: int, max_length: int) -> tuple[int, int]:
    """Most top-ranked posts (k) such that prompt+completion fits max_length; (k, length)."""
    k = n_posts
    while True:
        msgs = build(k)
        L = len(tok(P.render_chat(tok, msgs), add_special_tokens=False)["input_ids"])
        if L <= max_length or k == 0:
            return k, L
        k -= 1


JUDGE_FRACTION = 0.10      # share of train pairs turned into A/B judge examples (both orders)
REFERENCE_FRACTION = 0.15  # share turned into answer-vs-reference judge examples (chosen and rejected)


def build_sft_examples(pairs: Sequence[dict], tok, max_length: int, seed: int,
                       reference_answer: str = REFERENCE_ANSWER, judge_fraction: float = JUDGE_FRACTION,
                       reference_fraction: float = REFERENCE_FRACTION) -> tuple[list[dict], dict]:
    """Prompt-completion conversational examples (answers + pairwise-judge decisions).

    Every pair gives two answer examples (chosen and rejected: the policy is ~50% personalized).
    A seeded `judge_fraction` of the pairs also gives A/B judge examples in both orders
    ("Result: A" / "Result: B"), and a disjoint seeded `reference_fraction` gives judge examples
    against the pairwise RM's reference answer (chosen beats it, rejected loses; seeded order), so
    the policy_judge RM's score() (win rate vs the reference) separates the two. The fractions keep
    training within about two minutes on 2 CPU cores.
    Profile posts are dropped from the lowest-ranked end until an example fits max_length (the
    pairwise RM fits its inputs the same way), so no completion is ever truncated away."""
    ex: list[dict] = []
    stats = {"answer": 0, "judge": 0, "judge_reference": 0, "posts_dropped": 0, "too_long": 0}

    def add(kind, build, completion, n_posts):
        k, L = _fit(tok, lambda kk: build(kk) + [{"role": "assistant", "content": completion}], n_posts, max_length)
        stats["posts_dropped"] += n_posts - k
        if L > max_length:
            stats["too_long"] += 1
            return
        ex.append({"prompt": build(k), "completion": [{"role": "assistant", "content": completion}]})
        stats[kind] += 1

    for i, p in enumerate(pairs):
        for key in ("question", "profile", "chosen", "rejected"):
            if key not in p:
                raise ValueError(f"train pair {i} ({p.get('pair_id')}): missing field {key!r}")
        q, prof, c, r = p["question"], list(p["profile"]), p["chosen"], p["rejected"]
        pid = p.get("pair_id", i)
        for ans in (c, r):
            add("answer", lambda k, q=q, prof=prof: P.policy_messages(q, prof[:k]), ans, len(prof))
        u = (stable_seed(seed, "judge_group", pid) % 100000) / 100000
        if u < judge_fraction:
            for a, b, res in ((c, r, "Result: A"), (r, c, "Result: B")):
                add("judge", lambda k, a=a, b=b, q=q, prof=prof: P.pairwise_judge_messages(q, a, b, prof[:k]),
                    res, len(prof))
        elif u < judge_fraction + reference_fraction:
            for ans, wins in ((c, True), (r, False)):
                first = stable_seed(seed, "ref_order", pid, wins) % 2 == 0
                a, b = (ans, reference_answer) if first else (reference_answer, ans)
                res = "Result: A" if first == wins else "Result: B"
                add("judge_reference",
                    lambda k, a=a, b=b, q=q, prof=prof: P.pairwise_judge_messages(q, a, b, prof[:k]), res,
                    len(prof))
    return ex, stats


def _cpu_bf16_ok() -> bool:
    """bf16 autocast only where the CPU has native bf16 matmuls (oneDNN), else it would be slower."""
    import torch

    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # pragma: no cover
        return False


def native_bf16() -> bool:
    """Whether the demo trainings (this SFT, the demo RMs: prbench.training.rm) run in bf16 autocast: on
    a GPU that supports bf16, or a CPU with oneDNN's native bf16; float32 elsewhere."""
    import torch

    return bool(torch.cuda.is_bf16_supported()) if torch.cuda.is_available() else _cpu_bf16_ok()


def _tokenizer_texts(pairs: Sequence[dict]) -> list[str]:
    """Every text the demo tokenizer is trained on: the pairs plus the judge's fixed strings."""
    texts = []
    for p in pairs:
        texts += [p["question"], p["chosen"], p["rejected"], *p.get("profile", [])]
    texts += [P.PAIRWISE_TEMPLATE, REFERENCE_ANSWER, "Result: A", "Result: B"]
    return texts


def _sft_train(model, tok, examples: list[dict], cfg: dict, seed: int, max_length: int):
    """Run trl's SFTTrainer (bf16 autocast where supported); (trained model, result, loss history, bf16)."""
    import tempfile

    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    ds = Dataset.from_list(examples).shuffle(seed=seed)
    bs = int(cfg["batch_size"])
    total_steps = math.ceil(len(examples) / bs) * float(cfg["epochs"])
    use_cpu = not torch.cuda.is_available()
    bf16 = native_bf16()
    with tempfile.TemporaryDirectory() as tmp:
        args = SFTConfig(
            output_dir=tmp, num_train_epochs=float(cfg["epochs"]), learning_rate=float(cfg["lr"]),
            per_device_train_batch_size=bs, max_length=max_length,
            lr_scheduler_type="cosine", warmup_steps=0.05, weight_decay=0.0,
            logging_steps=max(1, min(20, int(total_steps) // 10)),
            save_strategy="no", report_to=[], seed=seed, data_seed=seed, use_cpu=use_cpu,
            completion_only_loss=True, dataloader_num_workers=0, disable_tqdm=True,
            dataset_num_proc=None, train_sampling_strategy="group_by_length", bf16=bf16, fp16=False,
            gradient_checkpointing=False)
        trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
        result = trainer.train()
        history = [h for h in trainer.state.log_history if "loss" in h]
    return trainer.model, result, history, bf16


def _save(model, tok, out_dir: str) -> Path:
    """Save the policy (fp32 safetensors) and its tokenizer; generation ids follow the tokenizer."""
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def train_demo_policy(train_path: str, out_dir: str, cfg: dict, seed: int = 0, threads: int = 1,
                      judge_fraction: float = JUDGE_FRACTION, reference_fraction: float = REFERENCE_FRACTION) -> dict:
    """Train the demo policy on results/data/train/personalized.jsonl and save an HF folder.

    Mixed precision: bf16 autocast where the device supports it (about 2x faster on CPUs with
    AVX512-BF16); the saved weights are fp32."""
    import torch

    t0 = time.time()
    cfg = with_defaults(cfg, "demo_training.policy")  # the schema holds the defaults
    torch.set_num_threads(max(1, threads))
    seed_everything(seed)
    pairs = read_jsonl(train_path)
    if not pairs:
        raise ValueError(f"{train_path}: no training pairs")
    max_length = int(cfg["max_length"])
    tok = train_tokenizer(_tokenizer_texts(pairs), int(cfg["vocab_size"]), model_max_length=max_length)
    if not cfg["judge_examples"]:  # no generative RM reads this policy's judging (prbench.validation checks)
        judge_fraction = reference_fraction = 0.0
    examples, stats = build_sft_examples(pairs, tok, max_length, seed, judge_fraction=judge_fraction,
                                         reference_fraction=reference_fraction)
    log.info("SFT examples: %s", stats)
    model = build_model(tok, cfg, seed, max_positions=max(1024, 4 * max_length))
    n_params = sum(p.numel() for p in model.parameters())
    model, result, history, bf16 = _sft_train(model, tok, examples, cfg, seed, max_length)
    out = _save(model, tok, out_dir)
    report = {"examples": stats, "n_examples": len(examples), "params": n_params, "vocab_size": len(tok),
              "train_loss": float(result.training_loss), "steps": int(result.global_step),
              "first_logged_loss": history[0]["loss"] if history else None,
              "last_logged_loss": history[-1]["loss"] if history else None,
              "seconds": round(time.time() - t0, 1), "threads": threads, "bf16_autocast": bool(bf16)}
    (out / "train_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    log.info("demo policy: %s", report)
    return report
