"""Snakemake entry point: one PPO run (rule train_ppo). Resumes from its last checkpoint."""
import time

import torch

from prbench.io import write_json
from prbench.log import setup_logging
from prbench.ppo import train_ppo
from prbench.prompts import configure as configure_prompts

configure_prompts(snakemake.params.prompts)

sm = snakemake  # noqa: F821 - injected by Snakemake
log = setup_logging(sm.log[0])
torch.set_num_threads(max(1, sm.threads))
t0 = time.time()
summary = train_ppo(
    sm.params.policy_path, dict(sm.params.rm_spec), sm.input.prompts, sm.params.out_dir,
    sm.output.model, sm.output.train_log, dict(sm.params.ppo), sm.params.seed,
    run_name=f"{sm.wildcards.policy}/{sm.wildcards.rm}", trust_remote_code=sm.params.trust_remote_code,
)
summary["seconds"] = round(time.time() - t0, 1)
write_json(sm.output.summary, summary)
log.info("PPO %s/%s done: %s", sm.wildcards.policy, sm.wildcards.rm, summary)
