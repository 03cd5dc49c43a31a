"""Policies: loading any causal LM and deterministic batched sampling.

`load_policy` loads any causal LM folder or hub id (tokenizer with chat template and pad token,
left padding). `generate_answers` renders the paper's policy prompt (question + top-k profile,
`prompts.policy_messages`) with the tokenizer's chat template and samples with HF `generate`
(KV cache, batching). Sampling uses the Gumbel-max trick with noise hashed from
(seed, question_id, sample_idx, step, token), so every sample is a function of its own seed only:
results do not depend on batch size, shard layout or the order of the prompts.
vLLM (`generate_answers_vllm`) is an optional backend, imported only when selected.

The demo policy's tokenizer, model and training live in prbench.training.policy.
"""
from __future__ import annotations

import logging
from typing import Sequence

from .. import prompts as P
from ..generation import generation_config, neutralize, vllm_sampling_kwargs
from ..models import auto_device, auto_dtype, resolve_model_ref, vllm_engine_kwargs
from ..revisions import hub_kwargs, record_loaded
from ..seeding import stable_seed

log = logging.getLogger("prbench.downstream.policy")


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
def load_policy(path: str, device: str = "auto", trust_remote_code: bool = False, dtype: str = "auto",
                use_safetensors: bool = True, revision: str | None = None, key: str = "policies.<policy>.path"):
    """(model, tokenizer) ready for generation: eval mode, pad token set, left padding. A hub id loads
    at `revision` (config policies.<p>.revision), else at its locked commit (prbench.revisions)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = auto_device(device)
    ref = resolve_model_ref(str(path))
    rev = hub_kwargs(ref, "model", revision, key=key, trust_remote_code=trust_remote_code)
    tok = AutoTokenizer.from_pretrained(ref, trust_remote_code=trust_remote_code, **rev)
    model = AutoModelForCausalLM.from_pretrained(ref, dtype=auto_dtype(dtype, dev), trust_remote_code=trust_remote_code,
                                                 use_safetensors=use_safetensors, **rev).to(dev).eval()
    record_loaded(ref, "model", revision, key=key, loaded=model)
    neutralize(model)  # the model's generation_config.json never reaches sampling (prbench.generation)
    prepare_tokenizer(tok)
    return model, tok


def load_policy_model(path: str, trust_remote_code: bool = False, device: str = "auto", dtype: str = "auto",
                      revision: str | None = None):
    """`load_policy` with the argument order of the trained-policy stages (PPO, GRPO, evaluation).

    Models PPO and GRPO train are loaded with dtype="float32" (bf16 autocast on GPU): AdamW steps of
    lr 5e-7 vanish in bf16 weights."""
    return load_policy(str(path), device=device, trust_remote_code=trust_remote_code, dtype=dtype, revision=revision)


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
                                                    categories=row.get("profile_categories", ())),
                         add_generation_prompt=True)


# ---------------------------------------------------------------------------------------------
# Deterministic sampling (Gumbel-max with hashed noise)
# ---------------------------------------------------------------------------------------------
_M32 = 0xFFFFFFFF


def _mix32(x):
    """A 32-bit integer hash (lowbias32-style) of an int64 tensor holding values < 2^32, computed in
    place (the tensor is overwritten; the values are those of the out-of-place formula)."""
    x ^= x >> 16
    x *= 0x45D9F3B
    x &= _M32
    x ^= x >> 16
    x *= 0x45D9F3B
    x &= _M32
    x ^= x >> 16
    return x


_TOKEN_HASHES: dict = {}


def _token_hashes(vocab: int, device):
    """The per-token half of the noise's hash, (vocab,) int64, computed once per vocabulary size."""
    import torch

    key = (int(vocab), str(device))
    if key not in _TOKEN_HASHES:
        tokens = torch.arange(vocab, device=device, dtype=torch.int64)
        _TOKEN_HASHES[key] = _mix32((tokens * 0x85EBCA6B) & _M32)
    return _TOKEN_HASHES[key]


def _uniform_at(row_seeds, step: int, token_hashes):
    """U(0,1) noise, float64, of each row seed at `step` and the tokens whose hashes are given:
    `token_hashes` (vocab,) for every token of every row, or (rows, m) for m tokens of each row."""
    import torch

    step_h = _mix32(torch.tensor(step * 0x9E3779B1 & _M32, device=row_seeds.device))
    row = _mix32((row_seeds.to(torch.int64) ^ step_h) & _M32)[:, None]
    x = _mix32(row ^ token_hashes)
    x ^= (row * 0x27D4EB2F) & _M32
    u = _mix32(x).to(torch.float64)
    u += 0.5
    u /= 4294967296.0
    return u


def hashed_uniform(row_seeds, step: int, vocab: int):
    """U(0,1) noise of shape (rows, vocab), a pure function of (row seed, step, token id)."""
    return _uniform_at(row_seeds, step, _token_hashes(vocab, row_seeds.device))


def _gumbel(u):
    """-log(-log(u)), float64 (u is kept; one new tensor)."""
    import torch

    g = torch.log(u)
    g.neg_()
    g = torch.log_(g)
    return g.neg_()


# how many of a row's most likely tokens top_p_drop (and the sampler) try before sorting the whole row
NUCLEUS_K = 64


def top_p_drop(logits, top_p: float, k: int = NUCLEUS_K):
    """The tokens outside the nucleus: in order of falling probability, a token is dropped once the
    probability before it reaches `top_p` (the first token is always kept). Rows whose nucleus ends
    within their `k` most likely tokens need only those (`torch.topk`); the rest sort the whole
    vocabulary. Both read the same probabilities, so the split changes no decision (ties at the
    nucleus' edge aside, which either order may break). The running sums are float64 on both paths, so
    a token at the nucleus' edge is decided alike by either path, on CPU and CUDA, whatever the
    batch (float32 sums of the same probabilities differed in the last bit between them)."""
    import torch

    probs = torch.softmax(logits, dim=-1)
    drop = torch.ones_like(probs, dtype=torch.bool)
    rest = torch.arange(probs.shape[0], device=probs.device)  # the rows that need the full sort
    if k < probs.shape[-1]:
        inside, idx, dropped = _nucleus_in_top_k(probs, top_p, k)
        drop[inside] = drop[inside].scatter(-1, idx, dropped)
        rest = rest[~inside]
    if len(rest):
        drop[rest] = _full_sort_drop(probs[rest], top_p)
    return drop


def _nucleus_in_top_k(probs, top_p: float, k: int):
    """top_p_drop's shortcut: the rows whose nucleus lies in their k most likely tokens (a bool mask),
    and for those rows the top k's token ids and whether each is dropped (both (rows inside, k))."""
    import torch

    top, idx = torch.topk(probs, k, dim=-1)
    top = top.double()
    before = top.cumsum(-1) - top
    inside = before[:, -1] >= top_p  # the k-th token is dropped: the nucleus lies in the top k
    return inside, idx[inside], before[inside] >= top_p


def _full_sort_drop(probs, top_p: float):
    import torch

    top, idx = torch.sort(probs, descending=True, dim=-1)
    top = top.double()
    before = top.cumsum(-1) - top
    return torch.ones_like(probs, dtype=torch.bool).scatter(-1, idx, before >= top_p)


class GumbelSampler:
    """Logits processor turning greedy decoding into seeded sampling (temperature + top-p).

    argmax(logits / T + Gumbel noise) is a sample from softmax(logits / T); the noise of row r
    at generation step t is hashed from (row_seeds[r], t), so it is independent of batching.
    Its output is float32(float64(logits / T) + noise) for the tokens top-k and top-p keep, -inf for
    the rest. Rows whose nucleus lies in the top_p_drop shortcut's top k hash the noise of those k
    tokens only: the same values at the same tokens as hashing the whole vocabulary."""

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
        seeds = self.row_seeds.to(logits.device)
        hashes = _token_hashes(logits.shape[-1], logits.device)
        if self.top_p >= 1.0:
            return self._noisy(logits, seeds, step, hashes)
        probs = torch.softmax(logits, dim=-1)
        out = torch.full_like(logits, float("-inf"))
        rest = torch.arange(logits.shape[0], device=logits.device)
        if NUCLEUS_K < logits.shape[-1]:
            inside, idx, dropped = _nucleus_in_top_k(probs, self.top_p, NUCLEUS_K)
            if len(idx):
                vals = logits[inside].gather(-1, idx).double()
                vals += _gumbel(_uniform_at(seeds[inside], step, hashes[idx]))
                vals = vals.to(torch.float32).masked_fill(dropped, float("-inf"))
                out[inside] = out[inside].scatter(-1, idx, vals)
            rest = rest[~inside]
        if len(rest):
            kept = logits[rest].masked_fill(_full_sort_drop(probs[rest], self.top_p), float("-inf"))
            out[rest] = self._noisy(kept, seeds[rest], step, hashes)
        return out

    @staticmethod
    def _noisy(logits, seeds, step: int, hashes):
        import torch

        vals = logits.double()
        vals += _gumbel(_uniform_at(seeds, step, hashes))
        return vals.to(torch.float32)


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
            out[i][j] = P.answer_text(t)
    if greedy:
        for row in out:
            row[1:] = [row[0]] * (n - 1)
    return out  # type: ignore[return-value]


def generate_answers_vllm(path: str, prompts: Sequence[dict], n: int = 1, temperature: float = 1.0,
                          top_p: float = 1.0, max_new_tokens: int = 64, seed: int = 0,
                          trust_remote_code: bool = False, greedy: bool = False, top_k: int = 0,
                          repetition_penalty: float = 1.0, engine: dict | None = None,
                          revision: str | None = None) -> list[list[str]]:
    """Optional vLLM backend (config bon.backend: vllm); seeded per question."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise ImportError("config key bon.backend: 'vllm' selected but vllm is not installed "
                          "(pip install 'prbench[vllm]')") from exc
    ref = resolve_model_ref(str(path))
    rev = hub_kwargs(ref, "model", revision, key="policies.<policy>.path", trust_remote_code=trust_remote_code)
    rev = {**rev, "tokenizer_revision": rev["revision"]} if rev else {}
    llm = LLM(model=ref, trust_remote_code=trust_remote_code, seed=seed, **rev,
              **vllm_engine_kwargs(engine))  # pragma: no cover
    record_loaded(ref, "model", revision, key="policies.<policy>.path")  # pragma: no cover
    tok = llm.get_tokenizer()  # pragma: no cover
    texts = [policy_prompt(tok, r) for r in prompts]  # pragma: no cover
    sampling = vllm_sampling_kwargs(0.0 if greedy else temperature, top_p, top_k, repetition_penalty)
    params = [SamplingParams(n=n, max_tokens=max_new_tokens, seed=stable_seed(seed, r.get("question_id", i)),
                             **sampling)
              for i, r in enumerate(prompts)]
    outs = llm.generate(texts, params, use_tqdm=True)  # pragma: no cover
    return [[P.answer_text(o.text) for o in res.outputs] for res in outs]  # pragma: no cover
