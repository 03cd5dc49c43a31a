"""Snakemake entry point: a trained policy (PPO, GRPO: wildcard method) answers the eval
questions; the cached judge scores them and the base policy's answers (rule eval_policy)."""
import torch

from prbench.downstream.evaluation import eval_policy
from prbench.log import setup_logging
from prbench.prompts import configure as configure_prompts

configure_prompts(snakemake.params.prompts)

sm = snakemake  # noqa: F821 - injected by Snakemake
log = setup_logging(sm.log[0])
torch.set_num_threads(max(1, sm.threads))
res = eval_policy(sm.input.model, sm.input.base, sm.input.prompts, sm.input.judge_keys, dict(sm.params.judge),
                  sm.params.cache, sm.output[0], dict(sm.params.ppo), sm.params.seed,
                  trust_remote_code=sm.params.trust_remote_code)
log.info("%s eval %s/%s: %s", sm.wildcards.method, sm.wildcards.policy, sm.wildcards.rm, res)
