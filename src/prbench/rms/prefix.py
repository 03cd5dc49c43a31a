"""Prefix-cached scoring for decoder reward models: each shared prompt is run once.

Every pair of a benchmark shares its prompt (question plus profile posts), and in Best-of-N all
N samples of a question share it. A causal decoder's hidden states over the prompt do not depend
on what follows, so the prompt's key/value cache can be computed once and reused for every
answer. This module does that for `*ForSequenceClassification` decoders (Llama, Qwen2/3,
Mistral, Gemma families): group features by their shared prefix (the rendered chat up to the
start of the answer), run each unique prefix once, run the answers in length-bucketed batches on
copies of its cache, and read the score where the model itself reads it (the last token that is
not the pad id, as `*ForSequenceClassification.forward` does), through the model's own head.

Scores equal full-sequence scoring up to float rounding (tests/test_prefix_scoring.py: max
|diff| <= 1e-4 in float32) and do not depend on batching. Models that cannot take a cache
(encoders with token_type_ids, remote code without cache support, heads this module does not
know) use the full-sequence path; `PrefixScorer.check` also compares one item both ways before
the first use and falls back, logged, if they disagree.

Feature contract (made by `ClassifierEncoder`): `{"input_ids": [...], "prefix_len": P}` with
`input_ids[:P]` the tokens shared with every other answer to the same prompt.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np

from ..batching import length_bucketed_batches

log = logging.getLogger("prbench.rms.prefix")

# model_type values whose *ForSequenceClassification = decoder + `score` head read at the last
# non-pad token, with a standard key/value cache and full (non-sliding) attention by default.
SUPPORTED_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "mistral", "gemma", "qwen2_moe", "qwen3_moe", "phi3"})


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def read_position(ids: Sequence[int], pad_token_id: int | None) -> int:
    """Where `*ForSequenceClassification` reads the score: the last token that is not the pad id
    (the last token when there is no pad id or every token is the pad id)."""
    if pad_token_id is None:
        return len(ids) - 1
    for j in range(len(ids) - 1, -1, -1):
        if ids[j] != pad_token_id:
            return j
    return len(ids) - 1


def unsupported_reason(model) -> str | None:
    """None when `model` can be scored with a prefix cache, else why not (for the log)."""
    cfg = getattr(model, "config", None)
    mtype = getattr(cfg, "model_type", None)
    if mtype not in SUPPORTED_MODEL_TYPES:
        return f"model_type {mtype!r} is not a supported decoder ({', '.join(sorted(SUPPORTED_MODEL_TYPES))})"
    if not type(model).__name__.endswith("ForSequenceClassification"):
        return f"{type(model).__name__} is not a *ForSequenceClassification model"
    if getattr(cfg, "use_sliding_window", False) and getattr(cfg, "sliding_window", None):
        return "sliding-window attention is configured"
    head = getattr(model, "score", None)
    base = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    if head is None or base is None:
        return "no `score` head or base decoder attribute"
    return None


class PrefixScorer:
    """Scores features of one `*ForSequenceClassification` decoder with shared-prefix caching.

    `finish(logits)` maps the head's float logits of a batch (B, C) to scores (B,), so the reading
    rule (one logit, or softmax of the last class) stays the caller's.
    """

    def __init__(self, model, pad_token_id: int | None, finish: Callable, device: str = "cpu",
                 max_tokens_per_batch: int = 16384, max_batch_size: int | None = None):
        self.model = model
        self.base = getattr(model, getattr(model, "base_model_prefix", "model"))
        self.head = model.score
        self.pad_token_id = pad_token_id
        self.finish = finish
        self.device = device
        self.max_tokens_per_batch = int(max_tokens_per_batch)
        self.max_batch_size = max_batch_size
        self.prefix_tokens = 0      # tokens run as prefixes
        self.continuation_tokens = 0  # tokens run as continuations
        self.groups = 0

    # -- planning --------------------------------------------------------------------------
    def split(self, feat: dict) -> tuple[tuple[int, ...], list[int], int]:
        """(prefix ids, continuation ids, read index within the continuation) of one feature.
        The prefix never reaches the read position, so every continuation has >= 1 token."""
        ids = list(feat["input_ids"])
        pos = read_position(ids, self.pad_token_id)
        p = max(0, min(int(feat.get("prefix_len", 0)), pos, len(ids) - 1))
        return tuple(ids[:p]), ids[p:], pos - p

    def plan(self, feats: Sequence[dict]) -> "OrderedDict[tuple[int, ...], list[int]]":
        groups: OrderedDict[tuple[int, ...], list[int]] = OrderedDict()
        for i, f in enumerate(feats):
            groups.setdefault(self.split(f)[0], []).append(i)
        return groups

    # -- model calls -----------------------------------------------------------------------
    def _prefix_cache(self, prefix: tuple[int, ...]):
        import torch

        if not prefix:
            return None
        ids = torch.tensor([list(prefix)], dtype=torch.long, device=self.device)
        out = self.base(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
        self.prefix_tokens += len(prefix)
        cache = out.past_key_values
        return [(layer.keys, layer.values) for layer in cache.layers]

    def _continuations(self, kv, p_len: int, conts: list[list[int]], reads: list[int]) -> np.ndarray:
        import torch
        from transformers import DynamicCache

        b = len(conts)
        width = max(len(c) for c in conts)
        pad = self.pad_token_id if self.pad_token_id is not None else 0
        ids = torch.full((b, width), pad, dtype=torch.long)
        mask = torch.zeros((b, p_len + width), dtype=torch.long)
        mask[:, :p_len] = 1
        for j, c in enumerate(conts):
            ids[j, : len(c)] = torch.tensor(c, dtype=torch.long)
            mask[j, p_len: p_len + len(c)] = 1
        kwargs = {}
        if kv is not None:
            layers = [(k.expand(b, -1, -1, -1), v.expand(b, -1, -1, -1)) for k, v in kv]
            kwargs["past_key_values"] = DynamicCache(layers)
            pos = torch.arange(p_len, p_len + width, dtype=torch.long).unsqueeze(0).expand(b, -1)
            kwargs["position_ids"] = pos.to(self.device)
        out = self.base(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), use_cache=kv is not None,
                        **kwargs)
        hidden = out.last_hidden_state
        rows = torch.arange(b, device=hidden.device)
        last = hidden[rows, torch.tensor(reads, dtype=torch.long, device=hidden.device)]
        self.continuation_tokens += sum(len(c) for c in conts)
        return np.asarray(self.finish(self.head(last).float()), dtype=float)

    def score(self, feats: Sequence[dict]) -> np.ndarray:
        import torch

        out = np.full(len(feats), np.nan)
        splits = [self.split(f) for f in feats]
        with torch.inference_mode():
            for prefix, members in self.plan(feats).items():
                self.groups += 1
                kv = self._prefix_cache(prefix)
                p_len = len(prefix)
                lengths = [len(splits[i][1]) for i in members]
                # the cache copies cost memory like tokens: count the prefix in each row's budget
                batches = length_bucketed_batches([n + p_len for n in lengths], self.max_tokens_per_batch,
                                                  self.max_batch_size)
                for batch in batches:
                    idx = [members[j] for j in batch]
                    out[idx] = self._continuations(kv, p_len, [splits[i][1] for i in idx],
                                                   [splits[i][2] for i in idx])
        return out

    def tokens_saved(self, feats: Sequence[dict]) -> tuple[int, int]:
        """(tokens a full-sequence pass runs, tokens this scorer runs) for `feats`."""
        full = sum(len(f["input_ids"]) for f in feats)
        groups = self.plan(feats)
        cached = sum(len(p) for p in groups) + sum(len(self.split(f)[1]) for f in feats)
        return full, cached
