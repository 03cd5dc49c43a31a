"""Best-of-N jobs: sample once per policy (sharded), judge every unique sample once, score the samples
with each RM. The curves, tables and measures built from these files are in `curves.py`."""
from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Sequence

import numpy as np

from ...config import entry_with_defaults
from ...data.personalized import select_per_subset
from ...generation import sampling_settings
from ...io import read_jsonl, write_jsonl
from ...judge import JudgeItem, judge_items_cached, load_judge, shard_name
from ...prompts import ScoreRequest
from ...rms import load_reward_model
from .. import policy as pol

log = logging.getLogger("prbench.downstream.bon")


# ---------------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------------
def select_questions(prompt_rows: Sequence[dict], per_subset: int | None) -> list[dict]:
    """The first `per_subset` prompts of each subset, in file order (all when None), after checking
    every row's fields and that question ids are unique."""
    seen = set()
    for i, row in enumerate(prompt_rows):
        for key in ("question_id", "subset", "question", "profile"):
            if key not in row:
                raise ValueError(f"prompt row {i}: missing field {key!r}")
        if row["question_id"] in seen:
            raise ValueError(f"prompt row {i}: duplicate question_id {row['question_id']!r}")
        seen.add(row["question_id"])
    return select_per_subset(prompt_rows, per_subset)


def shard_rows(rows: Sequence, shard: int, shards: int) -> list:
    """Contiguous, balanced shard `shard` of `shards` (0-based)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} outside 0..{shards - 1} (config key bon.shards)")
    bounds = np.linspace(0, len(rows), shards + 1).round().astype(int)
    return list(rows[bounds[shard]:bounds[shard + 1]])


def sample_bon(prompts_path: str, policy_spec: dict, bon_cfg: dict, seed: int, shard: int,
               out_path: str, model=None, tokenizer=None) -> int:
    """Generate bon.n samples for every selected question of this shard.

    Sampling noise is derived per (seed, question_id, sample_idx), so the samples do not depend
    on the number of shards or on the batch size."""
    bon_cfg = entry_with_defaults(bon_cfg, "bon")  # the job's picked keys; the schema fills the rest
    policy_spec = entry_with_defaults(policy_spec, "policies.*")
    rows = select_questions(read_jsonl(prompts_path), bon_cfg["questions_per_subset"])
    mine = shard_rows(rows, shard, int(bon_cfg["shards"]))
    n = int(bon_cfg["n"])
    gen_kw = dict(n=n, **sampling_settings(bon_cfg), max_new_tokens=int(bon_cfg["max_new_tokens"]), seed=seed)
    log.info("shard %d/%d: %d questions x %d samples", shard, bon_cfg["shards"], len(mine), n)
    trust = bool(policy_spec["trust_remote_code"])
    if not mine:
        answers = []
    elif bon_cfg["backend"] == "vllm" and model is None:
        answers = pol.generate_answers_vllm(policy_spec["path"], mine, trust_remote_code=trust,
                                            revision=policy_spec["revision"], **gen_kw)
    else:
        if model is None:  # `device`: a direct caller's runtime key (not in the policies schema)
            model, tokenizer = pol.load_policy(policy_spec["path"], device=policy_spec.get("device", "auto"),
                                               trust_remote_code=trust, revision=policy_spec["revision"],
                                               key=f"policies.{policy_spec.get('name', '<policy>')}.path")
        answers = pol.generate_answers(model, tokenizer, mine, batch_size=int(bon_cfg["batch_size"]), **gen_kw)
    out = [{"question_id": r["question_id"], "subset": r["subset"], "sample_idx": i, "answer": a}
           for r, outs in zip(mine, answers) for i, a in enumerate(outs)]
    return write_jsonl(out_path, out)


def merge_samples(shard_paths: Sequence[str], out_path: str, n: int | None = None) -> int:
    rows = [r for p in shard_paths for r in read_jsonl(p)]
    rows.sort(key=lambda r: (r["question_id"], int(r["sample_idx"])))
    keys = [(r["question_id"], int(r["sample_idx"])) for r in rows]
    if len(set(keys)) != len(keys):
        raise ValueError("merge_samples: duplicate (question_id, sample_idx) across shards")
    if n is not None:
        per_q: dict[str, int] = defaultdict(int)
        for q, _ in keys:
            per_q[q] += 1
        bad = {q: c for q, c in per_q.items() if c != n}
        if bad:
            raise ValueError(
                f"merge_samples: questions without exactly bon.n={n} samples: {dict(list(bad.items())[:5])}")
    return write_jsonl(out_path, rows)


# ---------------------------------------------------------------------------------------------
# Judging and RM scoring
# ---------------------------------------------------------------------------------------------
def aspects_by_question(judge_key_rows: Sequence[dict]) -> dict[str, list[str]]:
    """question_id -> aspect strings (from the judge-key file)."""
    out: dict[str, list[str]] = {}
    for i, row in enumerate(judge_key_rows):
        asp = row.get("rubric_aspects")
        if not isinstance(asp, list) or not asp:
            raise ValueError(
                f"judge key row {i} (pair {row.get('pair_id')}): field 'rubric_aspects' must be a non-empty list")
        texts = [a["aspect"] if isinstance(a, dict) else str(a) for a in asp]
        out.setdefault(row["question_id"], texts)
    return out


def judge_bon(samples_path: str, prompts_path: str, judge_keys_path: str, judge_cfg: dict, seed: int,
              cache_dir: str, out_path: str, judge=None) -> dict:
    """Judge every unique sample once (cached: reads every shard of cache_dir, writes the shard named
    after out_path); writes question_id, sample_idx, score, ratings, failures, failed (the final
    reply was unparseable: score null under judge.failure exclude, 0.0 under zero)."""
    samples = read_jsonl(samples_path)
    questions = {r["question_id"]: r["question"] for r in read_jsonl(prompts_path)}
    aspects = aspects_by_question(read_jsonl(judge_keys_path))
    items = []
    for r in samples:
        q = r["question_id"]
        if q not in questions:
            raise ValueError(f"{samples_path}: question {q} not in {prompts_path}")
        if q not in aspects:
            raise ValueError(f"{samples_path}: question {q} has no rubric aspects in {judge_keys_path}")
        items.append(JudgeItem(questions[q], r["answer"], aspects[q]))
    judge = judge or load_judge(judge_cfg, seed)
    results = judge_items_cached(judge, items, cache_dir, shard_name(out_path))
    out = [{"question_id": r["question_id"], "sample_idx": r["sample_idx"],
            "score": None if math.isnan(res.score) else res.score, "ratings": res.ratings,
            "failures": res.failures, "failed": bool(res.failed)} for r, res in zip(samples, results)]
    write_jsonl(out_path, out)
    nan = sum(1 for o in out if o["score"] is None)
    report = {"samples": len(out), "unique": len(set(items)), "nan_scores": nan,
              "failed": sum(o["failed"] for o in out), "parse_failures": sum(o["failures"] for o in out)}
    log.info("judged %s", report)
    return report


def score_bon(samples_path: str, prompts_path: str, rm_spec: dict, out_path: str, rm=None) -> dict:
    """Score every sample with one RM; NaN (failure) is written as null and counted. When the RM scores
    its failures with a fallback value (`reward.generative: pointwise`, `ScoreOutput.failed`) every
    row carries `failed` (true = unparseable reply scored with the fallback) and they are counted."""
    samples = read_jsonl(samples_path)
    prompts = {r["question_id"]: r for r in read_jsonl(prompts_path)}
    reqs = []
    for r in samples:
        p = prompts.get(r["question_id"])
        if p is None:
            raise ValueError(f"{samples_path}: question {r['question_id']} not in {prompts_path}")
        reqs.append(ScoreRequest(p["question"], r["answer"], tuple(p["profile"]),
                                 tuple(p.get("profile_categories", ()))))
    if rm is None:
        rm = load_reward_model(rm_spec)
    out = rm.score(reqs)
    scores = np.asarray(out.scores, dtype=float)
    if len(scores) != len(reqs):
        raise ValueError(f"RM {rm_spec.get('name')}: returned {len(scores)} scores for {len(reqs)} samples")
    rows = [{"question_id": r["question_id"], "sample_idx": r["sample_idx"],
             "score": None if np.isnan(s) else float(s)} for r, s in zip(samples, scores)]
    fallback = 0
    if out.failed is not None:  # a rule scored the failures (reward.generative_failure_score): flag each
        failed = np.asarray(out.failed, dtype=bool)
        for row, bad in zip(rows, failed):
            row["failed"] = bool(bad)
        fallback = int((failed & ~np.isnan(scores)).sum())
    write_jsonl(out_path, rows)
    report = {"rm": rm_spec.get("name"), "samples": len(rows), "failures": int(np.isnan(scores).sum()) + fallback,
              "fallback_scored": fallback}
    log.info("scored %s", report)
    return report
