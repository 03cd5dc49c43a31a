"""Rules rm_family_<family>: train every member of an RM family (prbench.rms.family) and score each
benchmark with each, on one embedding pass of the shared frozen encoder."""
from __future__ import annotations

import logging
from typing import Mapping

from ..io import read_jsonl
from ..prompts import ScoreRequest
from ..rms.family import family_pool, pair_requests, train_member
from ..rms.frozen_head import FrozenHeadRM, HeadFeatures, sentences
from .benchmark import is_item, load_pairs, score_benchmark

log = logging.getLogger("prbench.scoring.family")


def train_and_score_family(specs: Mapping[str, dict], train_paths: Mapping[str, str], model_dirs: Mapping[str, str],
                           benches: Mapping[str, dict], seed: int, scoring: dict, encoder: str) -> dict:
    """Train every member, then score each benchmark with each. `benches`: name -> {path, kind, pairs_out
    (member -> path), acc_out (member -> path)}. Returns member -> {train meta, benchmark accuracies}."""
    features = HeadFeatures(encoder)
    sources = family_pool({src: read_jsonl(p) for src, p in train_paths.items()}, specs, seed)
    # one embedding pass over every training and benchmark text
    all_rows = [r for rows in sources.values() for r in rows]
    bench_rows = [r for b in benches.values() for r in load_pairs(b["path"])]
    all_rows += [r for r in bench_rows if not is_item(r)]
    ch, rj = pair_requests(all_rows)
    # best-of-n items (RewardBench 2): every answer of the item
    ch += [ScoreRequest(r["question"], a, tuple(r["profile"])) for r in bench_rows if is_item(r)
           for a in [*r["chosen"], *r["rejected"]]]
    posts = max([int(s["profile_posts"]) for s in specs.values()] + [0])
    features.embed([t for req in ch + rj for t in (req.question, *sentences(req.answer), *req.profile[:posts])])
    out: dict = {}
    for name, spec in specs.items():
        out[name] = {"train": train_member(spec, features, sources, seed, model_dirs[name])}
        rm = FrozenHeadRM({**spec, "name": name, "path": model_dirs[name]}, features=features)
        for bench, b in benches.items():
            summary = score_benchmark(b["path"], {**spec, "name": name}, b["pairs_out"][name], b["acc_out"][name],
                                      bench, seed=seed, scoring=scoring, rm=rm, bench_kind=b.get("kind"))
            out[name][bench] = summary["overall"]["accuracy"]
        log.info("member %s: %s", name, out[name])
    log.info("embedded %d texts", features.embedded)
    return out
