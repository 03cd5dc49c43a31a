"""RM families: one `reward_models` entry with a `grid` expands into one `frozen_head` member per
combination of its values (`expand_families`, called before the config is validated), so every
member is an RM of its own (its own score files, BoN scores, rows, partial runs), while one job
trains the whole family and scores it on every benchmark (`prbench.scoring.family`) and one job
scores every BoN sample with every member (`prbench.downstream.bon.family`): each text is embedded once.

Grid keys (each a list): `profile_posts` (how many of the ranked profile posts the member sees,
0 = none), `personalized_share` (the share of personalized pairs in its training set, the rest
general), `train_pairs` (training-set size), `label_noise` (the share of training pairs whose
chosen and rejected are swapped). Member name: `<entry>_k<posts>_p<share %>_n<pairs>_e<noise %>`.
A member reads the profile when the entry's `use_profile` is true and it sees at least one post.
"""
from __future__ import annotations

import itertools
import logging
import random
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..prompts import ScoreRequest
from ..seeding import stable_seed
from .frozen_head import HeadFeatures, fit_head, save_head

log = logging.getLogger("prbench.rms.family")

GRID_KEYS = ("profile_posts", "personalized_share", "train_pairs", "label_noise")
FAMILY_KEY = "family"  # the member entry's key naming its family


def _grid_values(name: str, grid) -> dict[str, list]:
    if not isinstance(grid, Mapping):
        raise ValueError(f"config key reward_models.{name}.grid: expected a mapping of {', '.join(GRID_KEYS)}")
    bad = sorted(set(grid) - set(GRID_KEYS))
    missing = [k for k in GRID_KEYS if k not in grid]
    if bad or missing:
        raise ValueError(f"config key reward_models.{name}.grid: unknown keys {bad}, missing keys {missing} "
                         f"(expected {', '.join(GRID_KEYS)})")
    out = {}
    for k in GRID_KEYS:
        vals = grid[k]
        if not isinstance(vals, list) or not vals or len(set(map(str, vals))) != len(vals):
            raise ValueError(f"config key reward_models.{name}.grid.{k}: expected a non-empty list of distinct values, "
                             f"got {vals!r}")
        out[k] = vals
    return out


def member_name(family: str, posts, share, pairs, noise) -> str:
    return f"{family}_k{int(posts)}_p{round(100 * float(share)):03d}_n{int(pairs)}_e{round(100 * float(noise)):02d}"


def expand_families(config: dict) -> dict[str, list[str]]:
    """Replace each `reward_models` entry holding a `grid` by its members, in place and in grid order
    (the entry's other keys copied into every member). Returns family -> member names."""
    rms = config.get("reward_models") or {}
    families: dict[str, list[str]] = {}
    out: dict[str, dict] = {}
    for name, entry in rms.items():
        if not isinstance(entry, Mapping) or "grid" not in entry:
            if isinstance(entry, Mapping) and FAMILY_KEY in entry:
                families.setdefault(entry[FAMILY_KEY], []).append(name)  # expanded before (idempotent)
            out[name] = entry
            continue
        grid = _grid_values(name, entry["grid"])
        from . import KINDS

        if not getattr(KINDS.get(entry.get("kind")), "frozen_encoder", False):
            raise ValueError(f"config key reward_models.{name}.kind: a grid expands into frozen-encoder members "
                             f"(kinds {', '.join(k for k, v in KINDS.items() if v.frozen_encoder)}), "
                             f"got {entry.get('kind')!r}")
        preset = sorted(set(entry) & {FAMILY_KEY, *GRID_KEYS})
        if preset:
            raise ValueError(f"config key reward_models.{name}: {', '.join(preset)} are set per member by the "
                             f"grid (reward_models.{name}.grid), not on the family entry")
        base = {k: v for k, v in entry.items() if k != "grid"}
        families[name] = []
        for posts, share, pairs, noise in itertools.product(*(grid[k] for k in GRID_KEYS)):
            member = member_name(name, posts, share, pairs, noise)
            if member in rms or member in out:
                raise ValueError(f"config key reward_models.{name}: member {member} clashes with another entry")
            out[member] = {**base, FAMILY_KEY: name, "profile_posts": int(posts),
                           "personalized_share": float(share), "train_pairs": int(pairs),
                           "label_noise": float(noise),
                           "use_profile": bool(entry.get("use_profile")) and int(posts) > 0}
            families[name].append(member)
    if rms:
        config["reward_models"] = out
    return families


def family_members(config: dict) -> dict[str, list[str]]:
    """family -> member names of an expanded config."""
    fam: dict[str, list[str]] = {}
    for name, entry in (config.get("reward_models") or {}).items():
        if FAMILY_KEY in entry:
            fam.setdefault(entry[FAMILY_KEY], []).append(name)
    return fam


def member_paths(paths: Sequence[str], members: Sequence[str], name_of) -> dict[str, str]:
    """Each member's path among `paths`, matched by the member name `name_of(Path(path))` reads from
    the path itself (never by position: a job's params and its inputs or outputs need not share an
    order). Raises when a member has no path or two, or a path names no member."""
    out: dict[str, str] = {}
    for path in paths:
        name = name_of(Path(path))
        if name not in members or name in out:
            raise ValueError(f"{path}: names {name!r}, {'a member twice' if name in out else 'no member'} of "
                             f"the family ({', '.join(members)})")
        out[name] = str(path)
    missing = [m for m in members if m not in out]
    if missing:
        raise ValueError(f"family members without a path: {missing}")
    return out


def pair_requests(rows: Sequence[dict]) -> tuple[list[ScoreRequest], list[ScoreRequest]]:
    ch = [ScoreRequest(r["question"], r["chosen"], tuple(r["profile"])) for r in rows]
    rj = [ScoreRequest(r["question"], r["rejected"], tuple(r["profile"])) for r in rows]
    return ch, rj


def family_pool(sources: Mapping[str, Sequence[dict]], specs: Mapping[str, dict], seed: int) -> dict[str, list[dict]]:
    """The rows a family's members draw from: per source, the first `2 x max(train_pairs)` rows of a
    seeded shuffle (fewer texts to embed; members still draw different pairs)."""
    size = 2 * max(int(s["train_pairs"]) for s in specs.values())
    out = {}
    for src, rows in sources.items():
        rows = list(rows)
        random.Random(stable_seed(seed, "rm_family_pool", src)).shuffle(rows)
        out[src] = rows[:size]
    return out


def training_rows(spec: dict, sources: Mapping[str, Sequence[dict]], seed: int) -> tuple[list[dict], np.ndarray]:
    """The member's training pairs (drawn without replacement from `sources`, the family pool:
    `round(train_pairs * share)` personalized, the rest general) and a flip flag per pair (each pair
    swapped with probability `label_noise`)."""
    rng = random.Random(stable_seed(seed, "rm_family", spec["name"]))
    n = int(spec["train_pairs"])
    want = {"personalized": round(n * float(spec["personalized_share"]))}
    want["general"] = n - want["personalized"]
    rows: list[dict] = []
    for src, k in want.items():
        pool = list(sources.get(src) or [])
        if k > len(pool):
            raise ValueError(f"RM {spec['name']}: train_pairs x share asks {k} {src} training pairs, the train "
                             f"file has {len(pool)}")
        rows += rng.sample(pool, k)
    flips = np.array([rng.random() < float(spec["label_noise"]) for _ in rows], dtype=bool)
    return rows, flips


def train_member(spec: dict, features: HeadFeatures, sources: Mapping[str, Sequence[dict]], seed: int,
                 out_dir: str | Path) -> dict:
    rows, flips = training_rows(spec, sources, seed)
    k = int(spec["profile_posts"]) if spec["use_profile"] else 0
    ch, rj = pair_requests(rows)
    diffs = features.matrix(ch, k) - features.matrix(rj, k)
    diffs[flips] *= -1
    w = fit_head(diffs)
    meta = {"name": spec["name"], "encoder": features.encoder, "profile_posts": k, "train_pairs": len(rows),
            "personalized_share": float(spec["personalized_share"]), "label_noise": float(spec["label_noise"]),
            "flipped": int(flips.sum()), "seed": seed}
    save_head(out_dir, w, meta)
    return meta
