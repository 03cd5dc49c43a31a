"""Adapter for RewardBench 2 (`allenai/reward-bench-2`, split `test`).

Row schema (the hub's): id (str), prompt, chosen (list of str), rejected (list of str), num_correct
(= len(chosen)), subset (Factuality, Precise IF, Math, Safety, Focus, Ties); optional num_incorrect,
total_completions (= len(chosen) + len(rejected)), models, additional_metadata (not read).

Each row stays ONE canonical item (a best-of-n item, never split into pairs): `chosen` and
`rejected` are the lists in the hub's order, so the item's answers are chosen + rejected with the
first `num_correct` the correct ones, as reward-bench scores them. Its `rule` says how
`prbench.scoring.bestof` credits it:
  - `best_of_n` (every subset but Ties): the first chosen answer against all the others;
  - `ties` (the Ties subset, matched case-insensitively as reward-bench does): every correct answer
    against every incorrect one; the hub id is `ref:<n>` (one correct answer) or `tied:<n>` (several),
    kept as `ties_type` and `ties_prompt`, and both items of prompt n share the question id
    `Ties:<n>`, so a bootstrap resamples them together (the Ties score pairs them).
`section` is the subset (RewardBench 2 has no sections above its subsets). Local folders hold
`{source}/{split}.jsonl`.
"""
from __future__ import annotations

import re
from typing import Iterable

from .checks import DataError, DropLog, DuplicateGuard, is_blank, require
from .sources import iter_source

SUBSETS = ("Factuality", "Precise IF", "Math", "Safety", "Focus", "Ties")
TIES_ID = re.compile(r"^(ref|tied):(\d+)$")
BEST_OF_N, TIES = "best_of_n", "ties"


def is_ties(subset: str) -> bool:
    return subset.lower() == "ties"


def _answers(rec: dict, name: str, origin: str, lineno: int) -> list[str]:
    lst = require(rec, name, origin, lineno, list)
    if not lst:
        raise DataError(f"{origin}: row {lineno}: field {name!r} must hold at least one response")
    for k, v in enumerate(lst):
        if not isinstance(v, str):
            raise DataError(f"{origin}: row {lineno}: field '{name}[{k}]' must be str, got {type(v).__name__}")
    return list(lst)


def load_pairs(source: str, split: str, bench: str, drops: DropLog, key: str = "source",
               rows: Iterable[tuple[str, int, dict]] | None = None, revision: str | None = None) -> list[dict]:
    """One canonical best-of-n item per hub row; counted drops go to `drops` (an item with an empty
    prompt or an empty answer is dropped whole: removing one answer would change its rule)."""
    guard = DuplicateGuard(f"{source}/{split}")
    out: list[dict] = []
    unknown: dict[str, int] = {}
    it = rows if rows is not None else iter_source(source, split, None, key=key, revision=revision)
    for origin, lineno, rec in it:
        drops.read += 1
        ident = require(rec, "id", origin, lineno)
        prompt = require(rec, "prompt", origin, lineno)
        subset = require(rec, "subset", origin, lineno)
        chosen = _answers(rec, "chosen", origin, lineno)
        rejected = _answers(rec, "rejected", origin, lineno)
        num_correct = require(rec, "num_correct", origin, lineno, int)
        if num_correct != len(chosen):
            raise DataError(f"{origin}: row {lineno}: num_correct is {num_correct} but 'chosen' holds "
                            f"{len(chosen)} responses")
        total = rec.get("total_completions")
        if total is not None and total != len(chosen) + len(rejected):
            raise DataError(f"{origin}: row {lineno}: total_completions is {total} but the row holds "
                            f"{len(chosen) + len(rejected)} responses")
        item = {"pair_id": ident, "benchmark": bench, "subset": subset, "section": subset,
                "question_id": ident, "question": prompt, "profile": [], "chosen": chosen,
                "rejected": rejected, "rule": BEST_OF_N}
        if is_ties(subset):
            m = TIES_ID.match(ident)
            if not m:
                raise DataError(f"{origin}: row {lineno}: a Ties id must read 'ref:<n>' or 'tied:<n>', got {ident!r}")
            if m.group(1) == "tied" and len(chosen) < 2:
                raise DataError(f"{origin}: row {lineno}: Ties item {ident!r} needs at least two correct "
                                "responses (its rule compares them)")
            item.update(rule=TIES, ties_type=m.group(1), ties_prompt=m.group(2),
                        question_id=f"Ties:{m.group(2)}")
        if not guard.check(ident, rec, origin, lineno):
            drops.drop("duplicate_id", ident, origin, lineno)
            continue
        if is_blank(prompt):
            drops.drop("empty_question", ident, origin, lineno)
            continue
        if any(is_blank(a) for a in chosen + rejected):
            drops.drop("empty_answer", ident, origin, lineno)
            continue
        if subset not in SUBSETS:
            unknown[subset] = unknown.get(subset, 0) + 1
        out.append(item)
        drops.kept += 1
    for subset, n in sorted(unknown.items()):
        drops.note(f"subset {subset!r} ({n} items) is not one of RewardBench 2's six; kept, outside its official score")
    if drops.read == 0:
        raise DataError(f"{source} [{split}]: no rows")
    return out
