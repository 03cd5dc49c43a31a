"""`load_judge`: the rubric judge a `judge` config section names (transformers, vLLM or minilm)."""
from __future__ import annotations

import json
from pathlib import Path

from ..config import entry_with_defaults
from ..models import vllm_engine_kwargs
from .base import RubricJudge
from .llm import TransformersJudge, VLLMJudge
from .minilm import DEFAULT_CALIBRATION, MiniLMJudge, minilm_batch_size
from .reference import ReferenceJudge


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
                  dtype=cfg.get("dtype", "auto"), system_turn=bool(cfg["system_turn"]),
                  aspect_format=str(cfg["aspect_format"]), aggregate=str(cfg["aggregate"]), failure=str(cfg["failure"]),
                  revision=cfg["revision"])
    if backend == "transformers":
        return TransformersJudge(model, batch_size=int(cfg["batch_size"]), device=cfg.get("device", "auto"), **common)
    if backend == "vllm":
        return VLLMJudge(model, engine=vllm_engine_kwargs(cfg), **common)
    if backend == "minilm" and cfg.get("general_reference"):
        return ReferenceJudge(model, calibration=_calibration(cfg.get("calibration", DEFAULT_CALIBRATION)),
                              batch_size=minilm_batch_size(judge_cfg), revision=cfg["revision"])
    if backend == "minilm":
        # the section as given: without a batch_size the encoder keeps its own (MINILM_BATCH_SIZE)
        return MiniLMJudge(model, calibration=_calibration(cfg.get("calibration", DEFAULT_CALIBRATION)),
                           batch_size=minilm_batch_size(judge_cfg), revision=cfg["revision"])
    raise ValueError(f"config key judge.backend: unknown backend {backend!r} (transformers | vllm | minilm)")


def _calibration(cal: dict | str | Path) -> dict:
    """The minilm calibration: a dict, or the JSON file rule calibrate_judge wrote."""
    if isinstance(cal, (str, Path)):
        if not Path(cal).exists():
            raise FileNotFoundError(f"MiniLM judge calibration {cal} not found: run rule calibrate_judge "
                                    "(or pass judge_cfg['calibration'])")
        cal = json.loads(Path(cal).read_text(encoding="utf-8"))
    return cal
