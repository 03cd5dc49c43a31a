"""Every generation setting explicit: a model's own generation_config.json never reaches sampling.

transformers 5 fills each generation field a caller leaves unset from the model's
`generation_config.json` (Qwen2.5-Instruct ships repetition_penalty 1.05-1.1, top_k 20, top_p 0.8,
temperature 0.7), and its global default top_k is 50. trl 1.12's PPO builds a GenerationConfig
with only some fields set, so the rest leak too: rollout log-probs then differ from the log-probs
PPO recomputes, BoN samples a different distribution than configured, and "greedy" is not greedy.

Two guards, used by every generating path (policy sampling, PPO rollouts and evaluation,
generative RMs, the transformers judge):
- `neutralize(model)` replaces `model.generation_config` with one that keeps only the token ids
  (bos/eos/pad/decoder start) of the original, so nothing else can be filled from it;
- `generation_config(...)` builds the config a `generate()` call uses with every sampling field
  set: temperature, top_p, top_k (0 = off) and repetition_penalty come from the caller (the
  config), everything else at its neutral value.
vLLM paths pass the same four fields explicitly (`vllm_sampling_kwargs`).
"""
from __future__ import annotations

from typing import Mapping

# The sampling settings a config may set, at their neutral values (no effect on the distribution).
NEUTRAL = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "repetition_penalty": 1.0}
_TOKEN_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
# Fields that change which token is picked; all set explicitly (neutral) in every config we build.
_NEUTRAL_EXTRA = {"num_beams": 1, "num_beam_groups": 1, "typical_p": 1.0, "min_p": None, "epsilon_cutoff": 0.0,
                  "eta_cutoff": 0.0, "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
                  "encoder_repetition_penalty": 1.0, "length_penalty": 1.0, "diversity_penalty": 0.0,
                  "min_length": 0, "min_new_tokens": None, "bad_words_ids": None, "suppress_tokens": None,
                  "begin_suppress_tokens": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
                  "sequence_bias": None, "exponential_decay_length_penalty": None, "renormalize_logits": False,
                  "remove_invalid_values": False, "num_return_sequences": 1}


def sampling_settings(cfg: Mapping | None = None, **overrides) -> dict:
    """temperature / top_p / top_k / repetition_penalty from a config section, neutral when absent."""
    out = dict(NEUTRAL)
    for k in NEUTRAL:
        if cfg is not None and cfg.get(k) is not None:
            out[k] = cfg[k]
        if overrides.get(k) is not None:
            out[k] = overrides[k]
    out["temperature"], out["top_p"] = float(out["temperature"]), float(out["top_p"])
    out["top_k"], out["repetition_penalty"] = int(out["top_k"]), float(out["repetition_penalty"])
    return out


def neutral_values() -> dict:
    """Every field that shapes which token is picked (the sampling settings and the rest), at its
    neutral value; None = unset. For code that checks a config against them
    (`prbench.downstream.ppo.sampler`)."""
    return {**NEUTRAL, **_NEUTRAL_EXTRA}


def neutral_fields() -> dict:
    """The non-sampling generation fields at their neutral values (None-valued ones left out), for
    trainers that build their own GenerationConfig from keyword arguments (trl's GRPO
    `generation_kwargs`)."""
    return {k: v for k, v in _NEUTRAL_EXTRA.items() if v is not None}


def neutralize(model) -> None:
    """Keep only the token ids of `model.generation_config` (idempotent; no-op without one)."""
    from transformers import GenerationConfig

    old = getattr(model, "generation_config", None)
    if old is None:
        return
    keep = {k: getattr(old, k, None) for k in _TOKEN_FIELDS if getattr(old, k, None) is not None}
    model.generation_config = GenerationConfig(**keep)


def generation_config(*, max_new_tokens: int, do_sample: bool, pad_token_id=None, eos_token_id=None,
                      temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                      repetition_penalty: float = 1.0, **extra):
    """A GenerationConfig with every field that shapes the token distribution set explicitly."""
    from transformers import GenerationConfig

    fields = dict(_NEUTRAL_EXTRA)
    fields.update(max_new_tokens=int(max_new_tokens), do_sample=bool(do_sample), temperature=float(temperature),
                  top_p=float(top_p), top_k=int(top_k), repetition_penalty=float(repetition_penalty),
                  pad_token_id=pad_token_id, eos_token_id=eos_token_id)
    fields.update(extra)
    if not do_sample:  # greedy: the sampling filters do not apply (transformers warns on a non-default top_k)
        fields.pop("top_k")
    cfg = GenerationConfig(**{k: v for k, v in fields.items() if v is not None})
    # None-valued fields must stay None *explicitly*: GenerationConfig() leaves them None, and
    # neutralize() makes sure the model's config has nothing to fill them with.
    return cfg


def vllm_sampling_kwargs(temperature: float, top_p: float, top_k: int = 0, repetition_penalty: float = 1.0) -> dict:
    """vLLM SamplingParams fields (vLLM also reads a model's generation_config.json for defaults)."""
    return {"temperature": float(temperature), "top_p": float(top_p), "top_k": int(top_k) if top_k > 0 else -1,
            "repetition_penalty": float(repetition_penalty), "min_p": 0.0, "presence_penalty": 0.0,
            "frequency_penalty": 0.0}
