"""The rubric judge: rates each rubric aspect of a question 0/1/2 for an answer; score = mean rating.

Ratings: 0 = aspect not covered, 1 = somewhat covered, 2 = covered very well (the paper's scale).
Backends (config `judge.backend`), built by `load_judge(judge_cfg, seed)`:
  - `transformers` (`judge/llm.py`): an instruct LLM asked for one "Aspect <i>: <0|1|2>" line per
    aspect (the paper's judge; a bare list "[2, 1, 0]" in aspect order, the authors' reply format,
    is parsed too: `judge/base.py`); an unparseable reply is retried (`judge.retries`, seeded
    sampling), then counted and reported with score NaN - never a silent 0;
  - `vllm` (`judge/llm.py`): the same prompt and parser through vLLM (optional, imported only when
    selected);
  - `minilm` (`judge/minilm.py`): an offline judge for the demo: the MiniLM cosine similarity
    between each aspect and the answer's best-matching sentence, mapped to 0/1/2 by two thresholds
    calibrated on the train split (`calibrate_minilm`). The calibration is part of the judge's id,
    so the cache never mixes calibrations.
`judge_items_cached` (`judge/cache.py`) keeps a cache keyed by judge id + question + answer +
aspects, so each unique item is judged once across RMs, k values, policies and reruns: a folder of
append-only JSONL shards, one writer per shard, no locks. The stage functions of rules
calibrate_judge and judge_validity are in `judge/stages.py`.

The judge prompt is built in `judge/llm.py` (not in the RMs' code) on purpose: only the judge may see
the rubric.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..config import entry_with_defaults
from ..models import vllm_engine_kwargs
from .base import JudgeItem, JudgeResult, RubricJudge, parse_ratings
from .cache import DEFAULT_CACHE_DIR, item_key, judge_items_cached, read_cache, shard_name
from .llm import RUBRIC_TEMPLATE, TransformersJudge, VLLMJudge, _LLMJudge, _rubric_hash, rubric_messages  # noqa: F401 (private; tests reach them as prbench.judge._x)
from .minilm import (
    DEFAULT_CALIBRATION,
    MiniLMEncoder,
    MiniLMJudge,
    calibrate_minilm,
    minilm_batch_size,
    split_sentences,
)
from .stages import calibrate_judge_files, calibration_examples, judge_validity


def load_judge(judge_cfg: dict, seed: int) -> RubricJudge:
    """Build the judge from the `judge` config section (plus, for minilm, `calibration`: a dict or
    the path of the JSON written by rule calibrate_judge; default results/bon/judge_calibration.json).

    A validated section is complete; a partial one (tests, direct callers) gets the schema's
    defaults. Keys outside the schema (`calibration`, and `device`, `dtype`, `trust_remote_code`
    for direct callers) keep their defaults here."""
    cfg = entry_with_defaults(judge_cfg, "judge")
    backend = cfg.get("backend")
    model = cfg.get("model")
    if not model:
        raise ValueError("config key judge.model: required")
    common = dict(max_new_tokens=int(cfg["max_new_tokens"]), retries=int(cfg["retries"]),
                  seed=seed, trust_remote_code=bool(cfg.get("trust_remote_code", False)),
                  dtype=cfg.get("dtype", "auto"))
    if backend == "transformers":
        return TransformersJudge(model, batch_size=int(cfg["batch_size"]), device=cfg.get("device", "auto"), **common)
    if backend == "vllm":
        return VLLMJudge(model, engine=vllm_engine_kwargs(cfg), **common)
    if backend == "minilm":
        # the section as given: without a batch_size the encoder keeps its own (MINILM_BATCH_SIZE)
        return MiniLMJudge(model, calibration=_calibration(cfg.get("calibration", DEFAULT_CALIBRATION)),
                           batch_size=minilm_batch_size(judge_cfg))
    raise ValueError(f"config key judge.backend: unknown backend {backend!r} (transformers | vllm | minilm)")


def _calibration(cal: dict | str | Path) -> dict:
    """The minilm calibration: a dict, or the JSON file rule calibrate_judge wrote."""
    if isinstance(cal, (str, Path)):
        if not Path(cal).exists():
            raise FileNotFoundError(f"MiniLM judge calibration {cal} not found: run rule calibrate_judge "
                                    "(or pass judge_cfg['calibration'])")
        cal = json.loads(Path(cal).read_text(encoding="utf-8"))
    return cal


__all__ = [
    "DEFAULT_CACHE_DIR", "DEFAULT_CALIBRATION", "RUBRIC_TEMPLATE",
    "JudgeItem", "JudgeResult", "RubricJudge", "TransformersJudge", "VLLMJudge", "MiniLMEncoder", "MiniLMJudge",
    "load_judge", "parse_ratings", "rubric_messages", "split_sentences", "calibrate_minilm",
    "item_key", "shard_name", "read_cache", "judge_items_cached",
    "calibration_examples", "calibrate_judge_files", "judge_validity",
]
