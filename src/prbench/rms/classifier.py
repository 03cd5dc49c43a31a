"""`classifier` RMs: reward models that map one (prompt, answer) to a score in one forward pass.

How a model is loaded and where its score is read is its adapter (rms/adapters.py: plain
sequence classifiers, remote-code heads with `.score` such as ArmoRM, reward-token AutoModels
such as InternLM2-reward), chosen from the model's config.json or forced by the entry's `adapter`.

Input: `prompts.rm_messages` rendered with the tokenizer's own chat template (plus the adapter's
suffix, e.g. the reward token). Tokenizers with no chat template (the MiniLM cross-encoder of the
demo) get a text / text_pair encoding of the user turn and the answer. The same encoder builds the
training inputs of the demo RMs (prbench.training.rm), so training and scoring see identical tokens.

With a chat template the rendered text is tokenized without special tokens (one BOS, the
template's), or with them under `scoring.add_special_tokens: true` (the authors': a template that
starts with BOS gets a second one).

Over-long inputs (`scoring.truncation: fit`, the default) never lose the answer: the lowest-ranked
profile posts go first, then the user turn is cut from the left; only an answer longer than
`max_length` on its own is cut, from the left, keeping its end and the end-of-turn token. Under
`truncation: right` (the authors' tokenizer truncation) every post stays and the tokenized chat
is cut at its right end, the answer's tail first (an appended reward token stays last).
Tokenizers without a chat template always use the text-pair encoding's `longest_first` cut.

Padding uses one pad id for the tokenizer and the model config, never the input's last token, so
the score is read at the last real token whatever the batching.
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from .. import prompts
from ..batching import collate, fixed_size_batches, length_bucketed_batches, run_batched
from ..prompts import ScoreRequest
from .adapters import choose_adapter, finish_logits
from .base import RewardModel, ScoreOutput
from .inputs import (
    fit_profile,
    load_model_and_tokenizer,
    load_options,
    model_config_dict,
    model_device,
    place_model,
    spec_key,
    spec_with_defaults,
)
from .prefix import PrefixScorer, common_prefix_len, unsupported_reason

log = logging.getLogger("prbench.rms.classifier")

# tokenizers report model_max_length = 1e30 when unknown
_SANE_MAX = 1_000_000
DEFAULT_MAX_LENGTH = 8192  # the authors' scoring length, when neither the config nor the model says


def effective_max_length(tokenizer, requested: int | None, model=None) -> int:
    """The entry's / scoring max_length (None = from the model), capped by what the model can
    take: the tokenizer's model_max_length when it is real (the demo RMs save the length they
    were trained with there) and the config's max_position_embeddings. 8192 when unknown."""
    caps = []
    tok_max = getattr(tokenizer, "model_max_length", None)
    if tok_max and tok_max < _SANE_MAX:
        caps.append(int(tok_max))
    n_pos = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(n_pos, int) and 0 < n_pos < _SANE_MAX:
        caps.append(n_pos)
    want = int(requested) if requested is not None else DEFAULT_MAX_LENGTH
    return min([want] + caps) if requested is not None or caps else want


class ClassifierEncoder:
    """Turns a ScoreRequest into token ids (plus token_type_ids for text-pair encoders)."""

    def __init__(self, tokenizer, use_profile: bool, top_k: int | None, max_length: int,
                 suffix: Sequence[int] = (), layout: str = "block", add_special_tokens: bool = False,
                 truncation: str = "fit"):
        self.tok = tokenizer
        self.use_profile = use_profile
        self.layout = layout  # where the profile goes (prompts.PROFILE_LAYOUTS; RM spec key profile_layout)
        self.top_k = top_k
        self.max_length = int(max_length)
        self.suffix = list(suffix)  # appended after the rendered chat (the reward token)
        # scoring.add_special_tokens: the tokenizer's special tokens added on top of the rendered template
        self.add_special = bool(add_special_tokens)
        if truncation not in ("fit", "right"):
            raise ValueError(f"scoring.truncation {truncation!r}: expected fit or right")
        self.truncation = truncation  # scoring.truncation (module docstring)
        self.pair_mode = not bool(getattr(tokenizer, "chat_template", None))
        if self.pair_mode and self.suffix:
            raise ValueError("an RM whose score is read at an appended token needs a tokenizer with a chat template")
        self.n_truncated = 0
        self.n_posts_dropped = 0
        self._prompt_cache: dict[tuple, list[int]] = {}

    def _posts(self, req: ScoreRequest) -> list[str]:
        if not self.use_profile:
            return []
        posts = list(req.profile)
        return posts[: self.top_k] if self.top_k is not None else posts

    def _chat_ids(self, req: ScoreRequest, posts: list[str], k: int) -> list[int]:
        r = ScoreRequest(req.question, req.answer, tuple(posts[:k]), tuple(req.categories[:k]))
        text = prompts.render_chat(self.tok, prompts.rm_messages(r, self.use_profile, None, self.layout))
        return self.tok(text, add_special_tokens=self.add_special, verbose=False)["input_ids"] + self.suffix

    def _cut_question(self, req: ScoreRequest) -> tuple[list[int], str]:
        """No profile post left and still too long: cut the question from the left (marked by an
        ellipsis) by the fewest characters that make the input fit."""
        q = req.question.strip()

        def ids_for(c: int) -> list[int]:
            return self._chat_ids(ScoreRequest("…" + q[c:] if c else q, req.answer), [], 0)

        lo, hi = 1, len(q)
        if len(ids_for(hi)) > self.max_length:
            return ids_for(hi), "…"
        while lo < hi:
            mid = (lo + hi) // 2
            if len(ids_for(mid)) <= self.max_length:
                hi = mid
            else:
                lo = mid + 1
        return ids_for(lo), "…" + q[lo:]

    def _prompt_ids(self, req: ScoreRequest, posts: list[str], k: int) -> list[int]:
        """Token ids of the chat up to the start of the answer (shared by every answer to the
        same prompt; rms/prefix.py runs them once). Cached per (question, posts)."""
        key = (req.question, tuple(posts[:k]), tuple(req.categories[:k]))
        ids = self._prompt_cache.get(key)
        if ids is None:
            user = prompts.rm_messages(ScoreRequest(req.question, "", tuple(posts[:k]), tuple(req.categories[:k])),
                                       self.use_profile, None, self.layout)[:1]
            text = prompts.render_chat(self.tok, user, add_generation_prompt=True)
            ids = self.tok(text, add_special_tokens=self.add_special, verbose=False)["input_ids"]
            if len(self._prompt_cache) > 4096:
                self._prompt_cache.clear()
            self._prompt_cache[key] = ids
        return ids

    def _pair_enc(self, req: ScoreRequest, posts: list[str], k: int, truncate: bool = False) -> dict:
        first = prompts.user_turn(req.question, posts[:k], self.use_profile, None, self.layout, req.categories[:k])
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
        elif self.truncation == "right":  # every post kept; the tokenized input cut at its right end
            ids, k = self._chat_ids(req, posts, len(posts)), len(posts)
            too_long = len(ids) > self.max_length
            if too_long:  # the reward token (if any) stays last
                keep = self.max_length - len(self.suffix)
                ids = ids[:-len(self.suffix)][:keep] + self.suffix if self.suffix else ids[:keep]
            prefix_len = 0 if too_long else common_prefix_len(ids, self._prompt_ids(req, posts, k))
            feat = {"input_ids": ids, "prefix_len": prefix_len}
        else:
            ids, k, too_long = fit_profile(lambda k: self._chat_ids(req, posts, k), len(posts), self.max_length)
            question = req.question
            if too_long:
                ids, question = self._cut_question(req)
            if len(ids) > self.max_length:  # the answer alone is too long: keep its end
                feat = {"input_ids": ids[-self.max_length:], "prefix_len": 0}
            else:
                prompt = self._prompt_ids(ScoreRequest(question, req.answer, (), tuple(req.categories)), posts, k)
                feat = {"input_ids": ids, "prefix_len": common_prefix_len(ids, prompt)}
        self.n_posts_dropped += len(posts) - k
        self.n_truncated += int(too_long)
        return feat


class ClassifierRM(RewardModel):
    kind = "classifier"

    def __init__(self, spec: dict, model=None, tokenizer=None):
        import transformers

        spec = self.spec = spec_with_defaults(spec, self.kind)
        self.name = spec["name"]
        self.use_profile = bool(spec["use_profile"])
        self.top_k = spec.get("top_k")
        opts = load_options(spec)
        self.device = opts["device"]
        if model is None:
            self.adapter = choose_adapter(model_config_dict(spec), spec_key(spec, "")[:-1], spec.get("adapter"))
        else:
            self.adapter = choose_adapter(model.config.to_dict(), spec_key(spec, "")[:-1], spec.get("adapter"))
        auto_cls = getattr(transformers, self.adapter.auto_class)
        model, tokenizer = load_model_and_tokenizer(auto_cls, spec, self.name, model, tokenizer, pad_fallback=False)
        self.tokenizer = tokenizer
        self.model = place_model(model, opts, spec).eval()
        self.device = model_device(self.model, self.device)
        self.max_length = effective_max_length(tokenizer, spec["max_length"], model)
        self.max_tokens_per_batch = int(spec["max_tokens_per_batch"])
        self.max_batch_size: int | None = spec.get("max_batch_size")
        self.fixed_batch_size: int | None = None  # set to use naive fixed batches in dataset order
        self.progress = bool(spec["progress"])
        self.profile_layout = str(spec.get("profile_layout", "block"))  # rms.reward_spec sets "after_question"
        self.encoder = ClassifierEncoder(tokenizer, self.use_profile, self.top_k, self.max_length,
                                         self.adapter.suffix_ids(model), self.profile_layout,
                                         bool(spec["add_special_tokens"]), str(spec["truncation"]))
        self.pad_id = self._agree_pad_id()
        self.n_scored = 0
        self.prefix = self._prefix_scorer(bool(spec["prefix_cache"]) and self.adapter.prefix_cache)
        log.info("RM %s: adapter %s, pad id %s, max_length %d", self.name, self.adapter.name, self.pad_id,
                 self.max_length)

    def _agree_pad_id(self) -> int:
        """One pad id for padding and reading, set on the tokenizer and the model config alike.

        The model config's pad id comes first (ArmoRM-style code finds each row's end from it), then
        the tokenizer's. An id that ends real inputs (a tokenizer whose pad fell back to its eos
        `<|eot_id|>`) is never used: a classifier reads the last non-pad token, so the score would
        be read one token early. Then another special token takes the role (only its id is used)."""
        cfg = self.model.config
        tok = self.tokenizer
        if self.encoder.pair_mode:
            last = {tok.sep_token_id} if tok.sep_token_id is not None else set()
        else:
            probe = self.encoder._chat_ids(ScoreRequest("q", "a"), [], 0)
            last = {probe[-1]}
        vocab = getattr(cfg, "vocab_size", None) or len(tok)
        cands = [getattr(cfg, "pad_token_id", None), tok.pad_token_id, tok.unk_token_id, tok.bos_token_id]
        cands += list(getattr(tok, "all_special_ids", []))
        cands += [0]
        pad = next(c for c in cands if isinstance(c, int) and 0 <= c < vocab and c not in last)
        if pad != getattr(cfg, "pad_token_id", None) or pad != tok.pad_token_id:
            log.info("RM %s: pad id %s for tokenizer and model config (were %s / %s; inputs end with %s)", self.name,
                     pad, tok.pad_token_id, getattr(cfg, "pad_token_id", None), sorted(last))
        cfg.pad_token_id = pad
        if tok.pad_token_id != pad:
            tok.pad_token = tok.convert_ids_to_tokens(pad)
        return pad

    def _prefix_scorer(self, wanted: bool) -> PrefixScorer | None:
        """Shared-prompt caching (rms/prefix.py) for decoder classifiers; None = full sequences."""
        if not wanted:
            return None
        why = "text-pair encoder" if self.encoder.pair_mode else unsupported_reason(self.model)
        if why:
            log.info("RM %s: prefix caching off, full-sequence scoring (%s)", self.name, why)
            return None
        log.info("RM %s: prefix-cached scoring (each shared prompt runs once)", self.name)
        return PrefixScorer(self.model, self.pad_id, finish_logits, self.device, self.max_tokens_per_batch,
                            self.max_batch_size)

    def encode(self, requests: Sequence[ScoreRequest]) -> list[dict]:
        return [self.encoder.encode(r) for r in requests]

    def _forward(self, feats: list[dict]) -> np.ndarray:
        import torch

        batch = collate(feats, self.pad_id, "right")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            return self.adapter.scores(self.model, batch)

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
        return {"kind": self.kind, "adapter": self.adapter.name, "scored": self.n_scored, "max_length": self.max_length,
                "truncated_inputs": self.encoder.n_truncated, "profile_posts_dropped": self.encoder.n_posts_dropped,
                "input_format": "text_pair" if self.encoder.pair_mode else "chat_template",
                "prefix_cache": self.prefix is not None,
                **({"prefix_groups": self.prefix.groups, "prefix_tokens": self.prefix.prefix_tokens,
                    "continuation_tokens": self.prefix.continuation_tokens} if self.prefix is not None else {})}
