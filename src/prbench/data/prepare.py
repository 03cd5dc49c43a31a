"""The prepare stage: sources -> canonical benchmark / train / prompt / judge-key files + report.

Called by workflow_scripts/prepare_personalized.py and prepare_baseline.py (and by tests).

Train files (`results/data/train/{bench}.jsonl`) hold the canonical pairs of the source's
train split (`train_split`). When a source has no train split (the paper's hub data) the file
is written empty and the report says so: no stage outside the demo trains on it.

Prompt rows (`results/data/prompts/{train,eval}.jsonl`): with `downstream` set (a separate
source in the LaMP-QA schema, the paper's protocol) train prompts are its `train_split`
questions and eval prompts its `eval_split` questions, every one of them, ranked with the same
retriever; their judge keys join the judge-key file. Otherwise, with `train_split` set, train
prompts are the benchmark's train split questions and eval prompts the evaluated split's
questions; without either the evaluated split is divided by a hash of (seed, question_id): a
`holdout_fraction` share goes to eval, the rest to train. In every mode train and eval never
share a question id or a question text (checked: DataError).
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import Callable

import numpy as np

from ..config import with_defaults
from ..io import write_json, write_jsonl
from ..seeding import stable_seed
from . import baselines
from . import personalized as pers
from .checks import DataError, DropLog, log_report
from .retrieval import build_retriever, rank_profile_indices

log = logging.getLogger("prbench.data.prepare")

class CachedEmbedder:
    """Wraps `embed(texts) -> array` so each unique text is embedded once across calls."""

    def __init__(self, embed: Callable):
        self._embed = embed
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, texts):
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for t, v in zip(missing, self._embed(missing)):
                self._cache[t] = v
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)

    @property
    def n_unique(self) -> int:
        return len(self._cache)


def in_holdout(seed: int, question_id: str, fraction: float) -> bool:
    return stable_seed(seed, "holdout", question_id) / 2**32 < fraction


def _retrieve(rows: list[pers.PersonalizedRow], embed, top_k: int) -> list[tuple[list[str], list[str]]]:
    """Top-k (post texts, post categories) per row, grouped by subset so memory stays bounded."""
    out: list[tuple[list[str], list[str]] | None] = [None] * len(rows)
    by_subset: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_subset.setdefault(r.subset, []).append(i)
    for subset, idx in by_subset.items():
        ranked = rank_profile_indices(embed, [rows[i].question for i in idx], [rows[i].posts for i in idx], top_k)
        for i, order in zip(idx, ranked):
            cats = rows[i].post_categories or [""] * len(rows[i].posts)
            out[i] = ([rows[i].posts[j] for j in order], [cats[j] for j in order])
        log.info("retrieved top-%d posts for %d %s rows", top_k, len(idx), subset)
    return out  # type: ignore[return-value]


def _check_disjoint(train: list[dict], evals: list[dict], what: str) -> int:
    """No eval question id may reach PPO training (DataError). Returns how many question texts
    the two sides share (different ids, same wording: logged and reported, not an error)."""
    ids = {p["question_id"] for p in train} & {p["question_id"] for p in evals}
    if ids:
        raise DataError(f"{what}: train and eval prompts share {len(ids)} question ids, e.g. {sorted(ids)[:3]}")
    texts = {p["question"].strip() for p in train} & {p["question"].strip() for p in evals}
    if texts:
        log.warning("%s: %d question texts appear in both train and eval prompts (different ids)", what, len(texts))
    return len(texts)


def _downstream(
    ds_cfg: dict, subsets: list[str], cached, top_k: int
) -> tuple[list[dict], list[dict], list[dict], dict]:
    """Train / eval prompt rows and eval judge keys from the downstream source (LaMP-QA schema)."""
    source = ds_cfg["source"]
    subs = ds_cfg["subsets"] or subsets
    out, drops = {}, {}
    for role in ("train_split", "eval_split"):
        split = ds_cfg[role]
        drops[split] = DropLog(f"downstream[{split}]")
        rows: list[pers.PersonalizedRow] = []
        for subset in subs:
            rows += pers.load_rows(source, subset, split, drops[split], pair=False,
                                   key="data.personalized.downstream.source", revision=ds_cfg.get("revision"))
        out[role] = (rows, _retrieve(rows, cached, top_k))
    train_rows, train_prof = out["train_split"]
    eval_rows, eval_prof = out["eval_split"]
    prompts_train = [pers.prompt_row(r, p, c) for r, (p, c) in zip(train_rows, train_prof)]
    prompts_eval = [pers.prompt_row(r, p, c) for r, (p, c) in zip(eval_rows, eval_prof)]
    keys = [pers.judge_key(r) for r in eval_rows]
    return prompts_train, prompts_eval, keys, {s: d.as_dict() for s, d in drops.items()}


def _load_splits(data_cfg: dict) -> tuple[list[pers.PersonalizedRow], list[pers.PersonalizedRow], dict]:
    """Rows of the evaluated split and of the train split (if any), with their drop logs; the two
    splits may not share a pair id (DataError)."""
    source, split, train_split = data_cfg["source"], data_cfg["split"], data_cfg["train_split"]
    drops = {split: DropLog(f"{pers.BENCH}[{split}]")}
    test_rows: list[pers.PersonalizedRow] = []
    for subset in data_cfg["subsets"]:
        test_rows += pers.load_rows(source, subset, split, drops[split], revision=data_cfg.get("revision"))
    train_rows: list[pers.PersonalizedRow] = []
    if train_split:
        drops[train_split] = DropLog(f"{pers.BENCH}[{train_split}]")
        for subset in data_cfg["subsets"]:
            train_rows += pers.load_rows(source, subset, train_split, drops[train_split],
                                         revision=data_cfg.get("revision"))
        overlap = {r.pair_id for r in test_rows} & {r.pair_id for r in train_rows}
        if overlap:
                raise DataError(f"{source}: splits {split!r} and {train_split!r} share ids, e.g. {sorted(overlap)[:3]}")
    return test_rows, train_rows, drops


def _merge_keys(keys: list[dict], ds_keys: list[dict], downstream: dict, source: str) -> None:
    """Append the downstream source's judge keys to `keys`; a question both sources hold must
    carry the same rubric aspects and narrative (DataError)."""
    have = {k["question_id"]: k for k in keys}
    for k in ds_keys:
        old = have.get(k["question_id"])
        if old is None:
            keys.append(k)
            have[k["question_id"]] = k
        elif old["rubric_aspects"] != k["rubric_aspects"] or old["narrative"] != k["narrative"]:
                raise DataError(f"data.personalized.downstream.source {downstream['source']!r}: question "
                            f"{k['question_id']!r} has other rubric aspects / narrative than in "
                            f"data.personalized.source {source!r}")


def _prompts(data_cfg: dict, seed: int, test: tuple, train: tuple, keys: list[dict], cached, top_k: int):
    """Train / eval prompt rows in the configured mode (see the module docstring); the downstream
    source's judge keys join `keys`. Returns (prompts_train, prompts_eval, downstream drop logs, mode)."""
    (test_rows, test_prof), (train_rows, train_prof) = test, train
    split, train_split = data_cfg["split"], data_cfg["train_split"]
    downstream = data_cfg["downstream"]
    if downstream:
        prompts_train, prompts_eval, ds_keys, ds_splits = _downstream(downstream, data_cfg["subsets"], cached, top_k)
        _merge_keys(keys, ds_keys, downstream, data_cfg["source"])
        mode = (f"downstream source {downstream['source']!r}: train prompts from split "
                f"{downstream['train_split']!r}, eval prompts from split {downstream['eval_split']!r}")
        return prompts_train, prompts_eval, ds_splits, mode
    if train_split:
        prompts_train = [pers.prompt_row(r, p, c) for r, (p, c) in zip(train_rows, train_prof)]
        prompts_eval = [pers.prompt_row(r, p, c) for r, (p, c) in zip(test_rows, test_prof)]
        mode = f"train prompts from split {train_split!r}, eval prompts from split {split!r}"
        return prompts_train, prompts_eval, None, mode
    frac = float(data_cfg["holdout_fraction"])
    prompts_train, prompts_eval = [], []
    for r, (p, c) in zip(test_rows, test_prof):
        (prompts_eval if in_holdout(seed, r.pair_id, frac) else prompts_train).append(pers.prompt_row(r, p, c))
    mode = f"split {split!r} divided by hashed question id: {frac:.0%} eval (holdout), rest train"
    return prompts_train, prompts_eval, None, mode


def prepare_personalized(data_cfg: dict, retriever_cfg: dict, seed: int, outputs: dict,
                         embed: Callable | None = None) -> dict:
    """Build every personalized output. `outputs` maps benchmark, judge_keys, train,
    prompts_train, prompts_eval, report to paths. `embed` (texts -> array) overrides the
    configured dense retriever (tests)."""
    data_cfg = with_defaults(data_cfg, "data.personalized")  # the schema holds the defaults
    retriever_cfg = with_defaults(retriever_cfg, "retriever")
    train_split = data_cfg["train_split"]
    top_k = int(retriever_cfg["top_k"])
    test_rows, train_rows, drops = _load_splits(data_cfg)
    if embed is None:
        embed = build_retriever(retriever_cfg).embed
    cached = CachedEmbedder(embed)
    test_prof = _retrieve(test_rows, cached, top_k)
    train_prof = _retrieve(train_rows, cached, top_k) if train_rows else []

    bench_rows = [pers.canonical(r, p, c) for r, (p, c) in zip(test_rows, test_prof)]
    train_pairs = [pers.canonical(r, p, c) for r, (p, c) in zip(train_rows, train_prof)]
    keys = [pers.judge_key(r) for r in test_rows]
    prompts_train, prompts_eval, ds_splits, prompt_mode = _prompts(
        data_cfg, seed, (test_rows, test_prof), (train_rows, train_prof), keys, cached, top_k)
    what = "data.personalized" + (".downstream" if data_cfg["downstream"] else "")
    shared_texts = _check_disjoint(prompts_train, prompts_eval, what)

    write_jsonl(outputs["benchmark"], bench_rows)
    write_jsonl(outputs["judge_keys"], keys)
    write_jsonl(outputs["train"], train_pairs)
    write_jsonl(outputs["prompts_train"], prompts_train)
    write_jsonl(outputs["prompts_eval"], prompts_eval)

    report = {
        "benchmark": pers.BENCH,
        "source": data_cfg["source"],
        "split": data_cfg["split"],
        "train_split": train_split,
        "splits": {name: d.as_dict() for name, d in drops.items()},
        "pairs_per_subset": dict(Counter(r["subset"] for r in bench_rows)),
        "train_pairs": len(train_pairs),
        "train_note": None if train_split else "no train split configured: train file written empty",
        "judge_keys": len(keys),
        "prompts": {"train": len(prompts_train), "eval": len(prompts_eval), "mode": prompt_mode,
                    "downstream_splits": ds_splits, "shared_question_texts": shared_texts},
        "retriever": {"model": retriever_cfg["model"], "pooling": retriever_cfg["pooling"],
                      "top_k": top_k, "unique_texts_embedded": cached.n_unique},
        "mean_profile_posts": float(np.mean([len(r.posts) for r in test_rows])) if test_rows else 0.0,
    }
    write_json(outputs["report"], report)
    log_report(report)
    log.info("personalized: %d benchmark pairs, %d train pairs, %d/%d train/eval prompts, %d texts embedded",
             len(bench_rows), len(train_pairs), len(prompts_train), len(prompts_eval), cached.n_unique)
    return report


def prepare_baseline(name: str, cfg: dict, outputs: dict) -> dict:
    """Canonical pairs of a general baseline (RewardBench or RM-Bench schema) + its train split."""
    cfg = with_defaults(cfg, f"data.baselines.{name}")
    kind = cfg["kind"]
    load = baselines.loader(kind, name)
    key = f"data.baselines.{name}.source"
    split = cfg["split"]
    train_split = cfg["train_split"]
    drops = {split: DropLog(f"{name}[{split}]")}
    pin = {"revision": cfg["revision"]} if cfg.get("revision") else {}  # unpinned: the lock's (iter_hub)
    pairs = load(cfg["source"], split, name, drops[split], key=key, **pin)
    train_pairs: list[dict] = []
    if train_split:
        drops[train_split] = DropLog(f"{name}[{train_split}]")
        train_pairs = load(cfg["source"], train_split, name, drops[train_split], key=key, **pin)
    write_jsonl(outputs["benchmark"], pairs)
    write_jsonl(outputs["train"], train_pairs)
    report = {
        "benchmark": name,
        "kind": kind,
        "source": cfg["source"],
        "split": split,
        "train_split": train_split,
        "splits": {s: d.as_dict() for s, d in drops.items()},
        "pairs_per_subset": dict(Counter(p["subset"] for p in pairs)),
        "pairs_per_section": dict(Counter(p["section"] for p in pairs)),
        "questions": len({p["question_id"] for p in pairs}),
        "train_pairs": len(train_pairs),
        "train_note": None if train_split else "no train split configured: train file written empty",
    }
    write_json(outputs["report"], report)
    log_report(report)
    log.info("%s: %d pairs (%d questions), %d train pairs", name, len(pairs), report["questions"], len(train_pairs))
    return report
