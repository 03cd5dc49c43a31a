"""GRPO downstream stage (a project extension: the paper has no GRPO): one policy per reward model
trained with trl's maintained `trl.GRPOTrainer`, evaluated exactly like PPO.

- Reward: the RM behind the same `prbench.downstream.reward_adapter.RewardAdapter` as PPO (RM score x
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
- Evaluation: rule `eval_policy` (method `grpo`): same eval questions and settings (`ppo.eval_*`),
  base answers, cached judge and win rate against the base policy as PPO.

Checkpoints and resume (`grpo.save_steps`; null = none): HF Trainer's own checkpointing
(save_strategy "steps") writes `{out_dir}/checkpoints/checkpoint-N/` (weights, optimizer, LR
scheduler, Python/NumPy/torch RNG states, TrainerState) every `save_steps` optimizer steps except
the last one (the final model follows it at once). `on_save` then adds our part: `log.jsonl` (the
`StepLog` rows so far, reward adapter counts per step included) and `state.json` (step, the
adapter's reward_failures/reward_scored totals, the run's fingerprint), and renames the folder to
`checkpoints/step-NNNNNN/` (complete once renamed; older ones are then removed, so the newest
complete one always survives a kill). The fingerprint (`prbench.downstream.checkpoints`) hashes the settings
(`TRAIN_KEYS` except save_steps), the run seed, the policy folder's files, the RM spec (or the RM
object's name), and the prompt file's bytes. A new run with the same fingerprint resumes from the
newest checkpoint (log line "resuming GRPO from ..."): trainer.train(resume_from_checkpoint)
reloads weights, optimizer, scheduler, RNG states and the step counter and skips the prompt
batches already used; we reload the log rows and reward totals and set trl's micro-step counter
`_step`. A checkpoint with another fingerprint is discarded (log line "discarding GRPO
checkpoints ..."); half-written ones are removed. After a successful run the checkpoints folder is
removed. A resumed run writes the same log (byte for byte) and weights (tensor for tensor) as an
uninterrupted one on CPU (tests/test_grpo_resume.py); saving changes nothing in the run (it
consumes no RNG), so save_steps is not part of the fingerprint. Two trl details make that exact:
- trl generates a batch of completions once and reuses it for `num_iterations` optimizer steps
  (`_buffered_inputs`, not saved by HF); a checkpoint is therefore only taken at a generation
  boundary: `save_steps` must be a multiple of `num_iterations`, and the resumed run regenerates
  exactly where the uninterrupted one does.
- trl's `RepeatSampler` draws each epoch's prompt order from one generator seeded once, so a run
  resumed in epoch e > 0 would replay epoch 0's order; `_replayable` gives it a `set_epoch` that
  reseeds and replays the e earlier draws (the same orders as before in an uninterrupted run).
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

from ...config import entry_with_defaults
from ...generation import neutral_fields, neutralize
from ...io import read_json, read_jsonl, write_csv, write_json, write_jsonl
from ...models import save_pretrained_atomic
from ...prompts import ScoreRequest, answer_text
from ...rms import load_reward_model
from ...seeding import seed_everything, stable_seed
from ..checkpoints import (
    CKPT_PREFIX,
    STATE_NAME,
    file_digest,
    fingerprint,
    latest_checkpoint,
    list_checkpoints,
    model_fingerprint,
)
from ..policy import load_policy_model
from ..prompt_rows import base_reference_answers, cap_prompt_rows, filter_long_prompts, load_prompt_rows
from ..reward_adapter import PromptIndex, RewardAdapter, render_policy_prompt, reward_spread

log = logging.getLogger("prbench.downstream.grpo.train")

TRAIN_KEYS = ("lr", "beta", "num_generations", "prompts_per_step", "steps", "num_iterations", "epsilon",
              "loss_type", "scale_rewards", "max_completion_length", "temperature", "top_p", "top_k",
              "repetition_penalty", "reward_scale", "nan_reward", "per_device_batch_size",
              "gradient_checkpointing", "max_prompt_tokens", "long_prompts",
              "save_steps")
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
            requests.append(ScoreRequest(question=row["question"], answer=answer_text(str(text)),
                                         profile=tuple(row.get("profile", [])),
                                         categories=tuple(row.get("profile_categories", ()))))
        return [float(x) for x in self.adapter.score_requests(requests)]


def _log_row(logs: dict, step: int, stats) -> dict:
    raw = np.asarray(stats.raw, dtype=float)
    reward_sd, reward_n = reward_spread(*stats.reward_moments())
    row: dict[str, Any] = {"step": step, "reward": logs.get("reward"), "reward_sd": reward_sd, "reward_n": reward_n,
                           "kl": logs.get("kl", float("nan")),
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
            # one row per optimizer step: with num_iterations > 1 the steps that reuse a generation
            # batch log a loss but no reward (reward NaN, reward_scored 0 there)
            if logs and ("reward" in logs or "loss" in logs):
                rows_log.append(_log_row(logs, state.global_step, adapter.stats.reset()))
            return control

    return StepLog()


# ---------------------------------------------------------------------------------------------
# checkpoints (module docstring)
# ---------------------------------------------------------------------------------------------
CKPT_DIR = "checkpoints"
PREFIX_CHECKPOINT_DIR = "checkpoint"  # HF Trainer's checkpoint-N (transformers.trainer_utils), our scratch name


def check_save_steps(s: dict) -> None:
    """grpo.save_steps: null, or a positive multiple of num_iterations (a generation boundary)."""
    n = s["save_steps"]
    if n is None:
        return
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"config key grpo.save_steps: must be a positive integer or null, got {n!r}")
    if n % s["num_iterations"]:
        raise ValueError(f"config key grpo.save_steps: {n} is not a multiple of grpo.num_iterations "
                         f"{s['num_iterations']} (trl reuses each generation batch for num_iterations steps; "
                         "checkpoints are taken between generation batches)")


def run_fingerprint(policy_path, rm_spec, rm, s: dict, run_seed: int, train_prompts, revision=None) -> str:
    """Hash of everything that determines a GRPO run (save_steps excluded: saving changes nothing)."""
    return fingerprint("grpo", model_fingerprint(str(policy_path)) if revision is None else
                       [model_fingerprint(str(policy_path)), revision],
                       {k: v for k, v in (rm_spec or {}).items() if k != "device"}, getattr(rm, "name", None),
                       {k: s[k] for k in TRAIN_KEYS if k != "save_steps"}, run_seed, file_digest(train_prompts))


class Checkpoints:
    """The checkpoints folder of one run: when to save, what we add to HF's checkpoint, resume."""

    def __init__(self, root: Path, s: dict, fp: str):
        self.root, self.fp = Path(root), fp
        self.save_steps, self.total_steps = s["save_steps"], s["total_steps"]
        self.rows_log: list[dict] = []
        self.adapter: RewardAdapter | None = None

    def attach(self, rows_log: list, adapter: RewardAdapter) -> None:
        self.rows_log, self.adapter = rows_log, adapter

    def due(self, step: int) -> bool:
        return bool(self.save_steps) and step % self.save_steps == 0 and step < self.total_steps

    def resume_point(self) -> Path | None:
        """Newest checkpoint of this run (HF's checkpoint-N folders are half-written ones)."""
        ckpt = latest_checkpoint(self.root, self.fp, "GRPO", scratch=f"{PREFIX_CHECKPOINT_DIR}-*")
        if ckpt is not None:
            log.info("resuming GRPO from %s (step %d of %d)", ckpt, read_json(ckpt / STATE_NAME)["step"],
                     self.total_steps)
        return ckpt

    def commit(self, step: int) -> Path:
        """Add the log rows and state to HF's checkpoint-N and rename it step-NNNNNN; drop older ones."""
        src, final = self.root / f"{PREFIX_CHECKPOINT_DIR}-{step}", self.root / f"{CKPT_PREFIX}{step:06d}"
        write_jsonl(src / "log.jsonl", self.rows_log)
        write_json(src / STATE_NAME, {"step": step, "total_steps": self.total_steps, "fingerprint": self.fp,
                                      "reward_failures": int(self.adapter.total.failures),
                                      "reward_scored": int(self.adapter.total.scored)})
        shutil.rmtree(final, ignore_errors=True)
        os.replace(src, final)
        for old in list_checkpoints(self.root):
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint %s (step %d/%d)", final, step, self.total_steps)
        return final

    def restore(self, ckpt: Path, trainer) -> int:
        """Our part of a resume (HF's train(resume_from_checkpoint) does the rest): log rows, reward
        totals and trl's micro-step counter. Returns the step resumed from."""
        state = read_json(ckpt / STATE_NAME)
        self.rows_log[:] = read_jsonl(ckpt / "log.jsonl") if (ckpt / "log.jsonl").stat().st_size else []
        self.adapter.total.failures = int(state["reward_failures"])
        self.adapter.total.scored = int(state["reward_scored"])
        trainer._step = int(state["step"]) * trainer.args.gradient_accumulation_steps
        return int(state["step"])

    def callback(self):
        from transformers import TrainerCallback

        ckpts = self

        class SaveAtSteps(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):  # after HF's DefaultFlowCallback
                control.should_save = ckpts.due(state.global_step)
                return control

            def on_save(self, args, state, control, **kw):
                ckpts.commit(state.global_step)
                return control

        return SaveAtSteps()


def _config(s: dict, ckpt_root: Path, seed: int):
    from trl import GRPOConfig

    cuda = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(ckpt_root), seed=seed, data_seed=seed, learning_rate=s["lr"], beta=s["beta"],
        num_generations=s["num_generations"], per_device_train_batch_size=s["micro_batch_size"],
        gradient_accumulation_steps=s["gradient_accumulation"], num_iterations=s["num_iterations"],
        epsilon=s["epsilon"], loss_type=s["loss_type"], scale_rewards=s["scale_rewards"],
        max_steps=s["total_steps"], max_completion_length=s["max_completion_length"],
        temperature=s["temperature"], top_p=s["top_p"], top_k=s["top_k"],
        repetition_penalty=s["repetition_penalty"], min_p=None, generation_kwargs=neutral_fields(),
        lr_scheduler_type="linear", warmup_steps=0, weight_decay=0.0, logging_steps=1,
        # checkpoints: HF writes checkpoint-N when Checkpoints.on_step_end asks; no HF rotation
        save_strategy="steps" if s["save_steps"] else "no", save_steps=s["save_steps"] or 1, save_total_limit=None,
        report_to=[], disable_tqdm=True, bf16=cuda, use_cpu=not cuda, dataloader_num_workers=0,
        gradient_checkpointing=s["gradient_checkpointing"], remove_unused_columns=False, log_completions=False,
        shuffle_dataset=True,
    )


def _replayable(sampler):
    """trl's RepeatSampler draws epoch e's prompt order as the (e+1)-th permutation of one generator
    seeded once; give it a `set_epoch` (called by the Trainer before each epoch) that reseeds and
    replays the e earlier draws, so a run resumed in epoch e gets epoch e's order (and an
    uninterrupted run the same orders as without it)."""
    if getattr(sampler, "generator", None) is None:
        return sampler

    def set_epoch(epoch: int) -> None:
        sampler.generator.manual_seed(sampler.seed)
        for _ in range(epoch):
            torch.randperm(sampler.num_samples, generator=sampler.generator)

    sampler.set_epoch = set_epoch
    return sampler


def _trainer_class():
    from trl import GRPOTrainer

    class ResumableGRPOTrainer(GRPOTrainer):
        def _get_train_sampler(self, dataset=None):
            return _replayable(super()._get_train_sampler(dataset))

    return ResumableGRPOTrainer


def _build(policy_path, rm, rows, s, seed, ckpt_root, trust_remote_code, device, callbacks=(), revision=None):
    """(trainer, tokenizer, adapter, log rows, prompt-cap counts) of one run."""
    from datasets import Dataset

    seed_everything(seed)
    policy, tok = load_policy_model(policy_path, trust_remote_code, device, "float32", revision=revision)
    if tok.pad_token_id is None or tok.eos_token_id is None:
        raise ValueError(f"policy {policy_path}: tokenizer needs a pad and an eos token")
    neutralize(policy)
    policy.generation_config.pad_token_id = tok.pad_token_id
    rows, cap = cap_prompt_rows(rows, tok, s["max_prompt_tokens"], "trim", "grpo")
    cap.pop("prompts_filtered")  # filtering (grpo.long_prompts filter) ran before: train_grpo
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
    trainer = _trainer_class()(model=policy, reward_funcs=[RewardFunction(adapter, rows)],
                               args=_config(s, Path(ckpt_root), seed), train_dataset=dataset, processing_class=tok,
                               callbacks=[_callback(rows_log, adapter), *callbacks])
    return trainer, tok, adapter, rows_log, cap


def train_grpo(policy_path: str, rm_spec: dict | None, train_prompts: str | os.PathLike, out_dir: str | os.PathLike,
               model_out: str | os.PathLike, log_csv: str | os.PathLike, grpo_cfg: dict, seed: int, *,
               run_name: str = "", trust_remote_code: bool = False, device: str = "auto", rm=None,
               callbacks: Sequence = (), revision: str | None = None) -> dict:
    """Train (or resume, see the module docstring) one GRPO run; write the final policy to
    `model_out` and the per-step log to `log_csv`. `rm_spec` is loaded with
    `prbench.rms.load_reward_model` unless an `rm` object is given (tests); `callbacks` are extra
    trainer callbacks, run after ours."""
    rows = load_prompt_rows(train_prompts)
    full = entry_with_defaults(grpo_cfg, "grpo")
    rows, filtered = filter_long_prompts(rows, policy_path, trust_remote_code, full["max_prompt_tokens"],
                                         full["long_prompts"], "grpo", revision=revision)
    s = resolve_settings(grpo_cfg, len(rows))
    check_save_steps(s)
    run_seed = stable_seed(seed, "grpo") % (2**31)  # one seed for every RM: same prompt order
    if rm is None:
        if rm_spec is None:
            raise ValueError("train_grpo needs an RM spec or an RM object")
        rm = load_reward_model(rm_spec)
    ckpts = Checkpoints(Path(out_dir) / CKPT_DIR, s, run_fingerprint(policy_path, rm_spec, rm, s, run_seed,
                                                                      train_prompts, revision))
    resume = ckpts.resume_point()
    trainer, tok, adapter, rows_log, cap = _build(policy_path, rm, rows, s, run_seed, ckpts.root,
                                                  trust_remote_code, device, [ckpts.callback(), *callbacks],
                                                  revision)
    ckpts.attach(rows_log, adapter)
    resumed_from = ckpts.restore(resume, trainer) if resume is not None else None
    log.info("GRPO %s: %d steps x %d prompts x %d completions, max_completion_length %d", run_name,
             s["total_steps"], s["prompts_per_step"], s["num_generations"], s["max_completion_length"])
    trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    df = pd.DataFrame(rows_log)
    if df.empty or list(df["step"]) != list(range(1, s["total_steps"] + 1)):
        raise RuntimeError(f"GRPO log has steps {list(df.get('step', []))}, expected 1..{s['total_steps']}")
    save_pretrained_atomic(trainer.accelerator.unwrap_model(trainer.model), tok, model_out)
    write_csv(log_csv, df)
    shutil.rmtree(ckpts.root, ignore_errors=True)
    summary = {"steps": s["total_steps"], "prompts_per_step": s["prompts_per_step"],
               "num_generations": s["num_generations"], "resumed_from": resumed_from,
               "reward_failures": int(adapter.total.failures), "reward_scored": int(adapter.total.scored),
               "prompts": len(rows), **cap, **filtered}
    if summary["reward_failures"]:
        log.warning("GRPO %s: RM failed on %d of %d completions (nan_reward=%g used)", run_name,
                    summary["reward_failures"], summary["reward_scored"], s["nan_reward"])
    return summary
