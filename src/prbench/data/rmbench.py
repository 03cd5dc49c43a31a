"""Adapter for RM-Bench (`THU-KEG/RM-Bench`).

Row schema: id, prompt, chosen: [concise, detailed_plain, detailed_markdown],
rejected: [same three styles], domain (chat, code, math, safety-refuse, safety-response).
Every prompt gives the 3x3 style matrix of comparisons (row = chosen style i, column =
rejected style j), grouped as in the RM-Bench paper:
  hard   = i < j  (chosen in a plainer style than the rejected answer: style works against it)
  normal = i == j (same style)
  easy   = i > j  (chosen in the fancier style)
`subset` is the domain, `section` the difficulty, `question_id` the prompt id.
"""
from __future__ import annotations

from typing import Iterable

from .checks import DataError, DropLog, DuplicateGuard, is_blank, require
from .sources import iter_source

STYLES = ("concise", "detailed_plain", "detailed_markdown")
N_STYLES = len(STYLES)


def section_for(i: int, j: int) -> str:
    return "hard" if i < j else ("normal" if i == j else "easy")


def load_pairs(source: str, split: str, bench: str, drops: DropLog, key: str = "source",
               rows: Iterable[tuple[str, int, dict]] | None = None, revision: str | None = None) -> list[dict]:
    """Nine canonical pairs per prompt; counted drops (per comparison) go to `drops`."""
    guard = DuplicateGuard(f"{source}/{split}")
    out: list[dict] = []
    it = rows if rows is not None else iter_source(source, split, None, key=key, revision=revision)
    for origin, lineno, rec in it:
        ident = require(rec, "id", origin, lineno)
        prompt = require(rec, "prompt", origin, lineno)
        domain = require(rec, "domain", origin, lineno)
        chosen = require(rec, "chosen", origin, lineno, list)
        rejected = require(rec, "rejected", origin, lineno, list)
        for name, lst in (("chosen", chosen), ("rejected", rejected)):
            if len(lst) != N_STYLES:
                raise DataError(f"{origin}: row {lineno}: field {name!r} must hold {N_STYLES} responses "
                                f"({', '.join(STYLES)}), got {len(lst)}")
            for k, v in enumerate(lst):
                if not isinstance(v, str):
                    raise DataError(f"{origin}: row {lineno}: field '{name}[{k}]' must be str, got {type(v).__name__}")
        drops.read += N_STYLES * N_STYLES
        if not guard.check(ident, rec, origin, lineno):
            for i in range(N_STYLES):
                for j in range(N_STYLES):
                    drops.drop("duplicate_id", f"{ident}/c{i}r{j}", origin, lineno)
            continue
        for i in range(N_STYLES):
            for j in range(N_STYLES):
                pid = f"{ident}/c{i}r{j}"
                if is_blank(prompt):
                    drops.drop("empty_question", pid, origin, lineno)
                    continue
                if is_blank(chosen[i]) or is_blank(rejected[j]):
                    drops.drop("empty_answer", pid, origin, lineno)
                    continue
                if chosen[i].strip() == rejected[j].strip():
                    drops.drop("chosen_equals_rejected", pid, origin, lineno)
                    continue
                out.append({
                    "pair_id": pid,
                    "benchmark": bench,
                    "subset": domain,
                    "section": section_for(i, j),
                    "question_id": ident,
                    "question": prompt,
                    "profile": [],
                    "chosen": chosen[i],
                    "rejected": rejected[j],
                    "chosen_style": STYLES[i],
                    "rejected_style": STYLES[j],
                })
                drops.kept += 1
    if drops.read == 0:
        raise DataError(f"{source} [{split}]: no rows")
    return out
