"""Snakemake entry point (rule base_answers): the untrained policy answers the evaluation questions
once (config keys ppo.eval_*), for every trained-policy method."""
from prbench.job import start

log = start(snakemake, torch_threads=True)

from prbench.downstream.evaluation import write_base_answers

sm = snakemake
n = write_base_answers(sm.params.policy_path, sm.input.prompts, sm.output[0], dict(sm.params.ppo), sm.params.seed,
                       trust_remote_code=sm.params.trust_remote_code, revision=sm.params.revision)
log.info("base policy %s: %d answers", sm.wildcards.policy, n)
