"""How a `classifier` RM's model is loaded and where its score is read: one adapter per interface.

- `sequence_classifier`
  - loaded with: AutoModelForSequenceClassification
  - score: the single logit (softmax of the last class for several labels), read at the last real token
  - models: Skywork-Reward-V2 (Llama-3.1, Qwen3), any native `*ForSequenceClassification`,
    the demo's MiniLM cross-encoders
- `score_output`
  - loaded with: AutoModelForSequenceClassification + the entry's remote code
  - score: the output's `.score`, shape (B,) or (B, 1) (its logits when it has none)
  - models: ArmoRM family (`LlamaForRewardModelWithGating`), other remote classifiers
- `reward_token`
  - loaded with: AutoModel + remote code
  - score: the model's reward at `config.reward_token_id`, appended to the chat as the model card's
    `get_score` does
  - models: InternLM2-reward family

`choose_adapter` picks one from the model's own `config.json` (`architectures`, `auto_map`,
`reward_token_id`); the entry's `adapter` key forces one. Adding an interface = one class here
with `name`, `auto_class`, `suffix_ids` and `scores`, plus its name in `ADAPTERS` (the schema's
`adapter` enum lists the same names).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

log = logging.getLogger("prbench.rms.adapters")


def finish_logits(logits) -> np.ndarray:
    """Head logits (B, C) -> scores: the single logit, or the softmax probability of the last class."""
    import torch

    logits = logits.float()
    if logits.dim() == 1 or logits.shape[-1] == 1:
        return logits.reshape(logits.shape[0]).cpu().numpy()
    return torch.softmax(logits, dim=-1)[:, -1].cpu().numpy()


class SequenceClassifierAdapter:
    name = "sequence_classifier"
    auto_class = "AutoModelForSequenceClassification"
    prefix_cache = True  # rms/prefix.py may run shared prompts once

    def suffix_ids(self, model) -> list[int]:
        """Token ids appended after the rendered chat (none for plain classifiers)."""
        return []

    def scores(self, model, batch: dict) -> np.ndarray:
        return finish_logits(model(**batch).logits)


class ScoreOutputAdapter(SequenceClassifierAdapter):
    """Remote-code classifiers (`auto_map` AutoModelForSequenceClassification). The score is the
    output's `.score` when it has one (ArmoRM: shape (B,), `logits=score`), else its logits read
    like a plain classifier's."""

    name = "score_output"
    prefix_cache = False  # remote code: its own forward decides where to read

    def scores(self, model, batch: dict) -> np.ndarray:
        batch = {k: v for k, v in batch.items() if k != "token_type_ids"}
        out = model(**batch)
        score = getattr(out, "score", None)
        if score is None:
            return finish_logits(out.logits)
        return score.float().reshape(score.shape[0], -1)[:, 0].cpu().numpy()


class RewardTokenAdapter(SequenceClassifierAdapter):
    """AutoModel reward models that read the reward at an appended `config.reward_token_id`
    (InternLM2-reward: `get_score(tokenizer, chat)` renders the chat template, encodes it without
    special tokens, appends the reward token and returns the reward there)."""

    name = "reward_token"
    auto_class = "AutoModel"
    prefix_cache = False

    def suffix_ids(self, model) -> list[int]:
        rid = getattr(model.config, "reward_token_id", None)
        if rid is None:
            raise ValueError(f"{type(model).__name__}: config has no reward_token_id (adapter reward_token)")
        return [int(rid)]

    def scores(self, model, batch: dict) -> np.ndarray:
        batch = {k: v for k, v in batch.items() if k != "token_type_ids"}
        out = model(**batch)
        logits = out.logits if getattr(out, "logits", None) is not None else out[0]
        return logits.float().reshape(logits.shape[0], -1)[:, -1].cpu().numpy()


ADAPTERS = {a.name: a for a in (SequenceClassifierAdapter, ScoreOutputAdapter, RewardTokenAdapter)}


def read_model_config(path: str) -> dict | None:
    """The model's config.json when `path` is a local folder (None for hub ids: the adapter is then
    decided after loading the config through transformers)."""
    p = Path(path) / "config.json"
    if p.is_file():
        return json.loads(p.read_text())
    return None


def choose_adapter(config: dict, key: str, forced: str | None = None):
    """The adapter for a model config (dict of config.json). `key` names the config entry in errors."""
    if forced:
        if forced not in ADAPTERS:
            raise ValueError(f"config key {key}.adapter: unknown adapter {forced!r} (known: {', '.join(ADAPTERS)})")
        return ADAPTERS[forced]()
    archs = list(config.get("architectures") or [])
    auto_map = dict(config.get("auto_map") or {})
    if "AutoModelForSequenceClassification" in auto_map:
        return ScoreOutputAdapter()
    if config.get("reward_token_id") is not None and "AutoModel" in auto_map:
        return RewardTokenAdapter()
    if any(a.endswith("ForSequenceClassification") for a in archs) or not archs:
        return SequenceClassifierAdapter()
    raise ValueError(
        f"config key {key}: no RM adapter for architectures {archs} (auto_map: {sorted(auto_map) or 'none'}). "
        f"Known adapters: {', '.join(ADAPTERS)}; force one with {key}.adapter, or add one in prbench/rms/adapters.py")
