"""PPO downstream stage: train one policy per reward model with trl.

Training (`train_ppo`) uses trl 1.12's `trl.experimental.ppo.PPOTrainer` (PPO exists only in trl
1.10-1.12, hence the pin). The reward model is any `prbench.rms` RewardModel behind
`prbench.downstream.reward_adapter.RewardAdapter`; the value model is the policy with a fresh scalar head
(`AutoModelForSequenceClassification`, num_labels=1); the reference model is the untrained policy.
Actor and critic get their own learning rates (two AdamW parameter groups). The trained policy is
judged against the base policy by `prbench.downstream.evaluation` (shared with GRPO).

Mapping of config `ppo:` to trl: `batch_size` rollouts per PPO step, split into
`batch_size / mini_batch_size` mini-batches, each one optimizer update
(per_device_train_batch_size=batch_size, gradient_accumulation_steps=1, num_mini_batches=...),
`ppo_epochs` passes over each batch, `total_episodes` rollouts in all (null = one pass over the
training prompts), stop at the tokenizer's EOS.

Checkpoints and resume (trl's experimental PPOTrainer has no resume_from_checkpoint;
`prbench.downstream.ppo.checkpoint`, folder helpers shared with GRPO in `prbench.downstream.checkpoints`): every
`save_steps` steps, and after the last one, the callback below atomically writes
`checkpoints/step-NNNNNN/` with the policy and value model (save_pretrained), optimizer and LR
scheduler state, the Python/NumPy/torch RNG states, the step/episode counters,
the training log so far and a fingerprint of the run settings. A new run with the same
fingerprint resumes from the newest checkpoint: it reloads the weights (the reference model stays
the base policy), optimizer, scheduler and RNG states, sets trl's step/episode counters in
`on_train_begin`, shortens the loop to the remaining steps and skips the prompt batches already
used (prompt batches come from a seeded, restartable order instead of trl's shuffled DataLoader).
An uninterrupted run and an interrupted + resumed run therefore produce the same log and weights
(tests/test_ppo_resume.py). A checkpoint with another fingerprint (changed config/prompts/model)
is discarded.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from ...config import entry_with_defaults
from ...generation import neutralize
from ...io import read_json, read_jsonl, write_csv, write_json, write_jsonl
from ...models import resolve_model_ref, save_pretrained_atomic
from ...revisions import hub_kwargs
from ...rms import load_reward_model
from ...seeding import seed_everything, stable_seed
from ..checkpoints import CKPT_PREFIX, fingerprint, latest_checkpoint, list_checkpoints
from ..policy import load_policy_model
from ..prompt_rows import base_reference_answers, cap_prompt_rows, filter_long_prompts, load_prompt_rows, render_key
from ..reward_adapter import PromptIndex, RewardAdapter, reward_spread
from .checkpoint import PromptBatches, rng_state, set_rng_state
from .rollout import forward_logprob_rollouts
from .settings import TRAIN_KEYS, build_optimizer, fingerprinted, resolve_settings, world_size  # noqa: F401

log = logging.getLogger("prbench.downstream.ppo.train")

# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------
def load_value_model(path: str, pad_token_id: int, trust_remote_code: bool = False, revision: str | None = None):
    """The critic: the policy's backbone with a fresh scalar head (or a saved critic folder), fp32.
    A hub policy loads at `revision` or its locked commit (prbench.revisions)."""
    from transformers import AutoModelForSequenceClassification

    ref = resolve_model_ref(str(path))
    kw: dict[str, Any] = {"num_labels": 1, "trust_remote_code": trust_remote_code, "use_safetensors": True,
                          "dtype": torch.float32,
                          **hub_kwargs(ref, "model", revision, key="policies.<policy>.path",
                                       trust_remote_code=trust_remote_code)}
    model = AutoModelForSequenceClassification.from_pretrained(ref, **kw)
    model.config.pad_token_id = pad_token_id
    return model


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------
def _all_sum(values: Sequence[float]) -> list[float]:
    """Sum over the training processes (identity in a single process)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return [float(v) for v in t.cpu()]


def _log_row(step: int, episode: int, logs: dict, adapter_stats) -> dict:
    raw_sum, raw_n, failures, scored, *moments = _all_sum(
        [float(np.sum(adapter_stats.raw)) if adapter_stats.raw else 0.0, len(adapter_stats.raw),
         adapter_stats.failures, adapter_stats.scored, *adapter_stats.reward_moments()])
    reward_sd, reward_n = reward_spread(*moments)
    row: dict[str, Any] = {
        "step": step,
        "episode": episode,
        "reward": logs.get("objective/scores"),
        "reward_sd": reward_sd,
        "reward_n": reward_n,
        "kl": logs.get("objective/kl"),
        "entropy": logs.get("objective/entropy"),
        "reward_raw_mean": raw_sum / raw_n if raw_n else float("nan"),
        "reward_failures": int(failures),
        "reward_scored": int(scored),
    }
    for k, v in logs.items():
        if k in ("eps",):  # wall-clock throughput: not reproducible, kept out of the table
            continue
        name = k.replace("/", "_")
        if name not in row and isinstance(v, (int, float)):
            row[name] = v
    return row


def _make_callback(runner: "_PPORun"):
    from transformers import TrainerCallback

    class CheckpointAndLog(TrainerCallback):
        """Resume hook (on_train_begin), per-step log rows (on_log), checkpoints (on_step_end)."""

        def on_train_begin(self, args, state, control, **kw):
            if runner.resume_state is not None:
                st = runner.resume_state
                state.global_step = st["step"]
                state.episode = st["episode"]
                state.max_steps = runner.settings["total_steps"]
                set_rng_state(runner.resume_rng)
            return control

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "objective/scores" in logs:
                runner.rows_log.append(_log_row(state.global_step, state.episode, logs, runner.adapter.stats.reset()))
            return control

        def on_step_end(self, args, state, control, **kw):
            step = state.global_step
            if step % runner.settings["save_steps"] == 0 or step >= runner.settings["total_steps"]:
                runner.save_checkpoint(step, state.episode)
            return control

    return CheckpointAndLog()


class _PPORun:
    """One PPO run: builds models and trainer, saves/loads checkpoints."""

    def __init__(self, policy_path, rm, prompt_rows, out_dir, settings, seed, fp, trust_remote_code, device,
                 revision=None):
        self.policy_path, self.rm, self.prompt_rows = str(policy_path), rm, prompt_rows
        self.out_dir, self.ckpt_root = Path(out_dir), Path(out_dir) / "checkpoints"
        self.settings, self.seed, self.fp = settings, seed, fp
        self.trust_remote_code, self.device, self.revision = trust_remote_code, device, revision
        self.rows_log: list[dict] = []
        self.resume_state: dict | None = None
        self.resume_rng: dict | None = None
        self.trainer = None

    # -- checkpoint IO ---------------------------------------------------------------------------
    def save_checkpoint(self, step: int, episode: int) -> Path:
        """Process 0 writes weights, optimizer (identical on every DDP process), scheduler, log and
        state; every process writes its own RNG state and reward counters (rng-rank{i}.pt)."""
        tr = self.trainer
        acc = tr.accelerator
        rank = acc.process_index
        wrapper = acc.unwrap_model(tr.model)
        final = self.ckpt_root / f"{CKPT_PREFIX}{step:06d}"
        tmp = self.ckpt_root / f".tmp-{CKPT_PREFIX}{step:06d}"
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        acc.wait_for_everyone()
        torch.save({"rng": rng_state(), "failures": self.adapter.total.failures, "scored": self.adapter.total.scored},
                   tmp / f"rng-rank{rank}.pt")
        acc.wait_for_everyone()
        if rank == 0:
            self._write_checkpoint(tmp, final, step, episode, wrapper)
        acc.wait_for_everyone()
        return final

    def _write_checkpoint(self, tmp: Path, final: Path, step: int, episode: int, wrapper) -> None:
        tr = self.trainer
        wrapper.policy.save_pretrained(tmp / "policy", safe_serialization=True)
        tr.processing_class.save_pretrained(tmp / "policy")
        wrapper.value_model.save_pretrained(tmp / "value", safe_serialization=True)
        torch.save(tr.optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(tr.lr_scheduler.state_dict(), tmp / "scheduler.pt")
        write_jsonl(tmp / "log.jsonl", self.rows_log)
        write_json(tmp / "state.json", {
            "step": step, "episode": episode, "total_steps": self.settings["total_steps"],
            "fingerprint": self.fp, "world_size": self.settings["world_size"],
        })
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in list_checkpoints(self.ckpt_root):  # keep only the newest
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint %s (step %d/%d)", final, step, self.settings["total_steps"])
    # -- build + train ---------------------------------------------------------------------------
    def build(self, ckpt: Path | None):
        """Models, reward adapter, trl PPOTrainer and prompt batches (resumed from `ckpt` if given)."""
        seed_everything(self.seed)
        base_model, tok, policy, value = self._load_models(ckpt)
        dataset = self._prepare_rewards(base_model, tok)
        trainer, collate = self._make_trainer(tok, policy, base_model, value, dataset)
        start = self._resume(trainer, ckpt) if ckpt is not None else 0
        trainer.dataloader = PromptBatches(dataset, self.settings["batch_size"], collate, self.seed, start=start,
                                           rank=trainer.accelerator.process_index, world=self.settings["world_size"])
        self.trainer = trainer
        return trainer, tok

    def _load_models(self, ckpt: Path | None):
        """(reference = base policy, tokenizer, trained policy, value model): fresh, or from `ckpt`."""
        base_model, tok = load_policy_model(self.policy_path, self.trust_remote_code, self.device,
                                            revision=self.revision)
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            raise ValueError(f"policy {self.policy_path}: tokenizer has no pad token")
        if tok.eos_token_id is None:
            raise ValueError(f"policy {self.policy_path}: tokenizer has no eos token (PPO stops responses at EOS)")
        if ckpt is not None:
            policy, _ = load_policy_model(str(ckpt / "policy"), self.trust_remote_code, self.device, "float32")
            value = load_value_model(str(ckpt / "value"), tok.pad_token_id, self.trust_remote_code)
        else:
            policy, _ = load_policy_model(self.policy_path, self.trust_remote_code, self.device, "float32",
                                          revision=self.revision)
            value = load_value_model(self.policy_path, tok.pad_token_id, self.trust_remote_code, self.revision)
        policy.config.pad_token_id = tok.pad_token_id
        for m in (policy, base_model):
            # trl fills the generation fields it leaves unset from here: token ids only (prbench.generation)
            neutralize(m)
            if getattr(m, "generation_config", None) is not None:
                m.generation_config.pad_token_id = tok.pad_token_id
        return base_model, tok, policy, value

    def _prepare_rewards(self, base_model, tok):
        """Cap the prompts, give a pairwise RM its reference answers, build the reward adapter;
        returns the tokenized prompt dataset."""
        from datasets import Dataset

        s = self.settings
        self.prompt_rows, self.cap_stats = cap_prompt_rows(self.prompt_rows, tok, s["max_prompt_tokens"], "trim",
                                                           "ppo")
        self.cap_stats.pop("prompts_filtered")  # filtering (ppo.long_prompts filter) ran before: train_ppo
        if self.cap_stats["prompts_capped"]:
            log.warning("ppo.max_prompt_tokens %d: dropped %d lowest-ranked profile posts from %d of %d prompts",
                        s["max_prompt_tokens"], self.cap_stats["posts_dropped"], self.cap_stats["prompts_capped"],
                        len(self.prompt_rows))
        if hasattr(self.rm, "set_reference_answers"):
            self.rm.set_reference_answers(base_reference_answers(base_model, tok, self.prompt_rows, s, self.seed),
                                          source=f"the base policy's ({self.policy_path}) greedy answers to the "
                                                 "PPO train prompts")
        index = PromptIndex(self.prompt_rows, tok)
        if index.duplicates:
            log.info("%d training prompts render to the same text as an earlier one", index.duplicates)
        self.adapter = RewardAdapter(self.rm, tok, index, nan_reward=s["nan_reward"],
                                     reward_scale=s["reward_scale"])
        return Dataset.from_dict({"input_ids": index.token_ids})

    def _ppo_config(self):
        from trl.experimental.ppo import PPOConfig

        s = self.settings
        cuda = torch.cuda.is_available() and self.device != "cpu"
        return PPOConfig(
            output_dir=str(self.ckpt_root),
            seed=self.seed,
            learning_rate=s["actor_lr"],
            # trl ties its local batch to per_device x accumulation; the layout is set in _make_trainer
            per_device_train_batch_size=s["micro_batch_size"],
            gradient_accumulation_steps=s["gradient_accumulation"],
            num_mini_batches=1,
            num_ppo_epochs=s["ppo_epochs"],
            total_episodes=s["total_episodes"],
            response_length=s["response_length"],
            temperature=s["temperature"],
            kl_coef=s["kl_coef"],
            lam=s["gae_lambda"],
            cliprange_value=s["cliprange_value"],
            vf_coef=s["vf_coef"],
            # recorded in the trl config; the optimizer and schedule trl runs are built by build_optimizer
            lr_scheduler_type=s["lr_scheduler"],
            weight_decay=s["weight_decay"],
            stop_token="eos",
            local_rollout_forward_batch_size=s["rollout_chunk"],
            num_sample_generations=0,
            save_strategy="no",          # checkpoints are written by CheckpointAndLog
            logging_steps=1,
            report_to=[],
            disable_tqdm=True,
            bf16=cuda,
            use_cpu=not cuda,
            gradient_checkpointing=s["gradient_checkpointing"],
            dataloader_num_workers=0,
        )

    def _make_trainer(self, tok, policy, ref, value, dataset):
        """(trl's PPOTrainer with two AdamW parameter groups (actor, critic) and our batch layout,
        its collator)."""
        from transformers import DataCollatorWithPadding
        from trl.experimental.ppo import PPOTrainer

        s = self.settings
        args = self._ppo_config()
        if s["gradient_checkpointing"]:  # trl's PPO loop does not enable it itself
            for m in (policy, value):
                m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        optimizer, scheduler = build_optimizer(policy, value, s)
        collate = DataCollatorWithPadding(tok)
        trainer = PPOTrainer(args=args, processing_class=tok, model=policy, ref_model=ref,
                             reward_model=self.adapter, train_dataset=dataset, value_model=value,
                             data_collator=collate, optimizers=(optimizer, scheduler),
                             callbacks=[_make_callback(self)] + list(self.extra_callbacks))
        # trl 1.12 derives local batch = per_device x accumulation; our layout: each process rolls
        # out batch_size / world prompts, splits them into num_mini mini-batches of
        # mini_batch_size / world, each one optimizer step over `gradient_accumulation` micro-batches.
        a = trainer.args
        if a.world_size != s["world_size"]:
            raise RuntimeError(f"PPO planned for {s['world_size']} processes but runs in {a.world_size}")
        a.num_mini_batches = s["batch_size"] // s["mini_batch_size"]
        a.local_batch_size, a.batch_size = s["local_batch_size"], s["batch_size"]
        a.local_mini_batch_size, a.mini_batch_size = s["local_mini_batch_size"], s["mini_batch_size"]
        a.num_total_batches = s["total_steps"]
        return trainer, collate

    def _resume(self, trainer, ckpt: Path) -> int:
        """Optimizer, scheduler, log, reward counters and (for on_train_begin) RNG and step counters
        from `ckpt`; returns the number of steps already done."""
        state = read_json(ckpt / "state.json")
        trainer.optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", map_location="cpu", weights_only=False))
        trainer.lr_scheduler.load_state_dict(torch.load(ckpt / "scheduler.pt", weights_only=False))
        self.resume_state = state
        mine = torch.load(ckpt / f"rng-rank{trainer.accelerator.process_index}.pt", weights_only=False)
        self.resume_rng = mine["rng"]
        self.rows_log = read_jsonl(ckpt / "log.jsonl") if (ckpt / "log.jsonl").stat().st_size else []
        self.adapter.total.failures = int(mine["failures"])
        self.adapter.total.scored = int(mine["scored"])
        start = int(state["step"])
        # trl loops `for update in range(1, args.num_total_batches + 1)`, evaluated after
        # on_train_begin; the scheduler was built for the full run.
        trainer.args.num_total_batches = self.settings["total_steps"] - start
        return start

    extra_callbacks: Sequence = ()


def train_rows(train_prompts, ppo_cfg: dict, subset: str | None, policy_path: str,
               trust_remote_code: bool, revision: str | None = None) -> tuple[list[dict], dict]:
    """The run's training prompt rows: one subset's (ppo.per_subset) or all, over-long ones left out
    under ppo.long_prompts `filter` (counted: {"prompts_filtered": n})."""
    rows = load_prompt_rows(train_prompts)
    if subset is not None:
        rows = [r for r in rows if r["subset"] == subset]
        if not rows:
            raise ValueError(f"{train_prompts}: no training prompts of subset {subset!r} (ppo.per_subset)")
    full = entry_with_defaults(ppo_cfg, "ppo")
    return filter_long_prompts(rows, policy_path, trust_remote_code, full["max_prompt_tokens"],
                               full["long_prompts"], "ppo", revision=revision)


ROLLOUT_KEYS = ("generation_chunk", "temperature", "rollout_sampler")  # forward_logprob_rollouts' arguments


@contextlib.contextmanager
def frozen_heap():
    """Everything alive when training starts (modules, models, datasets, the RM) moved to the
    collector's permanent generation for the block: trl's PPO loop calls `gc.collect()` twice a
    step, and each full collection rescanned that whole heap (about 0.5 s a call on the demo,
    perf/README.md "PPO at a constant rate, the heap frozen"). Numerics are untouched; objects made
    inside are still collected."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def train_ppo(
    policy_path: str,
    rm_spec: dict | None,
    train_prompts: str | os.PathLike,
    out_dir: str | os.PathLike,
    model_out: str | os.PathLike,
    log_csv: str | os.PathLike,
    ppo_cfg: dict,
    seed: int,
    *,
    run_name: str = "",
    trust_remote_code: bool = False,
    device: str = "auto",
    rm=None, callbacks: Sequence = (),
    subset: str | None = None, revision: str | None = None,
) -> dict:
    """Train (or resume) one PPO run; write the final policy to `model_out` and the curves to `log_csv`.

    `rm_spec` is the RM spec for `prbench.rms.load_reward_model` (ignored when an `rm` object is
    given, as tests do). `callbacks` are extra trl callbacks, run after the checkpoint callback.
    `subset` (ppo.per_subset): that subset's prompts only (`train_rows`, also ppo.long_prompts).
    `revision`: a hub policy's pin (prbench.revisions). Returns the summary (steps, resumed_from, ...).
    """
    rows, filtered = train_rows(train_prompts, ppo_cfg, subset, policy_path, trust_remote_code, revision)
    settings = resolve_settings(ppo_cfg, len(rows))
    # One seed for every run (same prompt order for all RMs), derived from the config seed.
    run_seed = stable_seed(seed, "ppo") % (2**31)
    if rm is None:
        if rm_spec is None:
            raise ValueError("train_ppo needs an RM spec or an RM object")
        rm = load_reward_model(rm_spec)
    prompts_fp = fingerprint([r["question_id"] for r in rows], [render_key(r) for r in rows])
    fp = fingerprint(f"{policy_path}@{revision}" if revision else str(policy_path),  # a pin: its own run
                     {k: v for k, v in (rm_spec or {}).items() if k != "device"}, getattr(rm, "name", None),
                     fingerprinted(settings), run_seed, prompts_fp)
    run = _PPORun(policy_path, rm, rows, Path(out_dir), settings, run_seed, fp, trust_remote_code, device, revision)
    run.extra_callbacks = list(callbacks)
    ckpt = latest_checkpoint(run.ckpt_root, fp, "PPO")
    resumed_from = None
    if ckpt is not None:
        resumed_from = read_json(ckpt / "state.json")["step"]
        log.info("resuming PPO from %s (step %d of %d)", ckpt, resumed_from, settings["total_steps"])
    trainer, tok = run.build(ckpt)
    if resumed_from is None or resumed_from < settings["total_steps"]:
        log.info("PPO %s: %d steps x %d rollouts (%d prompts), response_length %d", run_name,
                 settings["total_steps"], settings["batch_size"], len(rows), settings["response_length"])
        # rollouts in generation chunks, ids only (drawn by ppo.rollout_sampler); logprobs from a forward pass
        with forward_logprob_rollouts(*(settings[k] for k in ROLLOUT_KEYS)), frozen_heap():
            trainer.train()
    failures, scored = _all_sum([run.adapter.total.failures, run.adapter.total.scored])
    _write_outputs(run, tok, Path(model_out), log_csv)
    summary = {
        "steps": settings["total_steps"], "episodes": settings["total_episodes"], "resumed_from": resumed_from,
        "reward_failures": int(failures), "reward_scored": int(scored), "processes": settings["world_size"],
        "micro_batch_size": settings["micro_batch_size"], "gradient_accumulation": settings["gradient_accumulation"],
        "prompts": len(rows), **run.cap_stats, **filtered}
    if summary["reward_failures"]:
        log.warning("PPO %s: RM failed on %d of %d rollouts (nan_reward=%g used)", run_name,
                    summary["reward_failures"], summary["reward_scored"], settings["nan_reward"])
    return summary


def _write_outputs(run: _PPORun, tok, model_out: Path, log_csv) -> None:
    """Check the training log covers every step; process 0 writes the final policy and the log."""
    trainer, total = run.trainer, run.settings["total_steps"]
    acc = trainer.accelerator
    df = pd.DataFrame(run.rows_log)
    if df.empty or len(df) != total or list(df["step"]) != list(range(1, total + 1)):
        raise RuntimeError(f"PPO log has steps {list(df.get('step', []))}, expected 1..{total}")
    if acc.is_main_process:  # one writer for the final policy and the log
        save_pretrained_atomic(acc.unwrap_model(trainer.model).policy, tok, model_out)
        write_csv(log_csv, df)
    acc.wait_for_everyone()
