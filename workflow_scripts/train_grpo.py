"""Snakemake entry point: one GRPO run (rule train_grpo)."""
import time

from prbench.job import start

log = start(snakemake, torch_threads=True)

from prbench.downstream.grpo.train import train_grpo
from prbench.io import write_json

sm = snakemake
t0 = time.time()
summary = train_grpo(sm.params.policy_path, dict(sm.params.rm_spec), sm.input.prompts, sm.params.out_dir,
                     sm.output.model, sm.output.train_log, dict(sm.params.grpo), sm.params.seed,
                     run_name=f"{sm.wildcards.policy}/{sm.wildcards.rm}", trust_remote_code=sm.params.trust_remote_code,
                     revision=sm.params.revision)
summary["seconds"] = round(time.time() - t0, 1)
write_json(sm.output.summary, summary)
log.info("GRPO %s/%s done: %s", sm.wildcards.policy, sm.wildcards.rm, summary)
