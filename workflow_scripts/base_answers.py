"""Snakemake entry point: the untrained policy answers the PPO evaluation questions once."""
import torch

from prbench.downstream.evaluation import write_base_answers
from prbench.log import setup_logging
from prbench.prompts import configure as configure_prompts

configure_prompts(snakemake.params.prompts)

sm = snakemake  # noqa: F821 - injected by Snakemake
log = setup_logging(sm.log[0])
torch.set_num_threads(max(1, sm.threads))
n = write_base_answers(sm.params.policy_path, sm.input.prompts, sm.output[0], dict(sm.params.ppo), sm.params.seed,
                       trust_remote_code=sm.params.trust_remote_code)
log.info("base policy %s: %d answers", sm.wildcards.policy, n)
