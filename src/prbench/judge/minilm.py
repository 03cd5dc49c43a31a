"""The offline demo judge (`judge.backend: minilm`): the MiniLM cosine similarity between each
rubric aspect and the answer's best-matching sentence, mapped to 0/1/2 by two thresholds
calibrated on the train split (aspects with chosen vs rejected answers; `calibrate_minilm`). The
calibration is part of the judge's id, so the cache never mixes calibrations."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from ..encoders import embed_texts
from ..io import json_sha256
from ..models import resolve_model_ref
from ..revisions import hub_kwargs, record_loaded
from .base import JudgeItem, JudgeResult, RubricJudge, _result, log

DEFAULT_CALIBRATION = "results/bon/judge_calibration.json"
# encoder batch size when a judge section has no `batch_size` (tests, direct callers); a
# validated config always has one (the schema's default, 16)
MINILM_BATCH_SIZE = 64
EMBEDDING_MEMO = "embeddings"  # the folder of memoised encoder calls, inside the judge cache
MEMO_IN_PROCESS = 4  # encoder calls an encoder keeps in memory
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def split_sentences(text: str) -> list[str]:
    parts = [p.strip() for p in _SENT_SPLIT.split(text or "")]
    return [p for p in parts if p]


def minilm_batch_size(judge_cfg: dict) -> int:
    return int(judge_cfg.get("batch_size", MINILM_BATCH_SIZE))


class MiniLMEncoder:
    """Mean-pooled, L2-normalised sentence embeddings from a (MiniLM) encoder folder.

    Each `encode` call is memoised whole, keyed by the encoder's settings and the exact list of
    texts (and the weights files' sizes and times): in the process, and, with `memo_dir` set
    (`MiniLMJudge.use_cache_dir`: the judge cache's `embeddings/`), in one `.npy` file per call.
    A call's embeddings depend on its batches (padding, kernel shapes) in the last bits, so only
    the same list, in the same order, is answered from the memo, with the array that call
    computed. It serves the two judges of the demo's mirror world, which encode the same answers'
    sentences, and the general-quality judge's references, which every judging job encodes."""

    def __init__(self, model_ref: str, max_length: int = 128, batch_size: int = 64, device: str = "cpu",
                 revision: str | None = None, memo_dir: str | Path | None = None):
        from transformers import AutoModel, AutoTokenizer

        path = resolve_model_ref(model_ref)
        rev = hub_kwargs(path, "model", revision, key="judge.model")  # judge.revision or the lock's; {} if local
        self.tok = AutoTokenizer.from_pretrained(path, **rev)
        self.model = AutoModel.from_pretrained(path, use_safetensors=True, **rev).to(device).eval()
        record_loaded(path, "model", revision, key="judge.model", loaded=self.model)
        self.device, self.max_length, self.batch_size = device, max_length, batch_size
        self.model_ref, self.revision = model_ref, revision
        local = Path(path)
        self._weights = ([[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in sorted(local.glob("*.safetensors"))]
                         if local.is_dir() else [])
        self.memo_dir = Path(memo_dir) if memo_dir else None
        self._memo: dict[str, np.ndarray] = {}

    def memo_key(self, texts: Sequence[str]) -> str:
        import torch

        return json_sha256([self.model_ref, self.revision, self._weights, str(self.device), self.max_length,
                            self.batch_size, torch.__version__, list(texts)])[:40]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        key = self.memo_key(texts)
        if key in self._memo:
            return self._memo[key]
        path = self.memo_dir / f"{key}.npy" if self.memo_dir else None
        arr = _load_memo(path, (len(texts), self.model.config.hidden_size)) if path else None
        if arr is None:
            arr = embed_texts(self.model, self.tok, texts, batch_size=self.batch_size, max_length=self.max_length,
                              device=self.device, pooling="mean", normalize=True)
            if path:
                _save_memo(path, arr)
        arr.setflags(write=False)
        while len(self._memo) >= MEMO_IN_PROCESS:  # the latest few calls: a long job's chunks are not all kept
            self._memo.pop(next(iter(self._memo)))
        self._memo[key] = arr
        return arr


def _load_memo(path: Path, shape: tuple[int, int]) -> np.ndarray | None:
    """A memoised call's embeddings, or None (absent; unreadable or of another shape: recomputed)."""
    if not path.exists():
        return None
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        log.warning("embedding memo %s: unreadable (%s), recomputed", path, exc)
        return None
    if arr.shape != shape or arr.dtype != np.float32:
        log.warning("embedding memo %s: shape %s %s, expected %s float32; recomputed", path, arr.shape, arr.dtype,
                    shape)
        return None
    return arr


def _save_memo(path: Path, arr: np.ndarray) -> None:
    """Written to a temporary file and renamed: a reader sees the whole file or none. Not
    `prbench.io._atomic_write`: that one assumes one writer per path and removes other temporary
    files of it, while jobs side by side may write one memo file (the same references) at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, arr, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class MiniLMJudge(RubricJudge):
    """Rating per aspect = 0/1/2 by thresholds t1 < t2 on max-sentence cosine similarity."""

    ID_PREFIX = "minilm"  # the judge id's first part (the general-quality judge: its own)

    def __init__(self, model_ref: str, calibration: dict | None = None, batch_size: int = 64,
                 max_length: int = 128, encoder: MiniLMEncoder | None = None, revision: str | None = None):
        self.model_ref = model_ref
        self.encoder = encoder or MiniLMEncoder(model_ref, max_length=max_length, batch_size=batch_size,
                                                revision=revision)
        self.calibration = None
        self.judge_id = f"{self.ID_PREFIX}:{model_ref}:uncalibrated"
        if calibration is not None:
            self.set_calibration(calibration)

    def set_calibration(self, calibration: dict) -> None:
        if calibration.get("kind") not in (None, "rubric"):  # a calibration file, not a config key
            raise ValueError(f"judge calibration: a {calibration['kind']!r} calibration, not the rubric judge's "
                             "(judge.general_reference changed? rerun rule calibrate_judge)")
        t1, t2 = float(calibration["t1"]), float(calibration["t2"])
        if not t1 < t2:
            raise ValueError(f"judge calibration: need t1 < t2, got t1={t1}, t2={t2}")
        self.calibration = dict(calibration)
        # json.dumps' defaults (ensure_ascii, unsorted): the hash in every existing judge id
        h = json_sha256([round(t1, 6), round(t2, 6)], sort_keys=False, ensure_ascii=True, default=None)[:10]
        self.judge_id = f"minilm:{self.model_ref}:{h}"

    def similarities(self, items: Sequence[JudgeItem]) -> list[np.ndarray]:
        """Per item: for each aspect, the max cosine over the answer's sentences (4 decimals)."""
        aspects = sorted({a for it in items for a in it.aspects})
        sents_per = [split_sentences(it.answer) or [it.answer or " "] for it in items]
        sents = sorted({s for ss in sents_per for s in ss})
        a_idx = {a: i for i, a in enumerate(aspects)}
        s_idx = {s: i for i, s in enumerate(sents)}
        A = self.encoder.encode(aspects) if aspects else np.zeros((0, 1))
        S = self.encoder.encode(sents) if sents else np.zeros((0, 1))
        out = []
        for it, ss in zip(items, sents_per):
            sim = A[[a_idx[a] for a in it.aspects]] @ S[[s_idx[s] for s in ss]].T
            out.append(np.round(sim.max(axis=1).astype(float), 4))
        return out

    def use_cache_dir(self, cache_dir: str | Path) -> None:
        """Memoise the encoder's calls in the judge cache's `embeddings/` folder (MiniLMEncoder)."""
        if isinstance(self.encoder, MiniLMEncoder):
            self.encoder.memo_dir = Path(cache_dir) / EMBEDDING_MEMO

    def rate(self, sims: np.ndarray) -> list[int]:
        t1, t2 = self.calibration["t1"], self.calibration["t2"]
        return [0 if s < t1 else (1 if s < t2 else 2) for s in sims]

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        if self.calibration is None:
            raise RuntimeError("MiniLM judge is not calibrated: run calibrate_minilm (rule calibrate_judge) "
                               f"and pass judge_cfg['calibration'] (default {DEFAULT_CALIBRATION})")
        return [_result(self.rate(s), 0) for s in self.similarities(items)]


def _youden_threshold(pos: np.ndarray, neg: np.ndarray) -> float:
    """Threshold t maximising TPR - FPR for the rule sim >= t (midpoint between adjacent values)."""
    vals = np.unique(np.concatenate([pos, neg]))
    cands = np.concatenate([[vals[0] - 1e-4], (vals[:-1] + vals[1:]) / 2, [vals[-1] + 1e-4]])
    ps, ns = np.sort(pos), np.sort(neg)
    tpr = 1 - np.searchsorted(ps, cands, side="left") / len(ps)
    fpr = 1 - np.searchsorted(ns, cands, side="left") / len(ns)
    j = tpr - fpr
    return float(cands[int(np.argmax(j))])


def calibrate_minilm(judge: MiniLMJudge, examples: Sequence[dict]) -> dict:
    """Calibrate t1 < t2 on train examples {question, aspects, chosen, rejected}.

    Per aspect, the similarity with the chosen (personalized) answer is a positive, with the
    rejected answer a negative. t1 = the Youden-optimal threshold between them (below: 0, not
    covered); t2 = the median positive similarity above t1 (at or above: 2, covered very well)."""
    if not examples:
        raise ValueError("calibrate_minilm: no calibration examples (demo train pairs with rubric aspects)")
    items_c = [JudgeItem(e["question"], e["chosen"], e["aspects"]) for e in examples]
    items_r = [JudgeItem(e["question"], e["rejected"], e["aspects"]) for e in examples]
    sims = judge.similarities(items_c + items_r)
    pos = np.concatenate(sims[:len(examples)])
    neg = np.concatenate(sims[len(examples):])
    t1 = _youden_threshold(pos, neg)
    above = pos[pos >= t1]
    t2 = float(np.median(above)) if len(above) else t1 + 0.05
    if t2 <= t1:
        t2 = t1 + 1e-3
    cal = {"t1": round(t1, 6), "t2": round(t2, 6), "n_examples": len(examples), "n_aspects": int(len(pos)),
           "pos_mean": float(pos.mean()), "neg_mean": float(neg.mean()),
           "aspect_tpr": float((pos >= t1).mean()), "aspect_fpr": float((neg >= t1).mean())}
    judge.set_calibration(cal)
    # pair-level agreement on the calibration data itself (reported, not optimised)
    scores = np.array([np.mean(judge.rate(s)) for s in sims])  # same ratings judge() would give
    sc, sr = scores[:len(examples)], scores[len(examples):]
    cal["train_chosen_above_rejected"] = float((sc > sr).mean())
    cal["judge_id"] = judge.judge_id
    return cal
