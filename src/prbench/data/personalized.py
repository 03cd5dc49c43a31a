"""Adapter for the personalized benchmark (`QiyaoMa/Personalized-RewardBench`).

Hub layout: one config per subset (Art_and_Entertainment, Lifestyle_and_Personal_Development,
Society_and_Culture), each with a `test` split. Row schema:
  id: str, question: str, profile: [{id, category, text}], rubric_aspects: [{aspect, evidence,
  reason}], narrative: str, category: str, chosen: str, rejected: str
Local folders mirror it as `{source}/{subset}/{split}.jsonl`.

Outputs are split by who may read them: canonical pairs (question, retrieved profile texts,
answers) for RMs and policies; the judge key (rubric_aspects, narrative) in its own file.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Sequence

from .checks import DataError, DropLog, DuplicateGuard, check_pair_texts, is_blank, require, where
from .sources import iter_source

log = logging.getLogger("prbench.data.personalized")

BENCH = "personalized"
FIELDS = ("id", "question", "profile", "rubric_aspects", "narrative", "category", "chosen", "rejected")


@dataclass
class PersonalizedRow:
    """One validated row. `posts` are all profile post texts in file order, `post_categories`
    their categories (parallel; "" where a post has none). Question-only rows (the downstream
    LaMP-QA source) have empty `chosen` / `rejected`."""

    pair_id: str
    raw_id: str
    subset: str
    question: str
    posts: list[str]
    chosen: str
    rejected: str
    rubric_aspects: list[dict]
    narrative: str
    post_categories: list[str] | None = None


def make_pair_id(subset: str, raw_id: str) -> str:
    """Hub ids are only unique within a subset: namespace them."""
    return f"{subset}/{raw_id}"


def parse_row(rec: dict, subset: str, origin: str, row: int | str, pair: bool = True) -> PersonalizedRow:
    """Validate one hub-schema row; DataError names file, row and field. `pair=False` reads a
    question-only row (LaMP-QA schema: no chosen / rejected)."""
    raw_id = require(rec, "id", origin, row)
    question = require(rec, "question", origin, row)
    profile = require(rec, "profile", origin, row, list)
    posts, cats = [], []
    for i, post in enumerate(profile):
        text = require(post, "text", origin, row, str, path=f"profile[{i}].")
        posts.append(text)
        cat = post.get("category")
        if cat is not None and not isinstance(cat, str):
            raise DataError(
                f"{where(origin, row)}: field 'profile[{i}].category' must be str, got {type(cat).__name__}")
        cats.append(cat or "")
    # question-only rows (downstream source): judge keys may be absent, e.g. on a train split
    aspects = require(rec, "rubric_aspects", origin, row, list) if pair or rec.get("rubric_aspects") is not None else []
    clean_aspects = []
    for i, asp in enumerate(aspects):
        clean_aspects.append({
            "aspect": require(asp, "aspect", origin, row, str, path=f"rubric_aspects[{i}]."),
            "evidence": str(asp.get("evidence") or ""),
            "reason": str(asp.get("reason") or ""),
        })
    narrative = require(rec, "narrative", origin, row) if pair or rec.get("narrative") is not None else ""
    chosen = require(rec, "chosen", origin, row) if pair else ""
    rejected = require(rec, "rejected", origin, row) if pair else ""
    return PersonalizedRow(make_pair_id(subset, raw_id), raw_id, subset, question, posts, chosen, rejected,
                           clean_aspects, narrative, cats)


def load_rows(source: str, subset: str, split: str, drops: DropLog,
              rows: Iterable[tuple[str, int, dict]] | None = None, pair: bool = True,
              key: str = "data.personalized.source", revision: str | None = None) -> list[PersonalizedRow]:
    """Read and validate one subset/split; counted drops go to `drops`. `pair=False`: question
    rows without answers (the downstream prompt source, config key `data.personalized.downstream`)."""
    guard = DuplicateGuard(f"{source}/{subset}/{split}")
    out = []
    it = rows if rows is not None else iter_source(source, split, subset, key=key, revision=revision)
    for origin, lineno, rec in it:
        drops.read += 1
        r = parse_row(rec, subset, origin, lineno, pair=pair)
        if not guard.check(r.raw_id, rec, origin, lineno):
            drops.drop("duplicate_id", r.pair_id, origin, lineno)
            continue
        if pair and not check_pair_texts(r.question, r.chosen, r.rejected, r.pair_id, drops, origin, lineno):
            continue
        if not pair and is_blank(r.question):
            drops.drop("empty_question", r.pair_id, origin, lineno)
            continue
        if not r.posts:
            drops.note(f"{r.pair_id}: empty profile (kept; the RM sees the question only)")
        if not r.rubric_aspects:
            drops.note(f"{r.pair_id}: no rubric aspects (kept; the judge has nothing to rate)")
        out.append(r)
        drops.kept += 1
    if drops.read == 0:
        raise DataError(f"{source} [{subset}/{split}]: no rows")
    return out


def canonical(r: PersonalizedRow, profile: list[str], categories: list[str] | None = None) -> dict:
    """The RM-visible pair: never narrative or rubric aspects. `profile_categories` runs parallel
    to `profile` (each retrieved post's category)."""
    return {
        "pair_id": r.pair_id,
        "benchmark": BENCH,
        "subset": r.subset,
        "section": r.subset,
        "question_id": r.pair_id,
        "question": r.question,
        "profile": list(profile),
        "profile_categories": list(categories) if categories is not None else [""] * len(profile),
        "chosen": r.chosen,
        "rejected": r.rejected,
    }


def judge_key(r: PersonalizedRow) -> dict:
    return {
        "pair_id": r.pair_id,
        "question_id": r.pair_id,
        "subset": r.subset,
        "rubric_aspects": r.rubric_aspects,
        "narrative": r.narrative,
    }


def prompt_row(r: PersonalizedRow, profile: list[str], categories: list[str] | None = None) -> dict:
    return {"question_id": r.pair_id, "subset": r.subset, "question": r.question, "profile": list(profile),
            "profile_categories": list(categories) if categories is not None else [""] * len(profile)}


def select_per_subset(rows: Sequence[dict], per_subset: int | None) -> list[dict]:
    """The first `per_subset` prompt rows of each subset, in file order (all when None): the
    question selection of BoN and PPO evaluation (`bon.questions_per_subset`,
    `ppo.eval_questions_per_subset`)."""
    if per_subset is None:
        return list(rows)
    counts: dict[str, int] = {}
    out = []
    for row in rows:
        if counts.get(row["subset"], 0) < per_subset:
            counts[row["subset"]] = counts.get(row["subset"], 0) + 1
            out.append(row)
    return out
