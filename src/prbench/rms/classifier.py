"""`classifier` RMs: any AutoModelForSequenceClassification (hub id or local folder).

Input: `prompts.rm_messages` rendered with the tokenizer's own chat template. Tokenizers with no
chat template (the MiniLM cross-encoder of the demo) get a text / text_pair encoding of the user
turn and the answer. Score: the single logit, or the softmax probability of the last class when
the head has several labels. The same encoder builds the training inputs of the demo RMs
(prbench.train_rm), so training and scoring see identical token sequences.
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from .. import prompts
from ..batching import collate, fixed_size_batches, length_bucketed_batches, run_batched
from ..prompts import ScoreRequest
from .base import RewardModel, ScoreOutput
from .inputs import fit_profile, load_model_and_tokenizer, load_options
from .prefix import PrefixScorer, common_prefix_len, unsupported_reason

log = logging.getLogger("prbench.rms.classifier")

# tokenizers report model_max_length = 1e30 when unknown
_SANE_MAX = 1_000_000


def effective_max_length(tokenizer, requested: int | None) -> int:
    """The entry's / scoring max_length, capped by the tokenizer's model_max_length when it is real
    (the demo RMs save the length they were trained with there)."""
    tok_max = getattr(tokenizer, "model_max_length", None)
    tok_max = int(tok_max) if tok_max and tok_max < _SANE_MAX else None
    if requested is None:
        return tok_max or 4096
    return min(int(requested), tok_max) if tok_max else int(requested)


class ClassifierEncoder:
    """Turns a ScoreRequest into token ids (plus token_type_ids for text-pair encoders)."""

    def __init__(self, tokenizer, use_profile: bool, top_k: int | None, max_length: int):
        self.tok = tokenizer
        self.use_profile = use_profile
        self.top_k = top_k
        self.max_length = int(max_length)
        self.pair_mode = not bool(getattr(tokenizer, "chat_template", None))
        self.n_truncated = 0
        self.n_posts_dropped = 0
        self._prompt_cache: dict[tuple, list[int]] = {}

    def _posts(self, req: ScoreRequest) -> list[str]:
        if not self.use_profile:
            return []
        posts = list(req.profile)
        return posts[: self.top_k] if self.top_k is not None else posts

    def _chat_ids(self, req: ScoreRequest, posts: list[str], k: int) -> list[int]:
        r = ScoreRequest(req.question, req.answer, tuple(posts[:k]))
        text = prompts.render_chat(self.tok, prompts.rm_messages(r, self.use_profile, None))
        return self.tok(text, add_special_tokens=False, verbose=False)["input_ids"]

    def _prompt_ids(self, req: ScoreRequest, posts: list[str], k: int) -> list[int]:
        """Token ids of the chat up to the start of the answer (shared by every answer to the
        same prompt; rms/prefix.py runs them once). Cached per (question, posts)."""
        key = (req.question, tuple(posts[:k]))
        ids = self._prompt_cache.get(key)
        if ids is None:
            user = prompts.rm_messages(ScoreRequest(req.question, "", tuple(posts[:k])), self.use_profile, None)[:1]
            text = prompts.render_chat(self.tok, user, add_generation_prompt=True)
            ids = self.tok(text, add_special_tokens=False, verbose=False)["input_ids"]
            if len(self._prompt_cache) > 4096:
                self._prompt_cache.clear()
            self._prompt_cache[key] = ids
        return ids

    def _pair_enc(self, req: ScoreRequest, posts: list[str], k: int, truncate: bool = False) -> dict:
        first = prompts.user_turn(req.question, posts[:k], self.use_profile)
        kw = {"truncation": "longest_first", "max_length": self.max_length} if truncate else {}
        enc = self.tok(first, req.answer, add_special_tokens=True, verbose=False, **kw)
        out = {"input_ids": list(enc["input_ids"])}
        if "token_type_ids" in enc:
            out["token_type_ids"] = list(enc["token_type_ids"])
        return out

    def encode(self, req: ScoreRequest) -> dict:
        posts = self._posts(req)
        if self.pair_mode:
            cache: dict[int, dict] = {}

            def enc_k(k):
                cache[k] = self._pair_enc(req, posts, k)
                return cache[k]["input_ids"]

            _, k, too_long = fit_profile(enc_k, len(posts), self.max_length)
            feat = self._pair_enc(req, posts, k, truncate=True) if too_long else cache[k]
        else:
            ids, k, too_long = fit_profile(lambda k: self._chat_ids(req, posts, k), len(posts), self.max_length)
            feat = {"input_ids": ids[: self.max_length]}
            feat["prefix_len"] = common_prefix_len(feat["input_ids"], self._prompt_ids(req, posts, k))
        self.n_posts_dropped += len(posts) - k
        self.n_truncated += int(too_long)
        return feat


class ClassifierRM(RewardModel):
    kind = "classifier"

    def __init__(self, spec: dict, model=None, tokenizer=None):
        from transformers import AutoModelForSequenceClassification

        self.spec = dict(spec)
        self.name = spec.get("name", "classifier")
        self.use_profile = bool(spec.get("use_profile", False))
        self.top_k = spec.get("top_k")
        opts = load_options(spec)
        self.device = opts["device"]
        model, tokenizer = load_model_and_tokenizer(AutoModelForSequenceClassification, spec, self.name,
                                                    model, tokenizer)
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        self.tokenizer = tokenizer
        self.model = model.to(self.device).eval()
        self.max_length = effective_max_length(tokenizer, spec.get("max_length"))
        self.max_tokens_per_batch = int(spec.get("max_tokens_per_batch", 16384))
        self.max_batch_size: int | None = spec.get("max_batch_size")
        self.fixed_batch_size: int | None = None  # set to use naive fixed batches in dataset order
        self.progress = bool(spec.get("progress", True))
        self.encoder = ClassifierEncoder(tokenizer, self.use_profile, self.top_k, self.max_length)
        self.n_scored = 0
        self.prefix = self._prefix_scorer(bool(spec.get("prefix_cache", True)))

    def _prefix_scorer(self, wanted: bool) -> PrefixScorer | None:
        """Shared-prompt caching (rms/prefix.py) for decoder classifiers; None = full sequences."""
        if not wanted:
            return None
        why = "text-pair encoder" if self.encoder.pair_mode else unsupported_reason(self.model)
        if why:
            log.info("RM %s: prefix caching off, full-sequence scoring (%s)", self.name, why)
            return None
        log.info("RM %s: prefix-cached scoring (each shared prompt runs once)", self.name)
        return PrefixScorer(self.model, self.model.config.pad_token_id, self._finish, self.device,
                            self.max_tokens_per_batch, self.max_batch_size)

    @staticmethod
    def _finish(logits) -> np.ndarray:
        """Head logits (B, C) -> scores: the single logit, or the softmax probability of the last class."""
        import torch

        if logits.shape[-1] == 1:
            return logits[:, 0].cpu().numpy()
        return torch.softmax(logits, dim=-1)[:, -1].cpu().numpy()

    def encode(self, requests: Sequence[ScoreRequest]) -> list[dict]:
        return [self.encoder.encode(r) for r in requests]

    def _forward(self, feats: list[dict]) -> np.ndarray:
        import torch

        batch = collate(feats, self.tokenizer.pad_token_id, "right")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            logits = self.model(**batch).logits.float()
        return self._finish(logits)

    def score_features(self, feats: list[dict]) -> np.ndarray:
        if self.prefix is not None and not self.fixed_batch_size and feats and "prefix_len" in feats[0]:
            return self.prefix.score(feats)
        return self.score_full(feats)

    def score_full(self, feats: list[dict]) -> np.ndarray:
        """Every feature as one full sequence (the reference path; encoders always take it)."""
        lengths = [len(f["input_ids"]) for f in feats]
        if self.fixed_batch_size:
            batches = fixed_size_batches(len(feats), self.fixed_batch_size)
        else:
            batches = length_bucketed_batches(lengths, self.max_tokens_per_batch, self.max_batch_size)
        out = run_batched(feats, lambda b: self._forward([feats[i] for i in b]), batches,
                          desc=f"score {self.name}", progress=self.progress)
        return np.asarray(out, dtype=float)

    def score(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        if not requests:
            return ScoreOutput(scores=np.zeros(0), failures=0)
        scores = self.score_features(self.encode(requests))
        self.n_scored += len(requests)
        return ScoreOutput(scores=scores, failures=int(np.isnan(scores).sum()))

    def diagnostics(self) -> dict:
        return {"kind": self.kind, "scored": self.n_scored, "max_length": self.max_length,
                "truncated_inputs": self.encoder.n_truncated, "profile_posts_dropped": self.encoder.n_posts_dropped,
                "input_format": "text_pair" if self.encoder.pair_mode else "chat_template",
                "prefix_cache": self.prefix is not None,
                **({"prefix_groups": self.prefix.groups, "prefix_tokens": self.prefix.prefix_tokens,
                    "continuation_tokens": self.prefix.continuation_tokens} if self.prefix is not None else {})}
