"""Snakemake entry point (rules ppo_table, grpo_table): results/tables/{ppo,grpo}.csv from every
run's eval_judged.jsonl."""
from prbench.job import start

log = start(snakemake)

from prbench.downstream.evaluation import write_policy_table

sm = snakemake
runs = {(p, r): path for (p, r), path in zip(sm.params.runs, sm.input.judged)}
df = write_policy_table(runs, sm.output[0], n_boot=sm.params.bootstrap, seed=sm.params.seed)
log.info("%s:\n%s", sm.output[0], df.to_string(index=False))
