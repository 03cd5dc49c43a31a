"""The general-quality judge of the demo's mirror world (`judge.general_reference: <baseline>`, minilm
backend only): it rates how an answer's content compares with what a general-quality baseline
prefers, not the user's rubric aspects, so the same samples can be judged both ways.

References: the sentences of the baseline's train pairs (RewardBench schema), from one half of the
pairs (a seeded split): `good` = the sentences of chosen answers, `bad` = sentences of rejected
answers that no chosen answer contains and that no good sentence paraphrases (cosine below
`PARAPHRASE_COS`; an off-topic answer's sound tips are not bad advice). The answer's quality
q = max over its sentences of the cosine to a good reference - the same to a bad reference. Two
thresholds t1 < t2, calibrated on the other half of the pairs (chosen vs rejected, the Youden point
and the median chosen q above it, as the rubric judge's calibration), map q to one 0/1/2 rating:
the item's score. The references and thresholds are one JSON (rule calibrate_judge) and part of
the judge's id, so the cache never mixes them with the rubric judge's ratings."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..io import iter_jsonl, json_sha256
from ..seeding import stable_seed
from .base import JudgeItem, JudgeResult, _result
from .minilm import MiniLMJudge, _youden_threshold, split_sentences

PARAPHRASE_COS = 0.9
GENERAL_ASPECT = "general quality (the answer's content against the general baseline's preferred answers)"


def reference_pairs(raw_files: Sequence[str]) -> list[dict]:
    """{id, chosen, rejected} of the baseline's train files (RewardBench schema), in file order. The id
    is the file's position in the list and the row's own id (its line number without one), never the
    path: the seeded split must not change with the directory the files sit in."""
    rows = []
    for k, path in enumerate(raw_files):
        for i, row in enumerate(iter_jsonl(path), 1):
            for key in ("chosen", "rejected"):
                if not isinstance(row.get(key), str):
                    raise ValueError(f"{path}: row {i}: field {key!r} missing or not text "
                                     "(needed to calibrate the general-quality judge)")
            rows.append({"id": f"{k}:{row.get('id', i)}", "chosen": row["chosen"], "rejected": row["rejected"]})
    if len(rows) < 4:
        raise ValueError(f"{list(raw_files)}: {len(rows)} train pairs; the general-quality judge needs at least 4")
    return rows


class ReferenceJudge(MiniLMJudge):
    """One 0/1/2 rating per item from q = best cosine to a good reference - best cosine to a bad one
    (the rubric judge's encoder, constructor and thresholds-to-rating `rate`; its own calibration, id prefix
    and the quantity rated, q)."""

    ID_PREFIX = "minilm-general"

    def set_calibration(self, calibration: dict) -> None:
        if calibration.get("kind") != "general":
            raise ValueError("general judge calibration: not a general-quality calibration (kind "
                             f"{calibration.get('kind')!r}); rerun rule calibrate_judge")
        t1, t2 = float(calibration["t1"]), float(calibration["t2"])
        if not t1 < t2:
            raise ValueError(f"general judge calibration: need t1 < t2, got t1={t1}, t2={t2}")
        good, bad = list(calibration["good"]), list(calibration["bad"])
        if not good or not bad:
            raise ValueError("general judge calibration: empty good or bad reference list")
        self.calibration = dict(calibration)
        self._refs = None
        h = json_sha256([round(t1, 6), round(t2, 6), good, bad], sort_keys=False, ensure_ascii=True,
                        default=None)[:10]
        self.judge_id = f"minilm-general:{self.model_ref}:{h}"

    def _reference_embeddings(self) -> tuple[np.ndarray, np.ndarray]:
        if self._refs is None:
            self._refs = (self.encoder.encode(self.calibration["good"]), self.encoder.encode(self.calibration["bad"]))
        return self._refs

    def quality(self, answers: Sequence[str], good: np.ndarray | None = None,
                bad: np.ndarray | None = None) -> np.ndarray:
        """q per answer (4 decimals): best cosine of its sentences to good minus to bad references."""
        if good is None:
            good, bad = self._reference_embeddings()
        sents_per = [split_sentences(a) or [a or " "] for a in answers]
        sents = sorted({s for ss in sents_per for s in ss})
        idx = {s: i for i, s in enumerate(sents)}
        S = self.encoder.encode(sents)
        best_good, best_bad = (S @ good.T).max(axis=1), (S @ bad.T).max(axis=1)
        out = [best_good[[idx[s] for s in ss]].max() - best_bad[[idx[s] for s in ss]].max() for ss in sents_per]
        return np.round(np.asarray(out, dtype=float), 4)

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        """One rating per item: its q through the rubric judge's `rate` (t1, t2 of this calibration)."""
        if self.calibration is None:
            raise RuntimeError("general-quality judge is not calibrated: run rule calibrate_judge")
        return [_result([r], 0) for r in self.rate(self.quality([it.answer for it in items]))]


def _references(judge: ReferenceJudge, pairs: Sequence[dict]) -> dict:
    good = sorted({s for p in pairs for s in split_sentences(p["chosen"])})
    bad = sorted({s for p in pairs for s in split_sentences(p["rejected"])} - set(good))
    if not good or not bad:
        raise ValueError("general judge calibration: the reference pairs give no good or no bad sentence")
    G, B = judge.encoder.encode(good), judge.encoder.encode(bad)
    keep = (B @ G.T).max(axis=1) < PARAPHRASE_COS
    bad = [s for s, k in zip(bad, keep) if k]
    if not bad:
        raise ValueError(f"general judge calibration: every rejected sentence paraphrases a chosen one "
                         f"(cosine >= {PARAPHRASE_COS})")
    return {"good": good, "bad": bad}


def calibrate_reference(judge: ReferenceJudge, pairs: Sequence[dict], seed: int) -> dict:
    """References from one seeded half of the pairs, thresholds from the other half."""
    order = sorted(pairs, key=lambda p: stable_seed(seed, "general-judge", p["id"]))
    half = len(order) // 2
    ref_pairs, cal_pairs = order[:half], order[half:]
    refs = _references(judge, ref_pairs)
    G, B = judge.encoder.encode(refs["good"]), judge.encoder.encode(refs["bad"])
    qc = judge.quality([p["chosen"] for p in cal_pairs], G, B)
    qr = judge.quality([p["rejected"] for p in cal_pairs], G, B)
    t1 = _youden_threshold(qc, qr)
    above = qc[qc >= t1]
    t2 = float(np.median(above)) if len(above) else t1 + 0.05
    if t2 <= t1:
        t2 = t1 + 1e-3
    cal = {"kind": "general", "t1": round(t1, 6), "t2": round(t2, 6), **refs,
           "n_reference_pairs": len(ref_pairs), "n_calibration_pairs": len(cal_pairs),
           "chosen_mean_q": float(qc.mean()), "rejected_mean_q": float(qr.mean())}
    judge.set_calibration(cal)
    judge._refs = (G, B)
    rc, rr = np.array(judge.rate(qc)), np.array(judge.rate(qr))
    cal["calibration_chosen_above_rejected"] = float((rc > rr).mean())
    cal["judge_id"] = judge.judge_id
    return cal
