"""Policies: loading, deterministic batched sampling, and the demo policy trained from scratch.

`load_policy` loads any causal LM folder or hub id (tokenizer with chat template and pad token,
left padding). `generate_answers` renders the paper's policy prompt (question + top-k profile,
`prompts.policy_messages`) with the tokenizer's chat template and samples with HF `generate`
(KV cache, batching). Sampling uses the Gumbel-max trick with noise hashed from
(seed, question_id, sample_idx, step, token), so every sample is a function of its own seed only:
results do not depend on batch size, shard layout or the order of the prompts.
vLLM (`generate_answers_vllm`) is an optional backend, imported only when selected.

`train_demo_policy` builds the demo policy: a byte-level BPE tokenizer trained on the demo train
texts (hyphenated words kept whole, so a preference word such as "budget-friendly" is one token
the policy can copy from the profile), a small Llama trained from scratch with trl's SFTTrainer
on (a) the train questions with BOTH the chosen and the rejected answer (so the base policy
follows the user only part of the time and BoN/PPO have headroom) and (b) pairwise-judge
examples built from the train pairs in both orders (target "Result: A" / "Result: B"), plus
pairs against the fixed reference answer the pairwise RM compares with, so the `policy_judge` RM
built from this policy is a real, if weak, judge.
"""
from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Sequence

from . import prompts as P
from .generation import generation_config, neutralize, vllm_sampling_kwargs
from .models import auto_device, auto_dtype, resolve_model_ref, vllm_engine_kwargs
from .seeding import seed_everything, stable_seed

log = logging.getLogger("prbench.policy")

PAD, EOS, BOT = "<|pad|>", "<|im_end|>", "<|im_start|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
REFERENCE_ANSWER = "I don't know."  # the pairwise RM's default reference answer (rms.generative)


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
def load_policy(path: str, device: str = "auto", trust_remote_code: bool = False, dtype: str = "auto",
                use_safetensors: bool = True):
    """(model, tokenizer) ready for generation: eval mode, pad token set, left padding."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = auto_device(device)
    ref = resolve_model_ref(str(path))
    tok = AutoTokenizer.from_pretrained(ref, trust_remote_code=trust_remote_code)
    model = AutoModelForCausalLM.from_pretrained(ref, dtype=auto_dtype(dtype, dev), trust_remote_code=trust_remote_code,
                                                 use_safetensors=use_safetensors).to(dev).eval()
    neutralize(model)  # the model's generation_config.json never reaches sampling (prbench.generation)
    prepare_tokenizer(tok)
    return model, tok


def prepare_tokenizer(tok):
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise ValueError("policy tokenizer has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if not getattr(tok, "chat_template", None):
        log.warning("policy tokenizer has no chat template; using the plain 'role: content' fallback")
    return tok


def policy_prompt(tok, row: dict) -> str:
    return P.render_chat(tok, P.policy_messages(row["question"], row.get("profile", ()),
                                                    categories=row.get("profile_categories", ())), add_generation_prompt=True)


# ---------------------------------------------------------------------------------------------
# Deterministic sampling (Gumbel-max with hashed noise)
# ---------------------------------------------------------------------------------------------
_M32 = 0xFFFFFFFF


def _mix32(x):
    """A 32-bit integer hash (lowbias32-style) on int64 tensors holding values < 2^32."""
    x = ((x >> 16) ^ x) * 0x45D9F3B & _M32
    x = ((x >> 16) ^ x) * 0x45D9F3B & _M32
    return (x >> 16) ^ x


def hashed_uniform(row_seeds, step: int, vocab: int):
    """U(0,1) noise of shape (rows, vocab), a pure function of (row seed, step, token id)."""
    import torch

    dev = row_seeds.device
    tokens = torch.arange(vocab, device=dev, dtype=torch.int64)
    row = _mix32((row_seeds.to(torch.int64) ^ _mix32(torch.tensor(step * 0x9E3779B1 & _M32, device=dev))) & _M32)
    tokh = _mix32((tokens * 0x85EBCA6B) & _M32)
    x = _mix32(_mix32(row[:, None] ^ tokh[None, :]) ^ ((row[:, None] * 0x27D4EB2F) & _M32))
    return (x.to(torch.float64) + 0.5) / 4294967296.0


class GumbelSampler:
    """Logits processor turning greedy decoding into seeded sampling (temperature + top-p).

    argmax(logits / T + Gumbel noise) is a sample from softmax(logits / T); the noise of row r
    at generation step t is hashed from (row_seeds[r], t), so it is independent of batching."""

    def __init__(self, row_seeds: Sequence[int], prompt_len: int, temperature: float = 1.0, top_p: float = 1.0,
                 top_k: int = 0):
        import torch

        self.row_seeds = torch.tensor([int(s) & _M32 for s in row_seeds], dtype=torch.int64)
        self.prompt_len, self.temperature, self.top_p, self.top_k = prompt_len, temperature, top_p, int(top_k)

    def __call__(self, input_ids, scores):
        import torch

        step = input_ids.shape[1] - self.prompt_len
        logits = scores.float() / self.temperature
        if 0 < self.top_k < logits.shape[-1]:
            kth = torch.topk(logits, self.top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            sorted_logits, idx = torch.sort(logits, descending=True, dim=-1)
            cum = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
            drop_sorted = (cum - torch.softmax(sorted_logits, dim=-1)) >= self.top_p  # keep the first token always
            drop = torch.zeros_like(drop_sorted).scatter(-1, idx, drop_sorted)
            logits = logits.masked_fill(drop, float("-inf"))
        u = hashed_uniform(self.row_seeds.to(logits.device), step, logits.shape[-1])
        gumbel = -torch.log(-torch.log(u))
        return (logits.double() + gumbel).to(torch.float32)


def generate_answers(model, tokenizer, prompts: Sequence[dict], n: int = 1, temperature: float = 1.0,
                     top_p: float = 1.0, max_new_tokens: int = 64, seed: int = 0, batch_size: int = 32,
                     greedy: bool = False, progress: bool = True, top_k: int = 0,
                     repetition_penalty: float = 1.0) -> list[list[str]]:
    """n answers per prompt row {question_id, subset, question, profile}; out[i][j] = sample j of row i.

    Sample j of question q uses the noise seed stable_seed(seed, q, j): deterministic and
    independent of batch size and prompt order. greedy=True (or temperature 0) decodes greedily.
    Every generation setting is explicit (prbench.generation): the model's own
    generation_config.json is ignored."""
    import torch
    from transformers import LogitsProcessorList

    if n < 1:
        raise ValueError("n must be >= 1")
    tok = prepare_tokenizer(tokenizer)
    greedy = greedy or temperature == 0
    texts = [policy_prompt(tok, r) for r in prompts]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    jobs = [(i, j) for i in range(len(prompts)) for j in range(1 if greedy else n)]
    jobs.sort(key=lambda ij: (len(ids[ij[0]]), ij[0], ij[1]))  # length-sorted batches: little padding
    eos = model.generation_config.eos_token_id if getattr(model, "generation_config", None) else None
    neutralize(model)
    # Sampling is greedy decoding over Gumbel-perturbed logits (GumbelSampler), so do_sample stays
    # False; the repetition penalty (neutral 1.0 unless configured) is applied by transformers first.
    gen_cfg = generation_config(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id,
                                eos_token_id=eos if eos is not None else tok.eos_token_id,
                                repetition_penalty=repetition_penalty)
    device = next(model.parameters()).device
    out: list[list[str | None]] = [[None] * n for _ in prompts]
    it = range(0, len(jobs), batch_size)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="generate", unit="batch", mininterval=5)
    for b in it:
        batch = jobs[b:b + batch_size]
        width = max(len(ids[i]) for i, _ in batch)
        input_ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(batch), width), dtype=torch.long)
        for r, (i, _) in enumerate(batch):
            L = len(ids[i])
            input_ids[r, width - L:] = torch.tensor(ids[i], dtype=torch.long)
            attn[r, width - L:] = 1
        kw = {}
        if not greedy:
            seeds = [stable_seed(seed, prompts[i].get("question_id", i), j) for i, j in batch]
            kw["logits_processor"] = LogitsProcessorList([GumbelSampler(seeds, width, temperature, top_p, top_k)])
        with torch.inference_mode():
            gen = model.generate(input_ids=input_ids.to(device), attention_mask=attn.to(device),
                                 generation_config=gen_cfg, **kw)
        dec = tok.batch_decode(gen[:, width:], skip_special_tokens=True)
        for (i, j), t in zip(batch, dec):
            out[i][j] = t.strip()
    if greedy:
        for row in out:
            row[1:] = [row[0]] * (n - 1)
    return out  # type: ignore[return-value]


def generate_answers_vllm(path: str, prompts: Sequence[dict], n: int = 1, temperature: float = 1.0,
                          top_p: float = 1.0, max_new_tokens: int = 64, seed: int = 0,
                          trust_remote_code: bool = False, greedy: bool = False, top_k: int = 0,
                          repetition_penalty: float = 1.0, engine: dict | None = None) -> list[list[str]]:
    """Optional vLLM backend (config bon.backend: vllm); seeded per question."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise ImportError("config key bon.backend: 'vllm' selected but vllm is not installed "
                          "(pip install 'prbench[vllm]')") from exc
    llm = LLM(model=resolve_model_ref(str(path)), trust_remote_code=trust_remote_code, seed=seed,
              **vllm_engine_kwargs(engine))  # pragma: no cover
    tok = llm.get_tokenizer()  # pragma: no cover
    texts = [policy_prompt(tok, r) for r in prompts]  # pragma: no cover
    sampling = vllm_sampling_kwargs(0.0 if greedy else temperature, top_p, top_k, repetition_penalty)
    params = [SamplingParams(n=n, max_tokens=max_new_tokens, seed=stable_seed(seed, r.get("question_id", i)), **sampling)
              for i, r in enumerate(prompts)]
    outs = llm.generate(texts, params, use_tqdm=True)  # pragma: no cover
    return [[o.text.strip() for o in res.outputs] for res in outs]  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# The demo policy
# ---------------------------------------------------------------------------------------------
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
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, heads = int(cfg.get("hidden_size", 128)), int(cfg.get("heads", 4))
    if hidden % heads:
        raise ValueError(f"config key demo_training.policy.heads: {heads} must divide hidden_size {hidden}")
    conf = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 3,
                       num_hidden_layers=int(cfg.get("layers", 2)), num_attention_heads=heads,
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
            add("answer", lambda k, ans=ans: P.policy_messages(q, prof[:k]), ans, len(prof))
        u = (stable_seed(seed, "judge_group", pid) % 100000) / 100000
        if u < judge_fraction:
            for a, b, res in ((c, r, "Result: A"), (r, c, "Result: B")):
                add("judge", lambda k, a=a, b=b: P.pairwise_judge_messages(q, a, b, prof[:k]), res, len(prof))
        elif u < judge_fraction + reference_fraction:
            for ans, wins in ((c, True), (r, False)):
                first = stable_seed(seed, "ref_order", pid, wins) % 2 == 0
                a, b = (ans, reference_answer) if first else (reference_answer, ans)
                res = "Result: A" if first == wins else "Result: B"
                add("judge_reference", lambda k, a=a, b=b: P.pairwise_judge_messages(q, a, b, prof[:k]), res,
                    len(prof))
    return ex, stats


def _cpu_bf16_ok() -> bool:
    """bf16 autocast only where the CPU has native bf16 matmuls (oneDNN), else it would be slower."""
    import torch

    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # pragma: no cover
        return False


def train_demo_policy(train_path: str, out_dir: str, cfg: dict, seed: int = 0, threads: int = 1,
                      judge_fraction: float = JUDGE_FRACTION, reference_fraction: float = REFERENCE_FRACTION) -> dict:
    """Train the demo policy on results/data/train/personalized.jsonl and save an HF folder.

    Mixed precision: bf16 autocast where the device supports it (about 2x faster on CPUs with
    AVX512-BF16); the saved weights are fp32."""
    import tempfile

    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from .io import read_jsonl

    t0 = time.time()
    torch.set_num_threads(max(1, threads))
    seed_everything(seed)
    pairs = read_jsonl(train_path)
    if not pairs:
        raise ValueError(f"{train_path}: no training pairs")
    max_length = int(cfg.get("max_length", 256))
    texts = []
    for p in pairs:
        texts += [p["question"], p["chosen"], p["rejected"], *p.get("profile", [])]
    texts += [P.PAIRWISE_TEMPLATE, REFERENCE_ANSWER, "Result: A", "Result: B"]
    tok = train_tokenizer(texts, int(cfg.get("vocab_size", 2048)), model_max_length=max_length)
    examples, stats = build_sft_examples(pairs, tok, max_length, seed, judge_fraction=judge_fraction,
                                         reference_fraction=reference_fraction)
    log.info("SFT examples: %s", stats)
    model = build_model(tok, cfg, seed, max_positions=max(1024, 4 * max_length))
    n_params = sum(p.numel() for p in model.parameters())
    ds = Dataset.from_list(examples).shuffle(seed=seed)
    bs = int(cfg.get("batch_size", 32))
    total_steps = math.ceil(len(examples) / bs) * float(cfg.get("epochs", 3))
    use_cpu = not torch.cuda.is_available()
    bf16 = torch.cuda.is_bf16_supported() if not use_cpu else _cpu_bf16_ok()
    with tempfile.TemporaryDirectory() as tmp:
        args = SFTConfig(
            output_dir=tmp, num_train_epochs=float(cfg.get("epochs", 3)), learning_rate=float(cfg.get("lr", 1e-3)),
            per_device_train_batch_size=bs, max_length=max_length,
            lr_scheduler_type="cosine", warmup_steps=0.05, weight_decay=0.0,
            logging_steps=max(1, min(20, int(total_steps) // 10)),
            save_strategy="no", report_to=[], seed=seed, data_seed=seed, use_cpu=use_cpu,
            completion_only_loss=True, dataloader_num_workers=0, disable_tqdm=True,
            dataset_num_proc=None, train_sampling_strategy="group_by_length", bf16=bf16, fp16=False)
        trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
        result = trainer.train()
        history = [h for h in trainer.state.log_history if "loss" in h]
    model = trainer.model
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    report = {"examples": stats, "n_examples": len(examples), "params": n_params, "vocab_size": len(tok),
              "train_loss": float(result.training_loss), "steps": int(result.global_step),
              "first_logged_loss": history[0]["loss"] if history else None,
              "last_logged_loss": history[-1]["loss"] if history else None,
              "seconds": round(time.time() - t0, 1), "threads": threads, "bf16_autocast": bool(bf16)}
    (out / "train_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    log.info("demo policy: %s", report)
    return report
