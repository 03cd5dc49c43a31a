"""Snakemake entry point: one PPO run (rule train_ppo). Resumes from its last checkpoint."""
import time

from prbench.job import start

log = start(snakemake, torch_threads=True)

from prbench.downstream.ppo.launch import run_ppo_job
from prbench.io import write_json

sm = snakemake
t0 = time.time()
# One training process per GPU the job holds; the RM gets the last GPU when there is more than one
# (prbench.downstream.ppo.launch). 0-1 GPUs: a single process, as before.
gpus = int(sm.resources.get("gpu", 0) or 0)
processes = gpus - 1 if gpus > 1 else 1
ppo_cfg = dict(sm.params.ppo)
if sm.params.generation_chunk is not None:  # the memory plan's rows per rollout generate call
    ppo_cfg["rollout_generation_batch_size"] = sm.params.generation_chunk
spec = dict(policy_path=sm.params.policy_path, rm_spec=dict(sm.params.rm_spec), train_prompts=sm.input.prompts,
            out_dir=sm.params.out_dir, model_out=sm.output.model, log_csv=sm.output.train_log,
            ppo_cfg=ppo_cfg, seed=sm.params.seed, run_name="/".join(sm.wildcards),
            trust_remote_code=sm.params.trust_remote_code, revision=sm.params.revision, log=sm.log[0],
            prompts=dict(sm.params.prompts),
            subset=sm.params.get("subset"))  # ppo.per_subset: rule train_ppo_subset
log.info("train_ppo: %d GPU(s) -> %d training process(es)", gpus, processes)
summary = run_ppo_job(spec, processes)
summary["seconds"] = round(time.time() - t0, 1)
write_json(sm.output.summary, summary)
log.info("PPO %s/%s done: %s", sm.wildcards.policy, sm.wildcards.rm, summary)
