"""Snakemake entry point (rules ppo_table, grpo_table): results/tables/{ppo,grpo}.csv from every
run's eval_judged.jsonl."""
from prbench.job import start

log = start(snakemake)

from prbench.downstream.evaluation import write_policy_table

sm = snakemake
runs = {}  # (policy, rm, replicate) -> its runs' files: one, or one per subset (ppo.per_subset)
for (p, r, _subset, rep), path in zip(sm.params.runs, sm.input.judged):
    runs.setdefault((p, r, rep), []).append(path)
df = write_policy_table(runs, sm.output[0], n_boot=sm.params.bootstrap, seed=sm.params.seed)
log.info("%s:\n%s", sm.output[0], df.to_string(index=False))
