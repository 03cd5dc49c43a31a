"""Adapter for RewardBench (`allenai/reward-bench`, split `filtered`).

Row schema: prompt, chosen, chosen_model, rejected, rejected_model, subset, id (int on the hub).
Sections follow RewardBench's own grouping of its subsets (chat, chat_hard, safety, reasoning).
A subset outside that map is kept under section `other` and listed in the report.
Local folders hold `{source}/{split}.jsonl`.
"""
from __future__ import annotations

from typing import Iterable

from .checks import DataError, DropLog, DuplicateGuard, check_pair_texts, require
from .sources import iter_source

SECTIONS: dict[str, list[str]] = {
    "chat": ["alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"],
    "chat_hard": ["mt-bench-hard", "llmbar-natural", "llmbar-adver-neighbor", "llmbar-adver-GPTInst",
                  "llmbar-adver-GPTOut", "llmbar-adver-manual"],
    "safety": ["refusals-dangerous", "refusals-offensive", "xstest-should-refuse", "xstest-should-respond",
               "donotanswer"],
    "reasoning": ["math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"],
}
SUBSET_TO_SECTION = {s: sec for sec, subs in SECTIONS.items() for s in subs}
OTHER_SECTION = "other"


def section_of(subset: str) -> str:
    return SUBSET_TO_SECTION.get(subset, OTHER_SECTION)


def load_pairs(source: str, split: str, bench: str, drops: DropLog, key: str = "source",
               rows: Iterable[tuple[str, int, dict]] | None = None, revision: str | None = None) -> list[dict]:
    """Canonical pairs from a RewardBench-schema source; counted drops go to `drops`."""
    guard = DuplicateGuard(f"{source}/{split}")
    out: list[dict] = []
    unknown: dict[str, int] = {}
    it = rows if rows is not None else iter_source(source, split, None, key=key, revision=revision)
    for origin, lineno, rec in it:
        drops.read += 1
        ident = require(rec, "id", origin, lineno)
        prompt = require(rec, "prompt", origin, lineno)
        chosen = require(rec, "chosen", origin, lineno)
        rejected = require(rec, "rejected", origin, lineno)
        subset = require(rec, "subset", origin, lineno)
        for opt in ("chosen_model", "rejected_model"):
            if opt not in rec:
                raise DataError(f"{origin}: row {lineno}: missing field {opt!r}")
        if not guard.check(ident, rec, origin, lineno):
            drops.drop("duplicate_id", ident, origin, lineno)
            continue
        if not check_pair_texts(prompt, chosen, rejected, ident, drops, origin, lineno):
            continue
        section = section_of(subset)
        if section == OTHER_SECTION:
            unknown[subset] = unknown.get(subset, 0) + 1
        out.append({
            "pair_id": ident,
            "benchmark": bench,
            "subset": subset,
            "section": section,
            "question_id": ident,
            "question": prompt,
            "profile": [],
            "chosen": chosen,
            "rejected": rejected,
        })
        drops.kept += 1
    for subset, n in sorted(unknown.items()):
        drops.note(f"subset {subset!r} ({n} pairs) is not in RewardBench's section map; kept as section 'other'")
    if drops.read == 0:
        raise DataError(f"{source} [{split}]: no rows")
    return out
