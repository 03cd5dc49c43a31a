"""Generative RMs: an instruct causal LM used as a judge.

- `generative_pairwise`: the paper's A/B protocol. The judge sees the question (+ profile), two
  answers labelled A and B (`prompts.pairwise_judge_messages`) and must answer `Result: A` or
  `Result: B`. Which answer is shown first is a seeded coin flip per pair (config seed + pair
  texts); with `both_orders` both orders are asked and the pair's preference is their mean, which
  cancels position bias (a judge that always says "A" gets 0.5 = a tie = wrong). Position bias (how
  often "A" is picked) and parse failures are counted and reported. `score()` is the answer's win
  rate (0, 0.5, 1) against a fixed reference answer (`reference_answer`, default "I don't know.").
- `generative_pointwise`: the judge answers `Score: <number>`; unparseable outputs give NaN and
  are counted.

Decoding is greedy, so scores are deterministic.
"""
from __future__ import annotations

import logging
import re
from typing import Callable, Sequence

import numpy as np

from .. import prompts
from ..batching import collate, length_bucketed_batches, run_batched
from ..prompts import PairRequest, ScoreRequest
from ..seeding import stable_seed
from .base import CompareOutput, RewardModel, ScoreOutput
from .classifier import effective_max_length
from .inputs import fit_profile, load_model_and_tokenizer, load_options

log = logging.getLogger("prbench.rms.generative")

DEFAULT_REFERENCE_ANSWER = "I don't know."

_RESULT_RE = re.compile(r"result\s*[:：]\s*\**\s*\[?\s*(?:answer\s+)?([ab])\b", re.IGNORECASE)
_BARE_CHOICE_RE = re.compile(r"^\s*\**\[?\s*(?:answer\s+)?([ab])\s*\]?\**\s*[.!]?\s*$", re.IGNORECASE)
_SCORE_RE = re.compile(r"score\s*[:：]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_BARE_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*\.?\s*$")


def parse_choice(text: str) -> str | None:
    """'A' or 'B' from a judge output ("Result: A", or just "B"); None when unparseable."""
    if not isinstance(text, str):
        return None
    m = _RESULT_RE.search(text) or _BARE_CHOICE_RE.match(text)
    return m.group(1).upper() if m else None


def parse_score(text: str) -> float:
    """The number of "Score: <number>" (or a bare number); NaN when unparseable."""
    if not isinstance(text, str):
        return float("nan")
    m = _SCORE_RE.search(text) or _BARE_NUMBER_RE.match(text)
    return float(m.group(1)) if m else float("nan")


class _GenerativeRM(RewardModel):
    def __init__(self, spec: dict, model=None, tokenizer=None):
        from transformers import AutoModelForCausalLM

        self.spec = dict(spec)
        self.name = spec.get("name", self.kind)
        self.use_profile = bool(spec.get("use_profile", False))
        self.top_k = spec.get("top_k")
        self.seed = int(spec.get("seed", 0))
        opts = load_options(spec)
        self.device = opts["device"]
        model, tokenizer = load_model_and_tokenizer(AutoModelForCausalLM, spec, self.name, model, tokenizer)
        if not getattr(tokenizer, "chat_template", None):
            log.warning("RM %s: tokenizer has no chat template; using the plain 'role: content' fallback", self.name)
        self.tokenizer = tokenizer
        self.model = model.to(self.device).eval()
        self.max_new_tokens = int(spec.get("max_new_tokens", 16))
        self.max_length = effective_max_length(tokenizer, spec.get("max_length"))
        n_pos = getattr(model.config, "max_position_embeddings", None)
        if n_pos and self.max_length + self.max_new_tokens > n_pos:  # prompt + reply must fit the positions
            self.max_length = max(1, int(n_pos) - self.max_new_tokens)
        self.max_tokens_per_batch = int(spec.get("max_tokens_per_batch", 16384))
        self.max_batch_size: int | None = spec.get("max_batch_size")
        self.progress = bool(spec.get("progress", True))
        self.n_generations = 0
        self.n_parse_failures = 0
        self.n_truncated = 0
        self.n_posts_dropped = 0

    # ---- inputs ----------------------------------------------------------------------------
    def _posts(self, profile: Sequence[str]) -> list[str]:
        if not self.use_profile:
            return []
        posts = list(profile)
        return posts[: self.top_k] if self.top_k is not None else posts

    def _prompt_ids(self, build: Callable[[list[str]], list[dict]], posts: list[str]) -> list[int]:
        """Chat-rendered prompt ids with as many top-ranked posts as fit in max_length."""
        tok = self.tokenizer

        def enc(k):
            text = prompts.render_chat(tok, build(posts[:k]), add_generation_prompt=True)
            return tok(text, add_special_tokens=False, verbose=False)["input_ids"]

        ids, k, too_long = fit_profile(enc, len(posts), self.max_length)
        self.n_posts_dropped += len(posts) - k
        if too_long:  # keep the end: the answers, the instruction and the generation prompt
            self.n_truncated += 1
            ids = ids[-self.max_length:]
        return ids

    # ---- generation ------------------------------------------------------------------------
    def _generate(self, prompt_ids: list[list[int]], desc: str) -> list[str]:
        import torch
        from transformers import GenerationConfig

        if not prompt_ids:
            return []
        tok = self.tokenizer
        eos = self.model.generation_config.eos_token_id if self.model.generation_config else None
        gen_cfg = GenerationConfig(max_new_tokens=self.max_new_tokens, do_sample=False,
                                   pad_token_id=tok.pad_token_id,
                                   eos_token_id=eos if eos is not None else tok.eos_token_id)
        feats = [{"input_ids": ids} for ids in prompt_ids]
        lengths = [len(ids) + self.max_new_tokens for ids in prompt_ids]
        batches = length_bucketed_batches(lengths, self.max_tokens_per_batch, self.max_batch_size)

        def run(batch):
            enc = collate([feats[i] for i in batch], tok.pad_token_id, "left")
            enc = {k: v.to(self.device) for k, v in enc.items() if k != "token_type_ids"}
            torch.manual_seed(self.seed)
            with torch.inference_mode():
                out = self.model.generate(**enc, generation_config=gen_cfg)
            new = out[:, enc["input_ids"].shape[1]:]
            return tok.batch_decode(new, skip_special_tokens=True)

        texts = run_batched(feats, run, batches, desc=desc, progress=self.progress)
        self.n_generations += len(texts)
        return [t.strip() for t in texts]

    def _base_diagnostics(self) -> dict:
        return {"kind": self.kind, "generations": self.n_generations, "parse_failures": self.n_parse_failures,
                "parse_failure_rate": self.n_parse_failures / self.n_generations if self.n_generations else None,
                "truncated_prompts": self.n_truncated, "profile_posts_dropped": self.n_posts_dropped}


class GenerativePairwiseRM(_GenerativeRM):
    kind = "generative_pairwise"
    pairwise = True

    def __init__(self, spec: dict, model=None, tokenizer=None):
        super().__init__(spec, model, tokenizer)
        self.both_orders = bool(spec.get("both_orders", False))
        self.reference_answer = spec.get("reference_answer") or DEFAULT_REFERENCE_ANSWER
        self.n_pick_a = 0
        self.n_parsed = 0
        self.n_pairs = 0
        self.n_pair_failures = 0

    def chosen_first(self, pair: PairRequest) -> bool:
        """The seeded order of a pair (config seed + the pair's texts)."""
        s = stable_seed(self.seed, "pairwise_order", pair.question, pair.chosen, pair.rejected, "\x1e".join(pair.profile))
        return s % 2 == 0

    def compare(self, pairs: Sequence[PairRequest]) -> CompareOutput:
        jobs: list[tuple[int, bool]] = []  # (pair index, chosen shown as A)
        prompt_ids: list[list[int]] = []
        for i, p in enumerate(pairs):
            orders = [True, False] if self.both_orders else [self.chosen_first(p)]
            posts = self._posts(p.profile)
            for chosen_is_a in orders:
                a, b = (p.chosen, p.rejected) if chosen_is_a else (p.rejected, p.chosen)
                build = lambda ps, a=a, b=b, q=p.question, c=p.categories: prompts.pairwise_judge_messages(  # noqa: E731
                    q, a, b, ps, self.use_profile, None, categories=c)
                jobs.append((i, chosen_is_a))
                prompt_ids.append(self._prompt_ids(build, posts))
        raws = self._generate(prompt_ids, desc=f"judge {self.name}")
        details = [{"chosen_is_a": [], "picks": [], "raw": []} for _ in pairs]
        for (i, chosen_is_a), raw in zip(jobs, raws):
            pick = parse_choice(raw)
            d = details[i]
            d["chosen_is_a"].append(chosen_is_a)
            d["picks"].append(pick)
            d["raw"].append(raw)
            if pick is None:
                self.n_parse_failures += 1
            else:
                self.n_parsed += 1
                self.n_pick_a += int(pick == "A")
        prefs = np.full(len(pairs), np.nan)
        for i, d in enumerate(details):
            if any(pk is None for pk in d["picks"]):
                continue  # any unparseable order makes the pair a failure (wrong, reported)
            wins = [float((pk == "A") == ca) for pk, ca in zip(d["picks"], d["chosen_is_a"])]
            prefs[i] = float(np.mean(wins))
        failures = int(np.isnan(prefs).sum())
        self.n_pairs += len(pairs)
        self.n_pair_failures += failures
        return CompareOutput(prefs=prefs, failures=failures, details=details)

    def score(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        """Win rate of each answer against the fixed reference answer (0, 0.5 or 1; NaN = failure)."""
        pairs = [PairRequest(r.question, r.answer, self.reference_answer, tuple(r.profile), tuple(r.categories))
                 for r in requests]
        out = self.compare(pairs)
        return ScoreOutput(scores=out.prefs, failures=out.failures,
                           raw=[" || ".join(d["raw"]) for d in out.details])

    def diagnostics(self) -> dict:
        d = self._base_diagnostics()
        d.update({"both_orders": self.both_orders, "pairs": self.n_pairs, "pair_failures": self.n_pair_failures,
                  "position_bias_a_rate": self.n_pick_a / self.n_parsed if self.n_parsed else None,
                  "parsed": self.n_parsed})
        return d


class GenerativePointwiseRM(_GenerativeRM):
    kind = "generative_pointwise"

    def score(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        prompt_ids = []
        for r in requests:
            build = lambda ps, r=r: prompts.pointwise_judge_messages(  # noqa: E731
                r.question, r.answer, ps, self.use_profile, None, categories=r.categories)
            prompt_ids.append(self._prompt_ids(build, self._posts(r.profile)))
        raws = self._generate(prompt_ids, desc=f"judge {self.name}")
        scores = np.asarray([parse_score(t) for t in raws], dtype=float)
        failures = int(np.isnan(scores).sum())
        self.n_parse_failures += failures
        return ScoreOutput(scores=scores, failures=failures, raw=raws)

    def diagnostics(self) -> dict:
        return self._base_diagnostics()
