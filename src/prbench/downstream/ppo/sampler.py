"""Rollout token draws by inverse CDF (`ppo.rollout_sampler: inverse_cdf`, the forward rollout path only).

HF `generate` samples a token with `torch.multinomial(softmax(scores / T), 1)`, which on CPU draws
one exponential per vocabulary entry and row each decode step (151,936 for Qwen2.5: most of a CPU
rollout's time, perf/README.md "PPO rollouts"). `InverseCDFSampler` draws the same distribution
with one uniform per row: the tempered weights w = 2^((x - max) log2(e) / T) = exp((x - max) / T),
one `torch.rand` per row from the global RNG (on the scores' device) scaled by the row's total, and
the entry where it falls in the cumulative weights, searched in two levels: the cumulative masses
of blocks of BLOCK entries pick a block, the block's own cumulative weights an entry
(`searchsorted`, right, both times with the same uniform). Token i of block k is drawn with
probability (mass_k / total) x (w_i / mass_k) = w_i / total up to rounding. The tokens are equally
distributed but not the tokens multinomial draws for the same seed.

Precision and cost: the weights are float32 (as HF's softmax), the cumulative sums and the
uniform float64, so a small probability keeps ~1e-7 of itself even over a 151,936-entry vocabulary,
where one float32 cumulative sum (or a 24-bit uniform) would move a 1e-5 probability by about 1% of
itself. One float64 cumulative sum over the whole vocabulary would cost about as much as the
exponentials it replaces on CPU; the blocks keep the full-vocabulary work to the weights and one
float32 sum per block. The weights are computed in place over the scores (max, subtract, multiply,
`exp2`: on this project's AVX2 CPU torch's `exp2` costs about 60% of its `exp`, and no weights
tensor is allocated) when the vocabulary is whole blocks (151,936, 152,064 and 128,256 are), in a
zero-padded copy otherwise. A zero weight (a -inf logit, or one that underflows, as in softmax)
never takes a draw: the uniform is kept strictly below the total (and the block's place below the
block's), and `right` skips entries where the cumulative sum does not grow. A row without a finite
maximum logit (all -inf, or +inf/NaN) is refused with an error, as multinomial refuses it.

Two ways to decode with it, the same tokens for the same seed (tests/test_ppo_sampler.py):
- `decode_inverse_cdf`, what the forward rollout path runs: a decode loop of its own over the
  model's KV cache (prefill, then one token per step), which hands each step's last-position
  logits straight to the sampler. HF's `generate` around it would add a float32 copy of the
  logits and an argmax over the vocabulary per step, and its logits processors; the loop applies
  the only ones a rollout config may ask for (EOS held back before `min_new_tokens`, finished rows
  padded, stop when every row has ended) and refuses a config that would make HF build any other
  (`decode_settings`, naming the field). A model whose forward takes no cache argument decodes
  through HF instead.
- `inverse_cdf_generation`: a `LogitsProcessor` under greedy decoding in HF's `generate`: HF applies
  its own processors first, then this one draws (overwriting the scores with the weights) and
  writes +inf at the drawn entry, and greedy decoding's argmax takes it.

Memory: a decode step holds the logits (their float32 copy when the model runs in bf16), 1-2 of
`memory.GEN_STEP_COPIES`' 4 float32 copies (multinomial's logits, scores, probabilities and draws).
"""
from __future__ import annotations

import copy
import inspect
import math

import torch
from transformers import LogitsProcessor

from ...generation import neutral_values

# Entries of a block: the cumulative sums run over the block masses and one block per row
BLOCK = 128
LOG2E = 1.0 / math.log(2.0)


class InverseCDFSampler(LogitsProcessor):
    """Draws one token per row from softmax(scores / temperature). `draw` overwrites the scores
    with the tempered weights; as a logits processor it then marks the drawn entry with +inf.
    `record=True` keeps the log-probability of each drawn token (float64, one (rows,) tensor a
    step) in `logprobs`, for tests."""

    def __init__(self, temperature: float, record: bool = False):
        temperature = float(temperature)
        if not (temperature > 0 and math.isfinite(temperature)):
            raise ValueError(f"inverse_cdf sampler: temperature must be positive, got {temperature!r}")
        self.temperature = temperature
        self.logprobs: list[torch.Tensor] | None = [] if record else None

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        """One token id per row of `scores` (rows x vocabulary, float32; overwritten with the
        weights when the vocabulary is whole blocks), shape (rows, 1): a block of BLOCK entries by
        the blocks' cumulative masses, then an entry of that block by its cumulative weights, both
        searched with the same uniform (float64, so the second search keeps its precision)."""
        rows, vocab = scores.shape
        blocks = -(-vocab // BLOCK)
        if vocab % BLOCK:  # zero-padded to whole blocks
            padded = scores.new_zeros(rows, blocks * BLOCK)
            weights = padded[:, :vocab].copy_(scores)
        else:
            padded = weights = scores
        top = weights.amax(dim=-1, keepdim=True)
        if not torch.isfinite(top).all():
            bad = (~torch.isfinite(top)).nonzero()[:, 0].tolist()
            raise ValueError(f"inverse_cdf sampler: rows {bad} have no finite maximum logit (all -inf, or +inf/NaN)")
        weights.sub_(top).mul_(LOG2E / self.temperature).exp2_()  # exp((x - max) / T)
        padded = padded.view(rows, blocks, BLOCK)
        block_cdf = padded.sum(dim=-1).double().cumsum_(dim=-1)
        total = block_cdf[:, -1:]
        u = torch.rand(total.shape, dtype=torch.float64, device=scores.device).mul_(total)
        # rand < 1, but rand * total can round up to total: keep u below it (a draw at the total
        # would fall past the last positive weight)
        u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))
        # right: the first block whose cumulative mass exceeds u, so a block of zero mass is skipped
        k = torch.searchsorted(block_cdf, u, right=True)
        start = torch.where(k > 0, block_cdf.gather(1, (k - 1).clamp_(min=0)), 0.0)
        mass = block_cdf.gather(1, k) - start  # > 0: block_cdf[k - 1] <= u < block_cdf[k]
        inner = padded.gather(1, k.unsqueeze(-1).expand(rows, 1, BLOCK)).squeeze(1).double().cumsum_(dim=-1)
        inner_total = inner[:, -1:]
        r = (u - start).div_(mass).mul_(inner_total)  # u's place in the block, on the block's own scale
        r = torch.minimum(r, torch.nextafter(inner_total, torch.zeros_like(inner_total)))
        j = torch.searchsorted(inner, r, right=True)
        if self.logprobs is not None:  # P(block) x P(entry | block), as drawn
            w = inner.gather(1, j) - torch.where(j > 0, inner.gather(1, (j - 1).clamp(min=0)), 0.0)
            self.logprobs.append((mass.log() - total.log() + w.log() - inner_total.log()).squeeze(1))
        return k * BLOCK + j

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        idx = self.draw(scores)
        scores.scatter_(1, idx, math.inf)  # the drawn entry above every weight, for greedy's argmax
        return scores


# Sampling filters of a GenerationConfig the sampler does not apply, with the values that leave the
# distribution as it is (None: unset).
_NEUTRAL = {"top_k": (None, 0), "top_p": (None, 1.0), "min_p": (None,), "typical_p": (None, 1.0),
            "epsilon_cutoff": (None, 0.0), "eta_cutoff": (None, 0.0), "top_h": (None,), "num_beams": (None, 1),
            "renormalize_logits": (None, False), "watermarking_config": (None,)}
# What else makes HF's generate build a logits processor or stopping criterion, or another decoding
# mode, with its neutral values: decode_inverse_cdf applies none of these. prbench.generation's
# fields that shape the token distribution, less the two the loop applies itself (temperature,
# min_new_tokens) and beam search's length_penalty, then the fields only generate reads.
_DECODE_NEUTRAL = {k: (None, v) for k, v in neutral_values().items()
                   if k not in ("temperature", "min_new_tokens", "length_penalty")}
_DECODE_NEUTRAL.update({"guidance_scale": (None, 1.0), "stop_strings": (None,), "max_time": (None,),
                        "penalty_alpha": (None,), "assistant_model": (None,), "prompt_lookup_num_tokens": (None,),
                        "use_cache": (None, True), "cache_implementation": (None,), "prefill_chunk_size": (None,)})


def _refuse_filters(config, table) -> None:
    bad = {k: getattr(config, k, None) for k, ok in table.items() if getattr(config, k, None) not in ok}
    if bad:
        raise ValueError(f"config key ppo.rollout_sampler inverse_cdf: draws from the tempered softmax only "
                         f"(top_k 0, top_p 1.0, no other filter, penalty or stopping rule), the generation "
                         f"config sets {bad}")


def inverse_cdf_generation(generation_config, record: bool = False):
    """(a copy of `generation_config` decoding greedily, the `InverseCDFSampler` to pass as its
    `logits_processor`) for a sampling config (trl's: temperature + 1e-7, top_k 0, top_p 1.0).
    The sampling fields are unset in the copy (greedy applies no warper, so the values transformers
    fills in from the model's generation_config do not act); a filter the sampler would not apply
    is refused."""
    _refuse_filters(generation_config, _NEUTRAL)
    temperature = generation_config.temperature
    config = copy.deepcopy(generation_config)
    config.do_sample = False
    config.temperature = config.top_k = config.top_p = None
    return config, InverseCDFSampler(1.0 if temperature is None else temperature, record=record)


def decode_settings(model, generation_config) -> dict:
    """What `decode_inverse_cdf` runs for `generation_config` on `model`: the fields it leaves unset
    filled from `model.generation_config`, as transformers 5's `generate` fills them; refused
    (naming the fields) when that would ask for a filter, penalty, stopping rule or decoding mode
    the loop does not apply. Returns temperature, max_new_tokens, min_new_tokens, eos (list of
    ids) and pad."""
    config = copy.deepcopy(generation_config)
    own = getattr(model, "generation_config", None)
    if own is not None:
        config.update(**{k: v for k, v in own.to_dict().items() if getattr(config, k, None) is None
                         and not k.startswith("_") and k != "transformers_version"})
    _refuse_filters(config, {**_NEUTRAL, **_DECODE_NEUTRAL})
    if not config.do_sample:
        raise ValueError("decode_inverse_cdf samples: the generation config decodes greedily (do_sample False)")
    if config.max_new_tokens is None or config.max_new_tokens < 1:
        raise ValueError(f"config key ppo.rollout_sampler inverse_cdf: the generation config's max_new_tokens must "
                         f"be a positive number, got {config.max_new_tokens!r}")
    eos = config.eos_token_id
    eos = [] if eos is None else [int(eos)] if isinstance(eos, int) else [int(e) for e in eos]
    pad = config.pad_token_id if config.pad_token_id is not None else (eos[0] if eos else None)
    return dict(temperature=1.0 if config.temperature is None else float(config.temperature),
                max_new_tokens=int(config.max_new_tokens), min_new_tokens=int(config.min_new_tokens or 0),
                eos=eos, pad=pad)


def cache_argument(model) -> str | None:
    """The keyword the model's forward takes its KV cache by (`cache` in transformers >= 5.24,
    `past_key_values` before), or None: then `decode_inverse_cdf` decodes through HF's generate."""
    params = inspect.signature(model.forward).parameters
    return next((k for k in ("cache", "past_key_values") if k in params), None)


@torch.no_grad()
def decode_inverse_cdf(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, generation_config) -> torch.Tensor:
    """The response token ids (rows x decode steps) `generate(input_ids, attention_mask,
    generation_config)` gives with the `InverseCDFSampler` processor of `inverse_cdf_generation`,
    the same for the same seed, without HF's generate: left-padded prompts, positions from the
    attention mask, a DynamicCache, only the last position through the LM head; EOS held back
    before `min_new_tokens`; once a row has drawn an EOS its later tokens are the pad id; the loop
    ends when every row has ended or after `max_new_tokens`. One draw per row and step, finished
    rows included (HF's order of random draws)."""
    s = decode_settings(model, generation_config)
    cache_kw = cache_argument(model)
    if cache_kw is None:  # a model without a cache argument: HF's generate with the processor
        return _decode_with_hf(model, input_ids, attention_mask, generation_config)
    from transformers import DynamicCache

    sampler = InverseCDFSampler(s["temperature"])
    params = inspect.signature(model.forward).parameters
    keep = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
    try:
        cache = DynamicCache(config=model.config)
    except TypeError:
        cache = DynamicCache()
    rows = input_ids.shape[0]
    position_ids = attention_mask.long().cumsum(-1).sub_(1).masked_fill_(attention_mask == 0, 0)
    eos = torch.tensor(s["eos"], dtype=torch.long, device=input_ids.device)
    unfinished = torch.ones(rows, dtype=torch.bool, device=input_ids.device)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=True,
                   **{cache_kw: cache}, **keep).logits[:, -1]
    if cache.get_seq_length() != input_ids.shape[1]:  # the model did not fill the cache it was given
        return _decode_with_hf(model, input_ids, attention_mask, generation_config)  # (no draw made yet)
    tokens = []
    for step in range(s["max_new_tokens"]):
        logits = logits.float()  # float32 (the model's own logits, no copy, when it runs in float32)
        if len(eos) and step < s["min_new_tokens"]:
            logits[:, eos] = -math.inf
        token = sampler.draw(logits).squeeze(1)
        logits = None  # released before the next forward
        if len(eos):
            token = torch.where(unfinished, token, s["pad"])
            unfinished &= ~torch.isin(token, eos)
        tokens.append(token)
        if step + 1 == s["max_new_tokens"] or (len(eos) and not unfinished.any()):
            break
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones(rows, 1)], dim=-1)
        position_ids = position_ids[:, -1:] + 1
        logits = model(input_ids=token[:, None], attention_mask=attention_mask, position_ids=position_ids,
                       use_cache=True, **{cache_kw: cache}, **keep).logits[:, -1]
    return torch.stack(tokens, 1)


def _decode_with_hf(model, input_ids, attention_mask, generation_config) -> torch.Tensor:
    """decode_inverse_cdf through HF's generate (greedy, the sampler as its last processor)."""
    config, processor = inverse_cdf_generation(generation_config)
    config.return_dict_in_generate, config.output_scores, config.output_logits = False, False, False
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config,
                         logits_processor=[processor])
    return out[:, input_ids.shape[1]:]
