"""PPO settings: the config section `ppo` resolved into one run's settings (per-process layout,
steps), and the optimizer and LR schedule those settings ask for (`prbench.downstream.ppo.train`
builds the run from them)."""
from __future__ import annotations

import math
import os

import torch

from ...config import entry_with_defaults
from .memory import check_sampler_path

# Settings that change what a run computes (part of the checkpoint fingerprint).
TRAIN_KEYS = ("actor_lr", "critic_lr", "batch_size", "mini_batch_size", "ppo_epochs", "total_episodes",
              "response_length", "temperature", "kl_coef", "nan_reward", "per_device_batch_size",
              "local_rollout_forward_batch_size", "gradient_checkpointing", "max_prompt_tokens", "world_size",
              "reward_scale", "gae_lambda", "cliprange_value", "lr_scheduler", "weight_decay", "long_prompts",
              "rollout_generation_batch_size", "adam_eps", "vf_coef", "max_grad_norm", "drop_last", "rollout_sampler")


# ---------------------------------------------------------------------------------------------
# settings
# ---------------------------------------------------------------------------------------------
def world_size() -> int:
    """Training processes of this run (torchrun / accelerate set WORLD_SIZE; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def resolve_settings(ppo_cfg: dict, n_prompts: int, n_procs: int | None = None) -> dict:
    """Validated PPO settings with `total_episodes`, `total_steps` and the per-process layout resolved.

    Each optimizer step sees `mini_batch_size` rollouts in all: `world_size` processes x
    `per_device_batch_size` micro-batch x `gradient_accumulation` (null per_device_batch_size = the
    whole per-process mini-batch, no accumulation: the single-process default)."""
    ppo_cfg = entry_with_defaults(ppo_cfg, "ppo")  # the job's picked keys; the schema fills the rest
    s = {k: ppo_cfg[k] for k in TRAIN_KEYS if k != "world_size"}
    s["world_size"] = int(n_procs if n_procs is not None else world_size())
    s["nan_reward"] = float(s["nan_reward"])
    s["reward_scale"] = float(s["reward_scale"])
    for k in ("gae_lambda", "cliprange_value", "weight_decay", "adam_eps", "vf_coef"):
        s[k] = float(s[k])
    s["max_grad_norm"] = None if s["max_grad_norm"] is None else float(s["max_grad_norm"])
    s["drop_last"] = bool(s["drop_last"])
    s["save_steps"] = int(ppo_cfg["save_steps"])
    s["gradient_checkpointing"] = bool(s["gradient_checkpointing"])
    check_sampler_path(s["rollout_sampler"], "forward")  # train_ppo's rollouts: the forward path
    for k in ("batch_size", "mini_batch_size", "ppo_epochs", "response_length"):
        if not isinstance(s[k], int) or s[k] < 1:
            raise ValueError(f"config key ppo.{k}: must be a positive integer, got {s[k]!r}")
    for k in ("per_device_batch_size", "local_rollout_forward_batch_size", "max_prompt_tokens",
              "rollout_generation_batch_size"):
        if s[k] is not None and (not isinstance(s[k], int) or s[k] < 1):
            raise ValueError(f"config key ppo.{k}: must be a positive integer or null, got {s[k]!r}")
    if s["batch_size"] % s["mini_batch_size"]:
        raise ValueError("config key ppo.mini_batch_size: must divide ppo.batch_size")
    n = s["world_size"]
    if s["mini_batch_size"] % n:
        raise ValueError(f"config keys ppo.mini_batch_size / ppo.gpus: {n} training processes do not divide "
                         f"ppo.mini_batch_size {s['mini_batch_size']}")
    s["local_batch_size"] = s["batch_size"] // n
    s["local_mini_batch_size"] = s["mini_batch_size"] // n
    s["micro_batch_size"] = s["per_device_batch_size"] or s["local_mini_batch_size"]
    if s["local_mini_batch_size"] % s["micro_batch_size"]:
        raise ValueError(f"config key ppo.per_device_batch_size: {s['micro_batch_size']} does not divide the "
                         f"per-process mini-batch {s['local_mini_batch_size']}")
    s["gradient_accumulation"] = s["local_mini_batch_size"] // s["micro_batch_size"]
    s["rollout_chunk"] = min(s["local_batch_size"], s["local_rollout_forward_batch_size"] or 64)
    # rows per `generate` call (ppo.rollout): null = the whole local batch (the rule passes the memory
    # plan's choice, prbench.downstream.ppo.memory.generation_chunk, on a GPU)
    s["generation_chunk"] = min(s["local_batch_size"], s["rollout_generation_batch_size"] or s["local_batch_size"])
    if s["batch_size"] > n_prompts:
        raise ValueError(
            f"config key ppo.batch_size: {s['batch_size']} is larger than the {n_prompts} training prompts")
    if s["total_episodes"] is None:
        s["total_episodes"] = n_prompts
    if s["drop_last"]:  # verl: the last partial batch is left out
        s["total_steps"] = s["total_episodes"] // s["batch_size"]
        if s["total_steps"] < 1:
            raise ValueError(f"config keys ppo.total_episodes / ppo.drop_last: {s['total_episodes']} episodes are "
                             f"less than one batch of {s['batch_size']}, and drop_last leaves no PPO step")
        s["total_episodes"] = s["total_steps"] * s["batch_size"]
    else:
        s["total_steps"] = math.ceil(s["total_episodes"] / s["batch_size"])
    return s


def fingerprinted(s: dict) -> dict:
    """The settings that identify a run's checkpoints (TRAIN_KEYS); ppo.rollout_sampler only where
    it is not the default multinomial, so checkpoints written before the key existed still resume."""
    out = {k: s[k] for k in TRAIN_KEYS}
    if out["rollout_sampler"] == "multinomial":
        del out["rollout_sampler"]
    return out


def build_optimizer(policy, value, s: dict):
    """AdamW with two parameter groups (actor at ppo.actor_lr, critic at ppo.critic_lr), both with
    ppo.weight_decay, and the LR schedule ppo.lr_scheduler over the run's total_steps: `linear`
    decays both rates to 0 (trl's default), `constant` keeps them (verl's warmup_style constant,
    no warmup). ppo.adam_eps is AdamW's eps; ppo.max_grad_norm clips the actor's and the critic's
    gradients separately before each step (verl's grad_clip), null = no clipping."""
    from transformers import get_scheduler

    optimizer = torch.optim.AdamW([
        {"params": [p for p in policy.parameters() if p.requires_grad], "lr": s["actor_lr"]},
        {"params": [p for p in value.parameters() if p.requires_grad], "lr": s["critic_lr"]},
    ], lr=s["actor_lr"], eps=s["adam_eps"], weight_decay=s["weight_decay"])
    if s["max_grad_norm"] is not None:
        optimizer.register_step_pre_hook(_clip_each_group(s["max_grad_norm"]))
    scheduler = get_scheduler(s["lr_scheduler"], optimizer, num_warmup_steps=0,
                              num_training_steps=s["total_steps"])
    return optimizer, scheduler


def _clip_each_group(max_norm: float):
    """An optimizer step pre-hook clipping each parameter group's gradient norm (actor, critic) to
    `max_norm`, as verl clips its actor and critic. It runs on the optimizer's real steps only (after
    gradient accumulation and, with several processes, after the gradients were averaged)."""
    def hook(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                torch.nn.utils.clip_grad_norm_(params, max_norm)
    return hook
