"""Prompt rows of the trained-policy stages (PPO, GRPO) and of their shared evaluation.

A prompt row (`results/data/prompts/{train,eval}.jsonl`) carries question_id, subset, question and
profile (the retrieved posts, best first). Training caps rows to `max_prompt_tokens`
(`cap_prompt_rows`), evaluation takes the first questions of each subset (`select_eval_prompts`),
and a pairwise RM compares rollouts with the base policy's greedy answers (`base_reference_answers`).
"""
from __future__ import annotations

import json
import logging
import os
from typing import Sequence

from ..data.personalized import select_per_subset
from ..io import read_jsonl
from ..models import resolve_model_ref
from ..revisions import hub_kwargs
from ..seeding import stable_seed
from .policy import generate_answers, prepare_tokenizer
from .reward_adapter import render_policy_prompt, tokenize_prompt

log = logging.getLogger("prbench.downstream.prompt_rows")

PROMPT_FIELDS = ("question_id", "subset", "question", "profile")


def load_prompt_rows(path: str | os.PathLike) -> list[dict]:
    rows = read_jsonl(path)
    if not rows:
        raise ValueError(f"{path}: no prompt rows")
    for i, row in enumerate(rows, 1):
        missing = [k for k in PROMPT_FIELDS if k not in row]
        if missing:
            raise ValueError(f"{path}:{i}: prompt row lacks field(s) {missing}")
        if not isinstance(row["profile"], list):
            raise ValueError(f"{path}:{i}: field 'profile' must be a list of post texts")
    return rows


def select_eval_prompts(rows: Sequence[dict], per_subset: int | None) -> list[dict]:
    """The first `per_subset` prompts of each subset, in file order (all when None)."""
    return select_per_subset(rows, per_subset)


def limit_posts(rows: Sequence[dict], n_posts: int | None) -> list[dict]:
    """Rows showing only their first `n_posts` profile posts (the best-ranked; all when None):
    the evaluation's post count (`ppo.eval_posts`)."""
    if n_posts is None:
        return list(rows)
    out = []
    for row in rows:
        row = {**row, "profile": list(row["profile"])[:n_posts]}
        if "profile_categories" in row:
            row["profile_categories"] = list(row["profile_categories"])[:n_posts]
        out.append(row)
    return out


LONG_PROMPTS = ("trim", "filter")


def cap_prompt_rows(rows: Sequence[dict], tok, max_tokens: int | None, mode: str = "trim",
                    key: str = "ppo") -> tuple[list[dict], dict]:
    """Rows whose rendered policy prompt fits `max_tokens` (`{key}.long_prompts`):

    - `trim`: profile posts are dropped from the end of the list first (the lowest-ranked:
      `profile` lists the retrieved posts best first); a prompt that does not fit even without
      profile posts is an error naming `{key}.max_prompt_tokens`;
    - `filter`: a prompt over the limit is left out whole (verl's filter_overlong_prompts).

    Returns the rows and the counts (prompts capped, posts dropped, prompts filtered)."""
    if mode not in LONG_PROMPTS:
        raise ValueError(f"config key {key}.long_prompts: {mode!r} is not one of {list(LONG_PROMPTS)}")
    stats = {"prompts_capped": 0, "posts_dropped": 0, "prompts_filtered": 0}
    if max_tokens is None:
        return list(rows), stats
    out = []
    for row in rows:
        profile = list(row.get("profile", []))
        n0 = len(profile)
        if mode == "filter":
            if len(tokenize_prompt(tok, render_policy_prompt(tok, row))) > max_tokens:
                stats["prompts_filtered"] += 1
            else:
                out.append(row)
            continue
        while len(tokenize_prompt(tok, render_policy_prompt(tok, {**row, "profile": profile}))) > max_tokens:
            if not profile:
                raise ValueError(f"config key {key}.max_prompt_tokens: {max_tokens} tokens do not hold the question "
                                 f"of prompt {row['question_id']} even without profile posts")
            profile.pop()
        if len(profile) < n0:
            stats["prompts_capped"] += 1
            stats["posts_dropped"] += n0 - len(profile)
            row = {**row, "profile": profile}
        out.append(row)
    return out, stats


def filter_long_prompts(rows: Sequence[dict], policy_path: str, trust_remote_code: bool, max_tokens: int | None,
                        mode: str, key: str, revision: str | None = None) -> tuple[list[dict], dict]:
    """Training rows after `{key}.long_prompts` `filter` (prompts over `{key}.max_prompt_tokens`
    left out, counted and logged), measured with the policy's tokenizer. Runs before the run's
    settings are resolved, so "one pass over the training prompts" counts the kept prompts. With
    `trim` (or no limit) the rows pass unchanged; the trainer trims them (`cap_prompt_rows`)."""
    if mode not in LONG_PROMPTS:
        raise ValueError(f"config key {key}.long_prompts: {mode!r} is not one of {list(LONG_PROMPTS)}")
    if mode != "filter" or max_tokens is None:
        return list(rows), {"prompts_filtered": 0}
    from transformers import AutoTokenizer

    ref = resolve_model_ref(str(policy_path))
    rev = hub_kwargs(ref, "model", revision, key="policies.<policy>.path", trust_remote_code=trust_remote_code)
    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(ref, trust_remote_code=trust_remote_code, **rev))
    kept, stats = cap_prompt_rows(rows, tok, max_tokens, "filter", key)
    if not kept:
        raise ValueError(f"config keys {key}.max_prompt_tokens / {key}.long_prompts: all {len(rows)} training "
                         f"prompts are longer than {max_tokens} tokens and were filtered out")
    if stats["prompts_filtered"]:
        log.warning("%s.long_prompts filter: %d of %d training prompts are over %s.max_prompt_tokens %d and "
                    "were left out", key, stats["prompts_filtered"], len(rows), key, max_tokens)
    return kept, {"prompts_filtered": stats["prompts_filtered"]}


def render_key(row: dict) -> str:
    """A text key of the model-visible prompt content (question + profile)."""
    return json.dumps([row["question"], list(row.get("profile", []))], ensure_ascii=False)


def base_reference_answers(model, tok, rows: Sequence[dict], settings: dict, seed: int) -> dict:
    """The base policy's greedy answer to every training prompt, {(question, profile): answer}.

    A pairwise RM rewards a PPO rollout by comparing it with this answer to the same prompt
    (`GenerativePairwiseRM.score`): reward = P(rollout preferred over the base answer)."""
    answers = generate_answers(model, tok, list(rows), n=1, max_new_tokens=int(settings["response_length"]),
                               seed=stable_seed(seed, "ppo-reference"), greedy=True, progress=False)
    log.info("pairwise RM: rollouts are compared with the base policy's greedy answers to %d prompts", len(rows))
    return {(r["question"], tuple(r.get("profile", []))): a[0] for r, a in zip(rows, answers)}
