"""Baseline benchmark kinds: the one registry of what a `data.baselines.<name>.kind` can be.

Each kind names, as "module:attr" strings under `prbench` imported on first use (as
`prbench.rms.KINDS` does), its loader (the hub schema's rows -> canonical pairs, rule
prepare_baseline) and its official headline score (the rows' per-pair credits -> the score's
components, `prbench.scoring.official`). The config checks (`prbench.validation`), the prepare
stage, the accuracy table and the correlations all ask this registry; nothing else lists kinds.
Adding a baseline kind = a loader module beside this file, its official-score components in
`prbench/scoring/official.py`, and one `BaselineKind` entry here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..registry import load_ref


@dataclass(frozen=True)
class BaselineKind:
    name: str
    loader: str           # "module:function" under prbench: (source, split, name, drops, key=) -> canonical pairs
    official: str | None  # "module:function" under prbench: (rows, credit) -> components; None = no official score


ITEM_KINDS = ("rewardbench2",)  # kinds whose canonical rows are best-of-n items (answer lists), not pairs


KINDS: dict[str, BaselineKind] = {k.name: k for k in (
    BaselineKind("rewardbench", "data.rewardbench:load_pairs", "scoring.official:rewardbench_components"),
    BaselineKind("rmbench", "data.rmbench:load_pairs", "scoring.official:rmbench_components"),
    # best-of-n items, not pairs (prbench.scoring.bestof): no train split (validation refuses one)
    BaselineKind("rewardbench2", "data.rewardbench2:load_pairs", "scoring.official:rewardbench2_components"),
)}


def kind_info(kind: str, name: str = "<unnamed>") -> BaselineKind:
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"config key data.baselines.{name}.kind: unknown baseline kind {kind!r} "
                         f"(known: {', '.join(KINDS)})") from None


def has_official(kind: str | None) -> bool:
    """Whether a benchmark of this kind has an official headline score (None: the personalized one)."""
    return kind in KINDS and KINDS[kind].official is not None


def loader(kind: str, name: str = "<unnamed>") -> Callable:
    return load_ref(kind_info(kind, name).loader, "prbench")


def official_components(kind: str) -> Callable:
    if not has_official(kind):
        raise ValueError(f"no official score for benchmark kind {kind!r} "
                         f"(known: {', '.join(k for k in KINDS if has_official(k))})")
    return load_ref(KINDS[kind].official, "prbench")
