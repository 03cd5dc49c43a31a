"""The rubric judge: rates each rubric aspect of a question 0/1/2 for an answer; score = mean rating.

Ratings: 0 = aspect not covered, 1 = somewhat covered, 2 = covered very well (the paper's scale).
Backends (config `judge.backend`):
  - `transformers`: an instruct LLM asked for one "Aspect <i>: <0|1|2>" line per aspect (the paper's
    judge; a bare list "[2, 1, 0]" in aspect order, the authors' reply format, is parsed too); an unparseable reply is retried (`judge.retries`, seeded sampling), then counted and
    reported with score NaN - never a silent 0;
  - `vllm`: the same prompt and parser through vLLM (optional, imported only when selected);
  - `minilm`: an offline judge for the demo: the MiniLM cosine similarity between each aspect and
    the answer's best-matching sentence, mapped to 0/1/2 by two thresholds calibrated on the train
    split (aspects with chosen vs rejected answers; `calibrate_minilm`). The calibration is part
    of the judge's id, so the cache never mixes calibrations.
`judge_items_cached` keeps a cache keyed by judge id + question + answer + aspects, so each unique
item is judged once across RMs, k values, policies and reruns. The cache is a folder of append-only
JSONL shards, one per job (named after the job's output, `shard_name`): a job reads every shard
and writes only its own, so no file ever has two writers and no locks are needed (safe on a
cluster's shared filesystem, where sqlite locking is not).

The judge prompt lives here (not in prompts.py) on purpose: only the judge may see the rubric.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from . import prompts as _prompt_templates
from .generation import generation_config, neutralize, vllm_sampling_kwargs
from .models import auto_device, auto_dtype, multi_gpu_kwargs, resolve_model_ref, vllm_engine_kwargs
from .seeding import stable_seed

log = logging.getLogger("prbench.judge")

DEFAULT_CALIBRATION = "results/bon/judge_calibration.json"
DEFAULT_CACHE_DIR = "results/cache/judge"


@dataclass(frozen=True)
class JudgeItem:
    question: str
    answer: str
    aspects: tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "aspects", tuple(self.aspects))
        if not self.aspects:
            raise ValueError("JudgeItem: at least one rubric aspect is required")


@dataclass
class JudgeResult:
    score: float  # mean of the aspect ratings; NaN when unparseable after the retries
    ratings: list = field(default_factory=list)  # int 0/1/2 per aspect, or None when unparseable
    failures: int = 0  # unparseable replies for this item (retries included)


class RubricJudge(ABC):
    judge_id: str

    @abstractmethod
    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        """Judge each item (no caching here)."""


def _result(ratings: Sequence[int | None], failures: int) -> JudgeResult:
    if any(r is None for r in ratings) or not ratings:
        return JudgeResult(float("nan"), [None] * len(ratings), failures)
    return JudgeResult(float(np.mean(ratings)), [int(r) for r in ratings], failures)


# ---------------------------------------------------------------------------------------------
# LLM judges (transformers, vllm): prompt + parser
# ---------------------------------------------------------------------------------------------
# The rubric prompt's wording lives in a template file (prompts.rubric_user, config key
# `prompts.templates`); RUBRIC_TEMPLATE is the bundled default's text, kept for reference.
RUBRIC_TEMPLATE = (_prompt_templates.TEMPLATE_ROOT / "default" / "rubric_user.txt").read_text(encoding="utf-8").rstrip("\n")
_ASPECT_RE = re.compile(r"aspect\s*#?\s*(\d+)\s*[:=\-]\s*\**\s*([0-2])(?![0-9.])", re.IGNORECASE)
# a bracketed list whose items are all numbers: "[2, 1, 0]" (the authors' judge replies with such a
# bare list, in aspect order, sometimes inside a ``` code fence)
_NUM_LIST_RE = re.compile(r"\[\s*(-?\d+(?:\.\d+)?(?:\s*,\s*-?\d+(?:\.\d+)?)*)\s*,?\s*\]")


def rubric_messages(item: JudgeItem) -> list[dict]:
    return _prompt_templates.rubric_messages(item.question, item.answer, item.aspects)


def parse_ratings(text: str, n_aspects: int) -> list[int] | None:
    """One rating per aspect, or None (a parse failure, counted by the caller).

    Accepted replies:
      - "Aspect i: r" lines (the bundled prompt's format), every aspect 1..n rated;
      - a bare list of the n ratings in aspect order, e.g. "[2, 1, 0]", also inside a code fence
        (the reply format of the authors' rubric prompt). Every item must be 0, 1 or 2 and the list
        must have exactly n items; several numeric lists in one reply must agree, else None.
    """
    text = text or ""
    found: dict[int, int] = {}
    for m in _ASPECT_RE.finditer(text):
        i = int(m.group(1))
        if 1 <= i <= n_aspects and i not in found:
            found[i] = int(m.group(2))
    if len(found) == n_aspects:
        return [found[i] for i in range(1, n_aspects + 1)]
    return _parse_rating_list(text, n_aspects)


def _parse_rating_list(text: str, n_aspects: int) -> list[int] | None:
    lists = [[x.strip() for x in m.group(1).split(",")] for m in _NUM_LIST_RE.finditer(text)]
    if not lists or any(items != lists[0] for items in lists):
        return None  # no list, or lists that disagree: ambiguous
    items = lists[0]
    if len(items) != n_aspects or any(x not in ("0", "1", "2") for x in items):
        return None  # wrong length, or a value off the 0/1/2 scale (e.g. 3, 1.5, -1)
    return [int(x) for x in items]


class _LLMJudge(RubricJudge):
    """Shared retry logic: greedy first, then `retries` seeded sampled attempts for failures."""

    retries: int
    seed: int

    @abstractmethod
    def _generate(self, prompts: list[str], attempt: int, seeds: list[int]) -> list[str]:
        ...

    def _prompt(self, item: JudgeItem) -> str:
        from .prompts import render_chat

        return render_chat(self.tokenizer, rubric_messages(item), add_generation_prompt=True)

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        prompts = [self._prompt(it) for it in items]
        ratings: list[list[int] | None] = [None] * len(items)
        failures = [0] * len(items)
        todo = list(range(len(items)))
        for attempt in range(self.retries + 1):
            if not todo:
                break
            seeds = [stable_seed(self.seed, "judge", attempt, items[i].question, items[i].answer) for i in todo]
            outs = self._generate([prompts[i] for i in todo], attempt, seeds)
            still = []
            for i, text in zip(todo, outs):
                r = parse_ratings(text, len(items[i].aspects))
                if r is None:
                    failures[i] += 1
                    still.append(i)
                else:
                    ratings[i] = r
            todo = still
        if todo:
            log.warning("judge %s: %d of %d items unparseable after %d attempts (score NaN)",
                        self.judge_id, len(todo), len(items), self.retries + 1)
        return [_result(ratings[i] if ratings[i] is not None else [None] * len(it.aspects), failures[i])
                for i, it in enumerate(items)]


class TransformersJudge(_LLMJudge):
    def __init__(self, model_ref: str, max_new_tokens: int = 256, batch_size: int = 16, retries: int = 1,
                 seed: int = 0, trust_remote_code: bool = False, use_safetensors: bool = True,
                 device: str = "auto", dtype: str = "auto", model=None, tokenizer=None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = auto_device(device)
        path = resolve_model_ref(model_ref)
        if model is None:
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
            spread = multi_gpu_kwargs(self.device)  # a 32B judge over the job's GPUs (device_map="auto")
            model = AutoModelForCausalLM.from_pretrained(
                path, dtype=auto_dtype(dtype, self.device), trust_remote_code=trust_remote_code,
                use_safetensors=use_safetensors, **spread)
            if not spread:
                model = model.to(self.device)
            else:
                self.device = str(model.get_input_embeddings().weight.device)
        model.eval()
        neutralize(model)  # greedy means greedy: the model's generation_config.json is ignored
        self.model, self.tokenizer = model, tokenizer
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.retries, self.seed = retries, seed
        # the cache key covers the loaded snapshot's revision (hub commit; "local" for a folder) and
        # the weights' dtype (bf16 and fp32 judgements differ)
        revision = getattr(getattr(model, "config", None), "_commit_hash", None) or "local"
        self.judge_id = (f"transformers:{model_ref}@{revision}:{_rubric_hash()}:{max_new_tokens}:{retries}:{seed}"
                         f":{str(next(model.parameters()).dtype).replace('torch.', '')}")

    def _generate(self, prompts, attempt, seeds):
        import torch

        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        texts = [""] * len(prompts)
        for b in range(0, len(order), self.batch_size):
            idx = order[b:b + self.batch_size]
            enc = self.tokenizer([prompts[i] for i in idx], return_tensors="pt", padding=True,
                                 add_special_tokens=False).to(self.device)
            kw = dict(max_new_tokens=self.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
                      eos_token_id=self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id)
            if attempt == 0:
                cfg = generation_config(do_sample=False, **kw)
            else:
                torch.manual_seed(seeds[idx[0]])  # seeded retry, deterministic per batch
                cfg = generation_config(do_sample=True, temperature=0.7, top_p=0.95, **kw)
            with torch.no_grad():
                gen = self.model.generate(**enc, generation_config=cfg)
            dec = self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            for i, t in zip(idx, dec):
                texts[i] = t
        return texts


class VLLMJudge(_LLMJudge):
    def __init__(self, model_ref: str, max_new_tokens: int = 256, retries: int = 1, seed: int = 0,
                 trust_remote_code: bool = False, dtype: str = "auto", engine: dict | None = None, **_):
        try:
            from vllm import LLM
        except ImportError as exc:  # pragma: no cover - optional dependency
            raise ImportError("config key judge.backend: 'vllm' selected but vllm is not installed "
                              "(pip install 'prbench[vllm]')") from exc
        self.llm = LLM(model=resolve_model_ref(model_ref), trust_remote_code=trust_remote_code,
                       dtype=dtype if dtype != "auto" else "auto", seed=seed, **(engine or {}))
        self.tokenizer = self.llm.get_tokenizer()
        self.max_new_tokens, self.retries, self.seed = max_new_tokens, retries, seed
        self.judge_id = f"vllm:{model_ref}:{_rubric_hash()}:{max_new_tokens}:{retries}:{seed}:{dtype}"

    def _generate(self, prompts, attempt, seeds):  # pragma: no cover - needs vllm + GPU
        from vllm import SamplingParams

        if attempt == 0:
            params = [SamplingParams(max_tokens=self.max_new_tokens, **vllm_sampling_kwargs(0.0, 1.0)) for _ in prompts]
        else:
            params = [SamplingParams(max_tokens=self.max_new_tokens, seed=s, **vllm_sampling_kwargs(0.7, 0.95))
                      for s in seeds]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return [o.outputs[0].text for o in outs]


def _rubric_hash() -> str:
    """Hash of the active rubric template (system + user): part of the judge id, so a changed
    prompt never reuses cached ratings."""
    tpl = _prompt_templates.active_templates()
    system = tpl.get("rubric_system")
    text = f"{system}\x00{tpl.get('rubric_user')}" if system else tpl.get("rubric_user")
    return hashlib.sha256(text.encode()).hexdigest()[:8]


# ---------------------------------------------------------------------------------------------
# MiniLM judge (offline demo)
# ---------------------------------------------------------------------------------------------
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def split_sentences(text: str) -> list[str]:
    parts = [p.strip() for p in _SENT_SPLIT.split(text or "")]
    return [p for p in parts if p]


class MiniLMEncoder:
    """Mean-pooled, L2-normalised sentence embeddings from a (MiniLM) encoder folder."""

    def __init__(self, model_ref: str, max_length: int = 128, batch_size: int = 64, device: str = "cpu"):
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = resolve_model_ref(model_ref)
        self.tok = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path, use_safetensors=True).to(device).eval()
        self.device, self.max_length, self.batch_size = device, max_length, batch_size
        self._torch = torch

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        torch = self._torch
        out = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for b in range(0, len(order), self.batch_size):
            idx = order[b:b + self.batch_size]
            enc = self.tok([texts[i] for i in idx], padding=True, truncation=True, max_length=self.max_length,
                           return_tensors="pt").to(self.device)
            with torch.no_grad():
                h = self.model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            e = torch.nn.functional.normalize(e, dim=-1)
            out[idx] = e.float().cpu().numpy()
        return out


class MiniLMJudge(RubricJudge):
    """Rating per aspect = 0/1/2 by thresholds t1 < t2 on max-sentence cosine similarity."""

    def __init__(self, model_ref: str, calibration: dict | None = None, batch_size: int = 64,
                 max_length: int = 128, encoder: MiniLMEncoder | None = None):
        self.model_ref = model_ref
        self.encoder = encoder or MiniLMEncoder(model_ref, max_length=max_length, batch_size=batch_size)
        self.calibration = None
        self.judge_id = f"minilm:{model_ref}:uncalibrated"
        if calibration is not None:
            self.set_calibration(calibration)

    def set_calibration(self, calibration: dict) -> None:
        t1, t2 = float(calibration["t1"]), float(calibration["t2"])
        if not t1 < t2:
            raise ValueError(f"judge calibration: need t1 < t2, got t1={t1}, t2={t2}")
        self.calibration = dict(calibration)
        h = hashlib.sha256(json.dumps([round(t1, 6), round(t2, 6)]).encode()).hexdigest()[:10]
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


# ---------------------------------------------------------------------------------------------
# Loading and caching
# ---------------------------------------------------------------------------------------------
def load_judge(judge_cfg: dict, seed: int) -> RubricJudge:
    """Build the judge from the `judge` config section (plus, for minilm, `calibration`: a dict or
    the path of the JSON written by rule calibrate_judge; default results/bon/judge_calibration.json)."""
    backend = judge_cfg.get("backend")
    model = judge_cfg.get("model")
    if not model:
        raise ValueError("config key judge.model: required")
    common = dict(max_new_tokens=int(judge_cfg.get("max_new_tokens", 256)), retries=int(judge_cfg.get("retries", 1)),
                  seed=seed, trust_remote_code=bool(judge_cfg.get("trust_remote_code", False)),
                  dtype=judge_cfg.get("dtype", "auto"))
    if backend == "transformers":
        return TransformersJudge(model, batch_size=int(judge_cfg.get("batch_size", 16)),
                                 device=judge_cfg.get("device", "auto"), **common)
    if backend == "vllm":
        return VLLMJudge(model, engine=vllm_engine_kwargs(judge_cfg), **common)
    if backend == "minilm":
        cal = judge_cfg.get("calibration", DEFAULT_CALIBRATION)
        if isinstance(cal, (str, Path)):
            if not Path(cal).exists():
                raise FileNotFoundError(f"MiniLM judge calibration {cal} not found: run rule calibrate_judge "
                                        "(or pass judge_cfg['calibration'])")
            cal = json.loads(Path(cal).read_text(encoding="utf-8"))
        return MiniLMJudge(model, calibration=cal, batch_size=int(judge_cfg.get("batch_size", 64)))
    raise ValueError(f"config key judge.backend: unknown backend {backend!r} (transformers | vllm | minilm)")


def item_key(judge_id: str, item: JudgeItem) -> str:
    payload = json.dumps([judge_id, item.question, item.answer, list(item.aspects)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def shard_name(out_path: str | Path) -> str:
    """The cache shard a job writes, named after the job's output path (Snakemake runs at most one
    job per output at a time, so each shard has one writer): results/bon/p/judged.jsonl ->
    results+bon+p+judged.jsonl."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "+", Path(out_path).with_suffix("").as_posix()).strip("+")
    if not name:
        raise ValueError(f"judge cache: cannot name a shard after output {out_path!r}")
    return f"{name}.jsonl"


_RECORD_FIELDS = ("key", "judge_id", "score", "ratings", "failures")


def _parse_record(line: bytes) -> dict | None:
    """One cache record, or None for a line that is not a complete, well-formed record."""
    try:
        rec = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(rec, dict) or any(f not in rec for f in _RECORD_FIELDS):
        return None
    if not isinstance(rec["key"], str) or not isinstance(rec["ratings"], list) or not isinstance(rec["failures"], int):
        return None
    if rec["score"] is not None and not isinstance(rec["score"], (int, float)):
        return None
    return rec


def _read_shard(path: Path, wanted: set[str]) -> tuple[dict[str, dict], int, bool]:
    """Records of `wanted` keys in one shard: ({key: record}, bad complete lines, partial tail?).

    Only complete lines (ending in a newline) are read; a trailing partial line is a record being
    written right now, or the last one of a killed job."""
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    partial = cut < len(data)
    out, bad = {}, 0
    for line in data[:cut].split(b"\n"):
        if not line.strip():
            continue
        rec = _parse_record(line)
        if rec is None:
            bad += 1
        elif rec["key"] in wanted and rec["key"] not in out:
            out[rec["key"]] = rec
    return out, bad, partial


def _recover_own_shard(path: Path) -> None:
    """Before appending: cut a partial last line (left by a killed run of this job) so that the
    next record starts on a line of its own. Only this job writes this shard."""
    if not path.exists():
        return
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    if cut < len(data):
        log.warning("judge cache %s: dropping a partial last record (%d bytes) left by an interrupted run",
                    path, len(data) - cut)
        with open(path, "r+b") as fh:
            fh.truncate(cut)


def _as_result(rec: dict) -> JudgeResult:
    s = rec["score"]
    return JudgeResult(float("nan") if s is None else float(s), list(rec["ratings"]), int(rec["failures"]))


def read_cache(cache_dir: str | Path, keys: set[str]) -> dict[str, JudgeResult]:
    """Every record of `keys` in the shards of `cache_dir` (read-only, no locks).

    Shards are read in name order and the first record of a key wins; keys are content-addressed
    (judge id with model revision and dtype, question, answer, aspects), so shards agree unless
    the judge is not deterministic - such conflicts are counted and logged. Malformed lines and
    partial last lines (a job killed mid-write, or writing now) are skipped and logged."""
    found: dict[str, dict] = {}
    conflicts = 0
    cdir = Path(cache_dir)
    for path in sorted(cdir.glob("*.jsonl")) if cdir.is_dir() else []:
        try:
            recs, bad, partial = _read_shard(path, keys)
        except OSError as exc:
            log.warning("judge cache %s: unreadable (%s), ignored", path, exc)
            continue
        if bad:
            log.warning("judge cache %s: %d malformed line(s) ignored (an interrupted write?)", path, bad)
        if partial:
            log.info("judge cache %s: partial last line ignored (being written, or left by a killed job)", path)
        for k, rec in recs.items():
            if k not in found:
                found[k] = rec
            elif [found[k][f] for f in ("score", "ratings", "failures")] != [rec[f] for f in ("score", "ratings", "failures")]:
                conflicts += 1
    if conflicts:
        log.warning("judge cache %s: %d item(s) judged differently in two shards (a nondeterministic judge?); "
                    "the first shard in name order is used", cdir, conflicts)
    return {k: _as_result(rec) for k, rec in found.items()}


def judge_items_cached(judge: RubricJudge, items: Sequence[JudgeItem], cache_dir: str | Path,
                       shard: str, chunk: int = 2048) -> list[JudgeResult]:
    """Judge items through the sharded cache: each unique (judge, question, answer, aspects) once.

    Reads every shard in `cache_dir` (read-only) and appends what it judges to its own shard
    `cache_dir/shard` only, one flushed and fsynced line per item after each chunk, so concurrent
    jobs never write the same file and a killed job keeps every finished chunk. Unparseable
    results (NaN) are cached too, so reruns are identical; their failure counts are returned every
    time (they stay reported)."""
    if not shard or Path(shard).name != shard or not shard.endswith(".jsonl"):
        raise ValueError(f"judge cache: shard must be a file name ending in .jsonl, got {shard!r}")
    keys = [item_key(judge.judge_id, it) for it in items]
    uniq = list(dict.fromkeys(keys))
    cached = read_cache(cache_dir, set(uniq))
    todo = {}
    for k, it in zip(keys, items):
        if k not in cached and k not in todo:
            todo[k] = it
    log.info("judge %s: %d items, %d unique, %d cached, %d to judge (cache shard %s/%s)", judge.judge_id,
             len(items), len(uniq), len(uniq) - len(todo), len(todo), cache_dir, shard)
    if todo:
        own = Path(cache_dir) / shard
        own.parent.mkdir(parents=True, exist_ok=True)
        _recover_own_shard(own)
        todo_items = list(todo.items())
        with open(own, "ab") as fh:
            for b in range(0, len(todo_items), chunk):
                part = todo_items[b:b + chunk]
                res = judge.judge([it for _, it in part])
                if len(res) != len(part):
                    raise RuntimeError(f"judge {judge.judge_id}: {len(res)} results for {len(part)} items")
                lines = [json.dumps({"key": k, "judge_id": judge.judge_id,
                                     "score": None if math.isnan(r.score) else r.score,
                                     "ratings": r.ratings, "failures": r.failures}, ensure_ascii=False) + "\n"
                         for (k, _), r in zip(part, res)]
                fh.write("".join(lines).encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
                for (k, _), r in zip(part, res):
                    cached[k] = JudgeResult(r.score, list(r.ratings), r.failures)
    return [JudgeResult(cached[k].score, list(cached[k].ratings), cached[k].failures) for k in keys]


# ---------------------------------------------------------------------------------------------
# Stage functions: calibration (minilm) and validity on the test pairs
# ---------------------------------------------------------------------------------------------
def calibration_examples(raw_files: Sequence[str], max_pairs: int | None, seed: int) -> list[dict]:
    """{question, aspects, chosen, rejected} from raw train files in the hub schema; a seeded
    sample of at most max_pairs spread over all files."""
    from .io import iter_jsonl

    ex = []
    for path in raw_files:
        for i, row in enumerate(iter_jsonl(path), 1):
            for key in ("question", "rubric_aspects", "chosen", "rejected"):
                if key not in row:
                    raise ValueError(f"{path}: row {i}: missing field {key!r} (needed to calibrate the judge)")
            asp = [a["aspect"] if isinstance(a, dict) else str(a) for a in row["rubric_aspects"]]
            if asp:
                ex.append({"question": row["question"], "aspects": asp, "chosen": row["chosen"],
                           "rejected": row["rejected"], "id": f"{path}:{row.get('id', i)}"})
    if max_pairs and len(ex) > max_pairs:
        ex.sort(key=lambda e: stable_seed(seed, "calibration", e["id"]))
        ex = ex[:max_pairs]
    return ex


def calibrate_judge_files(raw_files: Sequence[str], judge_cfg: dict, seed: int, out_path: str,
                          max_pairs: int | None = 600) -> dict:
    from .io import write_json

    if judge_cfg.get("backend") != "minilm":
        raise ValueError(f"config key judge.backend: only the minilm judge is calibrated (got {judge_cfg.get('backend')!r})")
    judge = MiniLMJudge(judge_cfg["model"], calibration=None, batch_size=int(judge_cfg.get("batch_size", 64)))
    cal = calibrate_minilm(judge, calibration_examples(raw_files, max_pairs, seed))
    cal["files"] = list(map(str, raw_files))
    write_json(out_path, cal)
    log.info("judge calibration: %s", cal)
    return cal


def judge_validity(bench_path: str, judge_keys_path: str, judge_cfg: dict, seed: int, cache_dir: str,
                   out_path: str, n_boot: int = 1000, judge: RubricJudge | None = None) -> dict:
    """How often the judge scores the chosen answer strictly above the rejected one on the
    personalized test pairs (overall and per subset, bootstrap CI); ties and NaNs count as not above."""
    from .io import read_jsonl, write_json
    from .stats import bootstrap_ci

    pairs = {r["pair_id"]: r for r in read_jsonl(bench_path)}
    keys = read_jsonl(judge_keys_path)
    items_c, items_r, subsets = [], [], []
    for k in keys:
        p = pairs.get(k["pair_id"])
        if p is None:
            raise ValueError(f"{judge_keys_path}: pair {k['pair_id']} not in {bench_path}")
        asp = [a["aspect"] if isinstance(a, dict) else str(a) for a in k["rubric_aspects"]]
        items_c.append(JudgeItem(p["question"], p["chosen"], asp))
        items_r.append(JudgeItem(p["question"], p["rejected"], asp))
        subsets.append(k["subset"])
    if not items_c:
        raise ValueError(f"{judge_keys_path}: no judge keys")
    judge = judge or load_judge(judge_cfg, seed)
    res = judge_items_cached(judge, items_c + items_r, cache_dir, shard_name(out_path))
    n = len(items_c)
    sc = np.array([r.score for r in res[:n]])
    sr = np.array([r.score for r in res[n:]])
    above = (sc > sr).astype(float)  # NaN comparisons are False: failures count as not above
    tie = (sc == sr)
    fail = np.isnan(sc) | np.isnan(sr)

    def summary(mask):
        est, lo, hi = bootstrap_ci(above[mask], n_boot=n_boot, seed=seed)
        return {"n": int(mask.sum()), "chosen_above_rejected": est, "ci_low": lo, "ci_high": hi,
                "ties": int(tie[mask].sum()), "failures": int(fail[mask].sum()),
                "mean_chosen": float(np.nanmean(sc[mask])), "mean_rejected": float(np.nanmean(sr[mask]))}

    sub = np.array(subsets)
    report = {"judge_id": judge.judge_id, "overall": summary(np.ones(n, dtype=bool)),
              "by_subset": {s: summary(sub == s) for s in sorted(set(subsets))},
              "parse_failures": int(sum(r.failures for r in res)), "threshold": 0.9}
    report["passes_threshold"] = bool(report["overall"]["chosen_above_rejected"] >= 0.9)
    write_json(out_path, report)
    log.info("judge validity: %s", report["overall"])
    return report
