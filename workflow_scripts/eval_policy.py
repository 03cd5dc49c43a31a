"""Snakemake entry point: a trained policy (PPO, GRPO: wildcard method) answers the eval
questions; the cached judge scores them and the base policy's answers (rule eval_policy)."""
from prbench.job import start

log = start(snakemake, torch_threads=True)

from prbench.downstream.evaluation import eval_policy

sm = snakemake
res = eval_policy(sm.input.model, sm.input.base, sm.input.prompts, sm.input.judge_keys, dict(sm.params.judge),
                  sm.params.cache, sm.output[0], dict(sm.params.ppo), sm.params.seed,
                  trust_remote_code=sm.params.trust_remote_code,
                  subset=sm.params.get("subset"))  # ppo.per_subset: rule eval_policy_subset, one subset's questions
log.info("eval %s: %s", "/".join(sm.wildcards), res)
