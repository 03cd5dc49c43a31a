"""GRPO downstream stage (a project extension: the paper has no GRPO): one policy per reward model
trained with trl's maintained `trl.GRPOTrainer`, evaluated exactly like PPO.

- Reward: the RM behind the same `prbench.reward_adapter.RewardAdapter` as PPO (RM score x
  `reward_scale`, NaN -> `nan_reward`, failures counted); the reward function receives each
  completion's prompt row (dataset column `row_index`), so no text is re-parsed.
- Prompts: `results/data/prompts/train.jsonl` (PPO's training split), rendered with the policy's
  chat template exactly as PPO renders them (`reward_adapter.render_policy_prompt`), capped like
  PPO (`max_prompt_tokens`, lowest-ranked profile posts first).
- A pairwise RM compares each completion with the base policy's greedy answer (as in PPO).
- Generation: every setting explicit (temperature, top_p, top_k, repetition_penalty from
  `grpo:`; every other sampling field neutral through `generation_kwargs`) and the policy's own
  generation_config stripped to its token ids (`prbench.generation.neutralize`).
- Layout of config `grpo:` on trl: each optimizer step samples `num_generations` completions for
  each of `prompts_per_step` prompts (generation batch = prompts_per_step x num_generations,
  `per_device_batch_size` completions per forward/backward, the rest gradient accumulation);
  `steps` optimizer steps (null = one pass over the training prompts); `num_iterations` passes
  over each generation batch. Seeded: trl's sampler, the torch generator and the data order all
  derive from `config seed`, so the same run twice gives the same log and weights (CPU).
- Evaluation: rule `eval_ppo` (method `grpo`): same eval questions and settings (`ppo.eval_*`),
  base answers, cached judge and win rate against the base policy as PPO.
"""
from __future__ import annotations

import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from .config import entry_with_defaults
from .generation import neutral_fields, neutralize
from .io import write_csv
from .models import save_pretrained_atomic
from .policy import load_policy_model
from .policy_prompts import base_reference_answers, cap_prompt_rows, load_prompt_rows
from .ppo import load_rm
from .prompts import ScoreRequest
from .reward_adapter import PromptIndex, RewardAdapter, render_policy_prompt
from .seeding import seed_everything, stable_seed

log = logging.getLogger("prbench.grpo")

TRAIN_KEYS = ("lr", "beta", "num_generations", "prompts_per_step", "steps", "num_iterations", "epsilon",
              "loss_type", "scale_rewards", "max_completion_length", "temperature", "top_p", "top_k",
              "repetition_penalty", "reward_scale", "nan_reward", "per_device_batch_size",
              "gradient_checkpointing", "max_prompt_tokens")
# trl log keys that measure wall-clock time: not reproducible, kept out of the training log
_VOLATILE = ("time", "per_second", "flos")


def resolve_settings(cfg: dict, n_prompts: int) -> dict:
    """Validated GRPO settings with the per-step layout resolved (errors name the config key)."""
    cfg = entry_with_defaults(cfg, "grpo")  # the job's picked keys; the schema fills the rest
    s = {k: cfg[k] for k in TRAIN_KEYS}
    for k in ("num_generations", "prompts_per_step", "num_iterations", "max_completion_length"):
        if not isinstance(s[k], int) or s[k] < 1:
            raise ValueError(f"config key grpo.{k}: must be a positive integer, got {s[k]!r}")
    if s["num_generations"] < 2:
        raise ValueError("config key grpo.num_generations: GRPO needs at least 2 completions per prompt")
    if s["prompts_per_step"] > n_prompts:
        raise ValueError(f"config key grpo.prompts_per_step: {s['prompts_per_step']} is larger than the "
                         f"{n_prompts} training prompts")
    s["generation_batch"] = s["prompts_per_step"] * s["num_generations"]
    s["micro_batch_size"] = s["per_device_batch_size"] or s["generation_batch"]
    if s["generation_batch"] % s["micro_batch_size"]:
        raise ValueError(f"config key grpo.per_device_batch_size: {s['micro_batch_size']} does not divide "
                         f"prompts_per_step x num_generations = {s['generation_batch']}")
    s["gradient_accumulation"] = s["generation_batch"] // s["micro_batch_size"]
    s["total_steps"] = int(s["steps"] or math.ceil(n_prompts / s["prompts_per_step"]))
    return s


class RewardFunction:
    """trl reward function: each completion of prompt row i scored by the RM through RewardAdapter."""

    def __init__(self, adapter: RewardAdapter, rows: Sequence[dict]):
        self.adapter, self.rows = adapter, list(rows)
        self.__name__ = "rm"  # trl names the reward metric after the function

    def __call__(self, prompts, completions, row_index, **_kw) -> list[float]:
        requests = []
        for i, text in zip(row_index, completions):
            row = self.rows[int(i)]
            requests.append(ScoreRequest(question=row["question"], answer=str(text).strip(),
                                         profile=tuple(row.get("profile", [])),
                                         categories=tuple(row.get("profile_categories", ()))))
        return [float(x) for x in self.adapter.score_requests(requests)]


def _log_row(logs: dict, step: int, stats) -> dict:
    raw = np.asarray(stats.raw, dtype=float)
    row: dict[str, Any] = {"step": step, "reward": logs.get("reward"), "kl": logs.get("kl", float("nan")),
                           "entropy": logs.get("entropy"),
                           "reward_raw_mean": float(raw.mean()) if raw.size else float("nan"),
                           "reward_failures": int(stats.failures), "reward_scored": int(stats.scored)}
    for k, v in logs.items():
        name = k.replace("/", "_")
        if name not in row and isinstance(v, (int, float)) and not any(t in k for t in _VOLATILE):
            row[name] = v
    return row


def _callback(rows_log: list, adapter: RewardAdapter):
    from transformers import TrainerCallback

    class StepLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                rows_log.append(_log_row(logs, state.global_step, adapter.stats.reset()))
            return control

    return StepLog()


def _config(s: dict, out_dir: Path, seed: int):
    from trl import GRPOConfig

    cuda = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(out_dir / "trl"), seed=seed, data_seed=seed, learning_rate=s["lr"], beta=s["beta"],
        num_generations=s["num_generations"], per_device_train_batch_size=s["micro_batch_size"],
        gradient_accumulation_steps=s["gradient_accumulation"], num_iterations=s["num_iterations"],
        epsilon=s["epsilon"], loss_type=s["loss_type"], scale_rewards=s["scale_rewards"],
        max_steps=s["total_steps"], max_completion_length=s["max_completion_length"],
        temperature=s["temperature"], top_p=s["top_p"], top_k=s["top_k"],
        repetition_penalty=s["repetition_penalty"], min_p=None, generation_kwargs=neutral_fields(),
        lr_scheduler_type="linear", warmup_steps=0, weight_decay=0.0, save_strategy="no", logging_steps=1,
        report_to=[], disable_tqdm=True, bf16=cuda, use_cpu=not cuda, dataloader_num_workers=0,
        gradient_checkpointing=s["gradient_checkpointing"], remove_unused_columns=False, log_completions=False,
        shuffle_dataset=True,
    )


def _build(policy_path, rm, rows, s, seed, out_dir, trust_remote_code, device):
    """(trainer, tokenizer, adapter, log rows, prompt-cap counts) of one run."""
    from datasets import Dataset
    from trl import GRPOTrainer

    seed_everything(seed)
    policy, tok = load_policy_model(policy_path, trust_remote_code, device, "float32")
    if tok.pad_token_id is None or tok.eos_token_id is None:
        raise ValueError(f"policy {policy_path}: tokenizer needs a pad and an eos token")
    neutralize(policy)
    policy.generation_config.pad_token_id = tok.pad_token_id
    rows, cap = cap_prompt_rows(rows, tok, s["max_prompt_tokens"])
    if cap["prompts_capped"]:
        log.warning("grpo.max_prompt_tokens %d: dropped %d profile posts from %d of %d prompts",
                    s["max_prompt_tokens"], cap["posts_dropped"], cap["prompts_capped"], len(rows))
    if hasattr(rm, "set_reference_answers"):
        rm.set_reference_answers(base_reference_answers(policy, tok, rows,
                                                        {"response_length": s["max_completion_length"]}, seed))
    adapter = RewardAdapter(rm, tok, PromptIndex(rows, tok), nan_reward=s["nan_reward"],
                            reward_scale=s["reward_scale"])
    dataset = Dataset.from_dict({"prompt": [render_policy_prompt(tok, r) for r in rows],
                                 "row_index": list(range(len(rows)))})
    rows_log: list[dict] = []
    trainer = GRPOTrainer(model=policy, reward_funcs=[RewardFunction(adapter, rows)],
                          args=_config(s, Path(out_dir), seed), train_dataset=dataset, processing_class=tok,
                          callbacks=[_callback(rows_log, adapter)])
    return trainer, tok, adapter, rows_log, cap


def train_grpo(policy_path: str, rm_spec: dict | None, train_prompts: str | os.PathLike, out_dir: str | os.PathLike,
               model_out: str | os.PathLike, log_csv: str | os.PathLike, grpo_cfg: dict, seed: int, *,
               run_name: str = "", trust_remote_code: bool = False, device: str = "auto", rm=None) -> dict:
    """Train one GRPO run; write the final policy to `model_out` and the per-step log to `log_csv`.
    `rm_spec` is loaded with `prbench.rms.load_reward_model` unless an `rm` object is given (tests)."""
    rows = load_prompt_rows(train_prompts)
    s = resolve_settings(grpo_cfg, len(rows))
    run_seed = stable_seed(seed, "grpo") % (2**31)  # one seed for every RM: same prompt order
    if rm is None:
        if rm_spec is None:
            raise ValueError("train_grpo needs an RM spec or an RM object")
        rm = load_rm(rm_spec)
    trainer, tok, adapter, rows_log, cap = _build(policy_path, rm, rows, s, run_seed, Path(out_dir),
                                                  trust_remote_code, device)
    log.info("GRPO %s: %d steps x %d prompts x %d completions, max_completion_length %d", run_name,
             s["total_steps"], s["prompts_per_step"], s["num_generations"], s["max_completion_length"])
    trainer.train()
    df = pd.DataFrame(rows_log)
    if df.empty or list(df["step"]) != list(range(1, s["total_steps"] + 1)):
        raise RuntimeError(f"GRPO log has steps {list(df.get('step', []))}, expected 1..{s['total_steps']}")
    save_pretrained_atomic(trainer.accelerator.unwrap_model(trainer.model), tok, model_out)
    write_csv(log_csv, df)
    shutil.rmtree(Path(out_dir) / "trl", ignore_errors=True)
    summary = {"steps": s["total_steps"], "prompts_per_step": s["prompts_per_step"],
               "num_generations": s["num_generations"], "reward_failures": int(adapter.total.failures),
               "reward_scored": int(adapter.total.scored), **cap}
    if summary["reward_failures"]:
        log.warning("GRPO %s: RM failed on %d of %d completions (nan_reward=%g used)", run_name,
                    summary["reward_failures"], summary["reward_scored"], s["nan_reward"])
    return summary
