"""Snakemake entry point: one GRPO run (rule train_grpo)."""
import time

import torch

from prbench.downstream.grpo.train import train_grpo
from prbench.io import write_json
from prbench.log import setup_logging
from prbench.prompts import configure as configure_prompts

sm = snakemake  # noqa: F821 - injected by Snakemake
configure_prompts(sm.params.prompts)
log = setup_logging(sm.log[0])
torch.set_num_threads(max(1, sm.threads))
t0 = time.time()
summary = train_grpo(sm.params.policy_path, dict(sm.params.rm_spec), sm.input.prompts, sm.params.out_dir,
                     sm.output.model, sm.output.train_log, dict(sm.params.grpo), sm.params.seed,
                     run_name=f"{sm.wildcards.policy}/{sm.wildcards.rm}", trust_remote_code=sm.params.trust_remote_code)
summary["seconds"] = round(time.time() - t0, 1)
write_json(sm.output.summary, summary)
log.info("GRPO %s/%s done: %s", sm.wildcards.policy, sm.wildcards.rm, summary)
