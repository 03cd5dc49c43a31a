"""The rubric judge: rates each rubric aspect of a question 0/1/2 for an answer; score = mean rating.

Ratings: 0 = aspect not covered, 1 = somewhat covered, 2 = covered very well (the paper's scale).
Backends (config `judge.backend`), built by `load_judge(judge_cfg, seed)`:
  - `transformers` (`judge/llm.py`): an instruct LLM asked for one "Aspect <i>: <0|1|2>" line per
    aspect (the paper's judge; a bare list "[2, 1, 0]" in aspect order, the authors' reply format,
    is parsed too: `judge/base.py`); an unparseable reply is retried (`judge.retries`, seeded
    sampling), then scored by `judge.failure` (NaN = left out, or the authors' 0.0) and counted
    either way (`JudgeResult.failed`). `judge.system_turn`, `judge.aspect_format` and
    `judge.aggregate` (per-aspect ratings, or the authors' mean of the numbers found) select the
    authors' judge protocol or the project's (docs/PROTOCOL.md);
  - `vllm` (`judge/llm.py`): the same prompt and parser through vLLM (optional, imported only when
    selected);
  - `minilm` (`judge/minilm.py`): an offline judge for the demo: the MiniLM cosine similarity
    between each aspect and the answer's best-matching sentence, mapped to 0/1/2 by two thresholds
    calibrated on the train split (`calibrate_minilm`). The calibration is part of the judge's id,
    so the cache never mixes calibrations. With `judge.general_reference: <baseline>` (the demo's
    mirror world, `judge/reference.py`) it rates each answer's general quality instead: one 0/1/2
    rating from the answer's best match among the baseline's preferred vs dispreferred train
    sentences (`ReferenceJudge`, `calibrate_reference`), its references and thresholds in its id.
`judge_items_cached` (`judge/cache.py`) keeps a cache keyed by judge id + question + answer +
aspects, so each unique item is judged once across RMs, k values, policies and reruns: a folder of
append-only JSONL shards, one writer per shard, no locks. The stage functions of rules
calibrate_judge and judge_validity are in `judge/stages.py`.

The judge prompt is built in `judge/llm.py` (not in the RMs' code) on purpose: only the judge may see
the rubric.
"""
from __future__ import annotations

from .base import JudgeItem, JudgeResult, RubricJudge, parse_ratings
from .cache import DEFAULT_CACHE_DIR, item_key, judge_items_cached, read_cache, shard_name
from .llm import RUBRIC_TEMPLATE, TransformersJudge, VLLMJudge, _LLMJudge, _rubric_hash, rubric_messages  # noqa: F401 (private; tests reach them as prbench.judge._x)
from .loader import load_judge
from .minilm import (
    DEFAULT_CALIBRATION,
    MiniLMEncoder,
    MiniLMJudge,
    calibrate_minilm,
    minilm_batch_size,
    split_sentences,
)
from .reference import ReferenceJudge, calibrate_reference, reference_pairs
from .stages import calibrate_judge_files, calibration_examples, judge_validity

__all__ = [
    "DEFAULT_CACHE_DIR", "DEFAULT_CALIBRATION", "RUBRIC_TEMPLATE",
    "JudgeItem", "JudgeResult", "RubricJudge", "TransformersJudge", "VLLMJudge", "MiniLMEncoder", "MiniLMJudge",
    "load_judge", "parse_ratings", "rubric_messages", "split_sentences", "calibrate_minilm", "minilm_batch_size",
    "item_key", "shard_name", "read_cache", "judge_items_cached",
    "calibration_examples", "calibrate_judge_files", "judge_validity",
    "ReferenceJudge", "calibrate_reference", "reference_pairs",
]
