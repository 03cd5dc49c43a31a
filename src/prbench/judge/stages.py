"""Stage functions of the judge: calibration of the minilm judge on a train split (rule
calibrate_judge: the personalized one, or with judge.general_reference that baseline's) and the
judge's validity on the personalized test pairs (rule judge_validity)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..io import iter_jsonl, read_jsonl, write_json
from ..seeding import stable_seed
from ..stats import bootstrap_ci
from .base import JudgeItem, RubricJudge, log
from .cache import judge_items_cached, shard_name
from .loader import load_judge
from .minilm import MiniLMJudge, calibrate_minilm, minilm_batch_size
from .reference import ReferenceJudge, calibrate_reference, reference_pairs


def calibration_examples(raw_files: Sequence[str], max_pairs: int | None, seed: int) -> list[dict]:
    """{question, aspects, chosen, rejected} from raw train files in the hub schema; a seeded
    sample of at most max_pairs spread over all files."""
    ex = []
    for path in raw_files:
        for i, row in enumerate(iter_jsonl(path), 1):
            for key in ("question", "rubric_aspects", "chosen", "rejected"):
                if key not in row:
                    raise ValueError(f"{path}: row {i}: missing field {key!r} (needed to calibrate the judge)")
            asp = _aspect_texts(row["rubric_aspects"])
            if asp:
                ex.append({"question": row["question"], "aspects": asp, "chosen": row["chosen"],
                           "rejected": row["rejected"], "id": f"{path}:{row.get('id', i)}"})
    if max_pairs and len(ex) > max_pairs:
        ex.sort(key=lambda e: stable_seed(seed, "calibration", e["id"]))
        ex = ex[:max_pairs]
    return ex


def _aspect_texts(rubric_aspects: Sequence) -> list[str]:
    """Aspect strings from rubric_aspects entries ({aspect, evidence, reason} dicts or strings)."""
    return [a["aspect"] if isinstance(a, dict) else str(a) for a in rubric_aspects]


def calibrate_judge_files(raw_files: Sequence[str], judge_cfg: dict, seed: int, out_path: str,
                          max_pairs: int | None = 600) -> dict:
    if judge_cfg.get("backend") != "minilm":
        raise ValueError(
            f"config key judge.backend: only the minilm judge is calibrated (got {judge_cfg.get('backend')!r})")
    if judge_cfg.get("general_reference"):  # the mirror world's general-quality judge: every train pair
        ref = ReferenceJudge(judge_cfg["model"], calibration=None, batch_size=minilm_batch_size(judge_cfg))
        cal = calibrate_reference(ref, reference_pairs(raw_files), seed)
    else:
        judge = MiniLMJudge(judge_cfg["model"], calibration=None, batch_size=minilm_batch_size(judge_cfg))
        cal = calibrate_minilm(judge, calibration_examples(raw_files, max_pairs, seed))
    cal["files"] = list(map(str, raw_files))
    write_json(out_path, cal)
    log.info("judge calibration: %s", cal)
    return cal


def _validity_items(bench_path: str, judge_keys_path: str) -> tuple[list[JudgeItem], list[JudgeItem], list[str]]:
    """(chosen items, rejected items, subsets), one per judge key, in the judge keys' order."""
    pairs = {r["pair_id"]: r for r in read_jsonl(bench_path)}
    items_c, items_r, subsets = [], [], []
    for k in read_jsonl(judge_keys_path):
        p = pairs.get(k["pair_id"])
        if p is None:
            raise ValueError(f"{judge_keys_path}: pair {k['pair_id']} not in {bench_path}")
        asp = _aspect_texts(k["rubric_aspects"])
        items_c.append(JudgeItem(p["question"], p["chosen"], asp))
        items_r.append(JudgeItem(p["question"], p["rejected"], asp))
        subsets.append(k["subset"])
    if not items_c:
        raise ValueError(f"{judge_keys_path}: no judge keys")
    return items_c, items_r, subsets


def _validity_summary(sc: np.ndarray, sr: np.ndarray, mask: np.ndarray, n_boot: int, seed: int) -> dict:
    """Chosen-above-rejected rate of the pairs in `mask` (bootstrap CI), ties, failures, means."""
    above = (sc > sr).astype(float)  # NaN comparisons are False: failures count as not above
    tie = (sc == sr)
    fail = np.isnan(sc) | np.isnan(sr)
    est, lo, hi = bootstrap_ci(above[mask], n_boot=n_boot, seed=seed)
    return {"n": int(mask.sum()), "chosen_above_rejected": est, "ci_low": lo, "ci_high": hi,
            "ties": int(tie[mask].sum()), "failures": int(fail[mask].sum()),
            "mean_chosen": float(np.nanmean(sc[mask])), "mean_rejected": float(np.nanmean(sr[mask]))}


def judge_validity(bench_path: str, judge_keys_path: str, judge_cfg: dict, seed: int, cache_dir: str,
                   out_path: str, n_boot: int = 1000, judge: RubricJudge | None = None) -> dict:
    """How often the judge scores the chosen answer strictly above the rejected one on the
    personalized test pairs (overall and per subset, bootstrap CI); ties and NaNs count as not above."""
    items_c, items_r, subsets = _validity_items(bench_path, judge_keys_path)
    judge = judge or load_judge(judge_cfg, seed)
    res = judge_items_cached(judge, items_c + items_r, cache_dir, shard_name(out_path))
    n = len(items_c)
    sc = np.array([r.score for r in res[:n]])
    sr = np.array([r.score for r in res[n:]])
    sub = np.array(subsets)
    report = {"judge_id": judge.judge_id, "overall": _validity_summary(sc, sr, np.ones(n, dtype=bool), n_boot, seed),
              "by_subset": {s: _validity_summary(sc, sr, sub == s, n_boot, seed) for s in sorted(set(subsets))},
              "parse_failures": int(sum(r.failures for r in res)), "judge_failed": int(sum(r.failed for r in res)),
              "threshold": 0.9}
    report["passes_threshold"] = bool(report["overall"]["chosen_above_rejected"] >= 0.9)
    write_json(out_path, report)
    log.info("judge validity: %s", report["overall"])
    return report
