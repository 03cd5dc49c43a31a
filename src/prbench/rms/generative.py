"""Generative RMs: an instruct causal LM used as a judge.

- `generative_pairwise`: the paper's A/B protocol. The judge sees the question (+ profile), two
  answers labelled A and B (`prompts.pairwise_judge_messages`), may reason first, and ends with a
  verdict: `Result: A`, `**Result:** A` or `[[A]]` (the LAST verdict in the reply counts; a reply
  that is only "A"/"B" is accepted too; anything else is a parse failure, counted). Which answer is
  shown first is one seeded coin flip per pair (config seed + pair texts), as in the paper. With
  `both_orders` both orders are asked and the pair's preference is the mean of the two (1, 0.5 or
  0): the benchmark accuracy is then the mean preference with ties counting half, so a judge that
  always says "A" scores 0.5; P(both orders right), position bias (how often "A" is picked) and
  parse failures are reported beside it.
  `score()` (BoN / PPO scorer): answers to the same (question, profile) are compared with each
  other in a seeded round-robin (every unordered pair once, cached, counted) and each answer's
  score is its mean preference against the others (its Copeland/Borda win rate, 0..1); with
  `score_opponents: m` each answer meets only 2m seeded opponents (a circulant tournament). An answer
  with no sibling is compared with `reference_answers[(question, profile)]` when reference answers
  were set (`set_reference_answers`, e.g. the base policy's answer to the same prompt; then a prompt
  without one is an error naming their source), else with the fixed `reference_answer` (default
  "I don't know."; little signal, logged as a warning).
- `generative_pointwise`: the judge answers `Score: <number>`; unparseable outputs give NaN and
  are counted.

Benchmark rules of the pairwise judge (config `scoring`, passed in the spec by the score_benchmark
job): `order_seed` (the seed of the one order per pair; null = the config seed), `pairwise_parse`
(`last_verdict` above, or `first_result`: the authors' evaluation/pairwise.py reads the first
letter after the first "result:", see `parse_first_result`) and `pairwise_failure` (`wrong`: an
unparseable reply makes the pair a failure with credit 0; `predict_a`: the authors' rule, the reply
predicts "A"). Either way every unparseable reply is counted (`details[i]["failed"]`).

Downstream 0-1 scoring (`reward.generative: pointwise`, spec key `reward_generative`, set by
`prbench.rms.reward_spec`): `score()` of either kind asks the judge about each answer alone
(`prompts.reward_prompt_messages` with the stage's prompt, spec key `reward_prompt`: `reward`, the
project's response-aware `reward_user`; `rubric` or `policy`, the authors' BoN and PPO prompts, the
last response-blind, logged as a warning at the first scoring), greedy with `reward_max_new_tokens`
new tokens, and reads a
number in [0, 1] by `reward.generative_parse` (`UNIT_PARSERS`: `first_number` = `parse_unit_score`,
the project's, reads any first number; `authors` = `parse_unit_score_authors`, BoN/score.py's rule);
either clamps into [0, 1]. An unparseable reply scores `reward_failure_score` (the authors' 0.5),
flagged in `ScoreOutput.failed` and counted.

Decoding is greedy, so scores are deterministic. `max_new_tokens` defaults to 512 (as the
authors), leaving room for the reasoning before the verdict.
"""
from __future__ import annotations

import logging
import random
from typing import Callable, Mapping, Sequence

import numpy as np

from .. import prompts
from ..batching import collate, length_bucketed_batches, run_batched
from ..generation import generation_config, neutralize
from ..prompts import PairRequest, ScoreRequest
from ..seeding import stable_seed
from .base import CompareOutput, RewardModel, ScoreOutput
from .classifier import effective_max_length
from .inputs import fit_profile, load_model_and_tokenizer, load_options, model_device, place_model, spec_with_defaults
from .replies import (  # noqa: F401  (the parsers are part of this module's interface)
    PAIRWISE_PARSERS,
    UNIT_PARSERS,
    _unclamped,
    parse_choice,
    parse_first_result,
    parse_score,
    parse_unit_score,
    parse_unit_score_authors,
)

log = logging.getLogger("prbench.rms.generative")

DEFAULT_REFERENCE_ANSWER = "I don't know."

ORDER_RULES = ("hashed", "sequential")


def chosen_shown_first(seed: int, pair: PairRequest) -> bool:
    """Whether the chosen answer is shown as A: one fair coin per pair from the seed and the pair's
    texts (question, chosen, rejected, profile), so the draw does not depend on the pair's place in
    the file or on the other pairs (the authors draw `random.random() < 0.5` per row in file order
    after `random.seed(42)`; the same seed here gives other, equally fair coins)."""
    s = stable_seed(seed, "pairwise_order", pair.question, pair.chosen, pair.rejected, "\x1e".join(pair.profile))
    return s % 2 == 0


class _GenerativeRM(RewardModel):
    def __init__(self, spec: dict, model=None, tokenizer=None):
        from transformers import AutoModelForCausalLM

        spec = self.spec = spec_with_defaults(spec, self.kind)
        self.name = spec["name"]
        self.use_profile = bool(spec["use_profile"])
        self.top_k = spec.get("top_k")
        self.seed = int(spec["seed"])
        opts = load_options(spec)
        self.device = opts["device"]
        model, tokenizer = load_model_and_tokenizer(AutoModelForCausalLM, spec, self.name, model, tokenizer)
        if not getattr(tokenizer, "chat_template", None):
            log.warning("RM %s: tokenizer has no chat template; using the plain 'role: content' fallback", self.name)
        self.tokenizer = tokenizer
        self.model = place_model(model, opts, spec).eval()
        self.device = model_device(self.model, self.device)
        self.max_new_tokens = int(spec["max_new_tokens"])
        self.max_length = effective_max_length(tokenizer, spec["max_length"], model)
        n_pos = getattr(model.config, "max_position_embeddings", None)
        if n_pos and self.max_length + self.max_new_tokens > n_pos:  # prompt + reply must fit the positions
            self.max_length = max(1, int(n_pos) - self.max_new_tokens)
        self.max_tokens_per_batch = int(spec["max_tokens_per_batch"])
        self.max_batch_size: int | None = spec.get("max_batch_size")
        self.progress = bool(spec["progress"])
        self.n_generations = 0
        self.n_parse_failures = 0
        self.n_truncated = 0
        self.n_posts_dropped = 0
        # downstream 0-1 scoring (module docstring); absent keys = the kind's own score()
        self.reward_mode = str(spec.get("reward_generative") or "round_robin")
        if self.reward_mode not in ("round_robin", "pointwise"):
            raise ValueError(f"RM {self.name}: reward_generative {self.reward_mode!r} (config key reward.generative): "
                             "expected round_robin or pointwise")
        if self.reward_mode == "pointwise":  # prbench.rms.reward_spec sets all three from the config's `reward`
            self.reward_max_new_tokens = int(spec["reward_max_new_tokens"])
            self.reward_failure_score = float(spec["reward_failure_score"])
            parse = str(spec["reward_parse"])
            if parse not in UNIT_PARSERS:
                raise ValueError(f"RM {self.name}: reward_parse {parse!r} (config key reward.generative_parse): "
                                 f"expected one of {sorted(UNIT_PARSERS)}")
            self.reward_parse = parse
            # the stage's prompt (reward.generative_prompt_bon / _ppo, set by prbench.rms.reward_spec)
            self.reward_prompt = str(spec.get("reward_prompt") or "reward")
            prompts.reward_prompt_role(self.reward_prompt)  # ValueError names the keys
        self._blind_checked = False
        self.response_blind = False
        self.n_unit_scored = 0
        self.n_unit_failures = 0
        self.n_unit_clamped = 0

    # ---- inputs ----------------------------------------------------------------------------
    def _posts(self, profile: Sequence[str]) -> list[str]:
        if not self.use_profile:
            return []
        posts = list(profile)
        return posts[: self.top_k] if self.top_k is not None else posts

    def _prompt_ids(self, build: Callable[[list[str]], list[dict]], posts: list[str],
                    max_length: int | None = None) -> list[int]:
        """Chat-rendered prompt ids with as many top-ranked posts as fit in max_length."""
        tok = self.tokenizer
        limit = self.max_length if max_length is None else max_length

        def enc(k):
            text = prompts.render_chat(tok, build(posts[:k]), add_generation_prompt=True)
            return tok(text, add_special_tokens=False, verbose=False)["input_ids"]

        ids, k, too_long = fit_profile(enc, len(posts), limit)
        self.n_posts_dropped += len(posts) - k
        if too_long:  # keep the end: the answers, the instruction and the generation prompt
            self.n_truncated += 1
            ids = ids[-limit:]
        return ids

    # ---- generation ------------------------------------------------------------------------
    def _generate(self, prompt_ids: list[list[int]], desc: str, max_new_tokens: int | None = None) -> list[str]:
        import torch

        if not prompt_ids:
            return []
        tok = self.tokenizer
        new_tokens = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        eos = self.model.generation_config.eos_token_id if self.model.generation_config else None
        neutralize(self.model)
        gen_cfg = generation_config(max_new_tokens=new_tokens, do_sample=False, pad_token_id=tok.pad_token_id,
                                    eos_token_id=eos if eos is not None else tok.eos_token_id)
        feats = [{"input_ids": ids} for ids in prompt_ids]
        lengths = [len(ids) + new_tokens for ids in prompt_ids]
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

    def _score_unit(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        """`reward.generative: pointwise`: each answer alone on a 0-1 scale (module docstring)."""
        n_pos = getattr(self.model.config, "max_position_embeddings", None)
        limit = self.max_length if not n_pos else max(1, min(self.max_length, int(n_pos) - self.reward_max_new_tokens))
        if not self._blind_checked:  # the templates are configured by now (prbench.job.start)
            self._blind_checked = True
            self.response_blind = prompts.response_blind(self.reward_prompt)
            if self.response_blind:
                log.warning("RM %s: generative reward prompt %r (%s.txt) has no {answer}: the scorer never sees the "
                            "response, so the reward cannot depend on the response (every answer to a prompt gets "
                            "the same score; the authors' PPO reward, PPO/reward_server.py with prompts/sample.txt)",
                            self.name, self.reward_prompt, prompts.reward_prompt_role(self.reward_prompt))
        prompt_ids = []
        for r in requests:
            build = lambda ps, r=r: prompts.reward_prompt_messages(  # noqa: E731
                self.reward_prompt, r.question, r.answer, ps, self.use_profile, None, categories=r.categories)
            prompt_ids.append(self._prompt_ids(build, self._posts(r.profile), limit))
        raws = self._generate(prompt_ids, desc=f"score {self.name}", max_new_tokens=self.reward_max_new_tokens)
        values = np.asarray([UNIT_PARSERS[self.reward_parse](t) for t in raws], dtype=float)
        failed = np.isnan(values)
        self.n_unit_clamped += sum(
            1 for t, v in zip(raws, values)
            if not np.isnan(v) and v in (0.0, 1.0) and _unclamped(t, self.reward_parse) not in (0.0, 1.0))
        n_failed = int(failed.sum())
        self.n_unit_scored += len(requests)
        self.n_unit_failures += n_failed
        self.n_parse_failures += n_failed
        if n_failed:
            log.warning("RM %s: %d of %d replies held no 0-1 score; scored %g (reward.generative_failure_score), "
                        "counted", self.name, n_failed, len(requests), self.reward_failure_score)
        scores = np.where(failed, self.reward_failure_score, values)
        return ScoreOutput(scores=scores, failures=n_failed, raw=raws, failed=failed)

    def _base_diagnostics(self) -> dict:
        d = {"kind": self.kind, "generations": self.n_generations, "parse_failures": self.n_parse_failures,
             "parse_failure_rate": self.n_parse_failures / self.n_generations if self.n_generations else None,
             "truncated_prompts": self.n_truncated, "profile_posts_dropped": self.n_posts_dropped}
        if self.reward_mode == "pointwise":
            d.update({"reward_generative": "pointwise", "unit_scored": self.n_unit_scored,
                      "unit_failures": self.n_unit_failures, "unit_clamped": self.n_unit_clamped,
                      "unit_failure_score": self.reward_failure_score,
                      "unit_parse": self.reward_parse, "unit_prompt": self.reward_prompt,
                      "unit_response_blind": self.response_blind})
        return d


class GenerativePairwiseRM(_GenerativeRM):
    kind = "generative_pairwise"
    pairwise = True

    def __init__(self, spec: dict, model=None, tokenizer=None):
        super().__init__(spec, model, tokenizer)
        self.both_orders = bool(self.spec["both_orders"])
        self.order_seed = self.spec.get("order_seed")  # scoring.order_seed; None = the config seed
        self.order_rule = str(self.spec["order_rule"])  # scoring.order_rule
        if self.order_rule not in ORDER_RULES:
            raise ValueError(f"RM {self.name}: order_rule {self.order_rule!r} (config key scoring.order_rule): "
                             f"expected one of {ORDER_RULES}")
        self.pairwise_parse = str(self.spec.get("pairwise_parse") or "last_verdict")
        self.pairwise_failure = str(self.spec.get("pairwise_failure") or "wrong")
        if self.pairwise_parse not in PAIRWISE_PARSERS:
            raise ValueError(f"RM {self.name}: scoring.pairwise_parse {self.pairwise_parse!r}: expected one of "
                             f"{sorted(PAIRWISE_PARSERS)}")
        if self.pairwise_failure not in ("wrong", "predict_a"):
            raise ValueError(f"RM {self.name}: scoring.pairwise_failure {self.pairwise_failure!r}: expected wrong "
                             "or predict_a")
        self.parse_pick = PAIRWISE_PARSERS[self.pairwise_parse]
        self.reference_answer = self.spec.get("reference_answer") or DEFAULT_REFERENCE_ANSWER
        self.n_pick_a = 0
        self.n_parsed = 0
        self.n_pairs = 0
        self.n_pair_failures = 0
        self.n_both_right = 0
        self.reference_answers: dict = {}
        self.reference_source: str | None = None
        self._score_cache: dict = {}
        self._categories: dict = {}  # (question, profile) -> the posts' categories, for the prompts
        self.n_score_comparisons = 0
        m = self.spec["score_opponents"]
        self.score_opponents = None if m is None else int(m)

    def chosen_first(self, pair: PairRequest) -> bool:
        """The seeded order of a pair (`chosen_shown_first` with `order_seed`, else the config seed)."""
        return chosen_shown_first(self.seed if self.order_seed is None else int(self.order_seed), pair)

    def _orders(self, pairs: Sequence[PairRequest], groups: Sequence | None,
                order_offsets: Mapping | None = None) -> list[bool]:
        """Chosen shown as A, per pair: `hashed` (`chosen_first`, independent of the file order) or
        `sequential` (the authors': `random.Random(order_seed)` drawn once per pair, `< 0.5` = chosen
        first, in the given order, restarted for each group (a benchmark subset: their script runs
        per subset)). `order_offsets`: per group, the draws made before these pairs (a part of a
        split benchmark job, `prbench.scoring.parts`), skipped so the part draws what the whole would."""
        if self.order_rule == "hashed":
            return [self.chosen_first(p) for p in pairs]
        seed = self.seed if self.order_seed is None else int(self.order_seed)
        rngs: dict = {}
        out = []
        for i in range(len(pairs)):
            g = None if groups is None else groups[i]
            if g not in rngs:
                rngs[g] = random.Random(seed)
                for _ in range(int((order_offsets or {}).get(g, 0))):
                    rngs[g].random()
            out.append(rngs[g].random() < 0.5)
        return out

    def compare(self, pairs: Sequence[PairRequest], groups: Sequence | None = None,
                order_offsets: Mapping | None = None) -> CompareOutput:
        """Judge each pair (both orders, or one: `_orders`); `groups` (e.g. each pair's subset, in
        file order) restarts the sequential order draw per group, `order_offsets` continues it."""
        jobs: list[tuple[int, bool]] = []  # (pair index, chosen shown as A)
        prompt_ids: list[list[int]] = []
        shown = None if self.both_orders else self._orders(pairs, groups, order_offsets)
        for i, p in enumerate(pairs):
            orders = [True, False] if self.both_orders else [shown[i]]
            posts = self._posts(p.profile)
            for chosen_is_a in orders:
                a, b = (p.chosen, p.rejected) if chosen_is_a else (p.rejected, p.chosen)
                build = lambda ps, a=a, b=b, q=p.question, c=p.categories: prompts.pairwise_judge_messages(  # noqa: E731
                    q, a, b, ps, self.use_profile, None, categories=c)
                jobs.append((i, chosen_is_a))
                prompt_ids.append(self._prompt_ids(build, posts))
        raws = self._generate(prompt_ids, desc=f"judge {self.name}")
        details = [{"chosen_is_a": [], "picks": [], "raw": [], "failed": []} for _ in pairs]
        for (i, chosen_is_a), raw in zip(jobs, raws):
            pick = self.parse_pick(raw)
            d = details[i]
            d["chosen_is_a"].append(chosen_is_a)
            d["failed"].append(pick is None)
            d["raw"].append(raw)
            if pick is None:
                self.n_parse_failures += 1
                if self.pairwise_failure == "predict_a":
                    pick = "A"  # the authors' rule; still counted as a failure (d["failed"])
            else:
                self.n_parsed += 1
                self.n_pick_a += int(pick == "A")
            d["picks"].append(pick)
        prefs = np.full(len(pairs), np.nan)
        for i, d in enumerate(details):
            if any(pk is None for pk in d["picks"]):
                continue  # any unparseable order makes the pair a failure (wrong, reported)
            wins = [float((pk == "A") == ca) for pk, ca in zip(d["picks"], d["chosen_is_a"])]
            prefs[i] = float(np.mean(wins))
            d["both_right"] = bool(all(wins))
        self.n_both_right += int(np.sum([bool(d.get("both_right")) for d in details]))
        failures = sum(any(d["failed"]) for d in details)
        self.n_pairs += len(pairs)
        self.n_pair_failures += failures
        return CompareOutput(prefs=prefs, failures=failures, details=details)

    def set_reference_answers(self, answers: dict, source: str = "set_reference_answers") -> None:
        """{(question, profile tuple): answer} to compare lone answers with in `score()`; from then
        on a lone answer to a prompt missing here is an error naming `source`."""
        self.reference_answers = {(q, tuple(p)): a for (q, p), a in answers.items()}
        self.reference_source = source

    def _schedule(self, idx: list[int], q: str, prof: tuple) -> list[tuple[int, int]]:
        """Unordered pairs to judge among sibling answers: all of them (round-robin) unless
        `score_opponents` m is set and 2m < n - 1; then a seeded circulant tournament: in a seeded
        permutation each answer meets the m answers after it (and so the m before it)."""
        n = len(idx)
        m = self.score_opponents
        if m is None or 2 * m >= n - 1:
            return [(idx[a], idx[b]) for a in range(n) for b in range(a + 1, n)]
        rng = np.random.default_rng(stable_seed(self.seed, "round-robin", q, "\x1e".join(prof)))
        perm = [idx[t] for t in rng.permutation(n)]
        return [(perm[t], perm[(t + d) % n]) for t in range(n) for d in range(1, m + 1)]

    def _prefs_cached(self, pairs: list[tuple[str, tuple, str, str]]) -> list[float]:
        """P(first answer preferred) for (question, profile, a, b) tuples; each unordered pair is
        judged once per RM instance (cache), identical answers are a tie without a call."""
        cache = self._score_cache
        todo, seen = [], set()
        for q, prof, a, b in pairs:
            if a == b:
                continue
            key = (q, prof) + tuple(sorted((a, b)))
            if key not in cache and key not in seen:
                seen.add(key)
                todo.append(key)
        if todo:
            out = self.compare([PairRequest(q, x, y, prof, self._categories.get((q, prof), ()))
                                for q, prof, x, y in todo])
            for key, p in zip(todo, out.prefs):
                cache[key] = float(p)
            self.n_score_comparisons += len(todo)
        res = []
        for q, prof, a, b in pairs:
            if a == b:
                res.append(0.5)
                continue
            x, y = sorted((a, b))
            p = cache[(q, prof, x, y)]  # P(x preferred over y)
            res.append(p if a == x else (float("nan") if np.isnan(p) else 1.0 - p))
        return res

    def score(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        """Round-robin win rate of each answer among the answers to the same (question, profile).

        Every unordered pair of sibling answers is judged once (seeded order, or both orders with
        `both_orders`); an answer's score is its mean preference over its opponents, NaN
        comparisons (parse failures) left out; NaN when all of them failed. A lone answer is
        compared with its reference answer (see the module docstring). With `reward_generative:
        pointwise` each answer is scored alone on a 0-1 scale instead (`_score_unit`)."""
        if self.reward_mode == "pointwise":
            return self._score_unit(requests)
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.question, tuple(r.profile)), []).append(i)
            self._categories[(r.question, tuple(r.profile))] = tuple(r.categories)
        jobs: list[tuple[int, tuple]] = []  # (request index, (q, profile, answer, opponent))
        lone_fixed = 0
        for (q, prof), idx in groups.items():
            if len(idx) == 1:
                ref = self.reference_answers.get((q, prof))
                if ref is None and self.reference_source is not None:
                    raise ValueError(f"RM {self.name}: no reference answer for the prompt {q[:80]!r} (profile of "
                                     f"{len(prof)} posts) in {self.reference_source} "
                                     f"({len(self.reference_answers)} prompts)")
                if ref is None:
                    ref = self.reference_answer
                    lone_fixed += 1
                jobs.append((idx[0], (q, prof, requests[idx[0]].answer, ref)))
                continue
            for i, j in self._schedule(idx, q, prof):
                jobs.append((i, (q, prof, requests[i].answer, requests[j].answer)))
                jobs.append((j, (q, prof, requests[j].answer, requests[i].answer)))
        if lone_fixed:
            log.warning("RM %s: %d answers without siblings or a reference answer compared with the fixed "
                        "answer %r (little signal)", self.name, lone_fixed, self.reference_answer)
        prefs = self._prefs_cached([t for _, t in jobs])
        per: list[list[float]] = [[] for _ in requests]
        for (i, _), p in zip(jobs, prefs):
            per[i].append(p)
        scores = np.array([np.nanmean(v) if np.isfinite(v).any() else np.nan for v in map(np.asarray, per)])
        failures = int(np.isnan(scores).sum())
        return ScoreOutput(scores=scores, failures=failures,
                           raw=[f"round-robin over {len(v)} opponent(s)" for v in per])

    def diagnostics(self) -> dict:
        d = self._base_diagnostics()
        d.update({"both_orders": self.both_orders, "order_seed": self.order_seed, "order_rule": self.order_rule,
                  "pairwise_parse": self.pairwise_parse, "pairwise_failure": self.pairwise_failure,
                  "pairs": self.n_pairs, "pair_failures": self.n_pair_failures,
                  "position_bias_a_rate": self.n_pick_a / self.n_parsed if self.n_parsed else None,
                  "parsed": self.n_parsed, "all_orders_right": self.n_both_right,
                  "score_comparisons": self.n_score_comparisons})
        return d


class GenerativePointwiseRM(_GenerativeRM):
    kind = "generative_pointwise"

    def score(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        if self.reward_mode == "pointwise":
            return self._score_unit(requests)
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
