"""Snakemake entry point (rules ppo_table, grpo_table): results/tables/{ppo,grpo}.csv from every
run's eval_judged.jsonl and train_log.csv (the reward rise)."""
from prbench.job import start

log = start(snakemake)

from prbench.downstream.evaluation import write_policy_table

sm = snakemake
runs = {}  # (policy, rm, replicate) -> its runs' files: one, or one per subset (ppo.per_subset)
train_logs = {}  # (policy, rm, replicate) -> {subset ("" = every subset): train_log.csv}
for (p, r, subset, rep), path, train_log in zip(sm.params.runs, sm.input.judged, sm.input.train_logs):
    runs.setdefault((p, r, rep), []).append(path)
    train_logs.setdefault((p, r, rep), {})[subset] = train_log
df = write_policy_table(runs, sm.output[0], n_boot=sm.params.bootstrap, seed=sm.params.seed, train_logs=train_logs)
log.info("%s:\n%s", sm.output[0], df.to_string(index=False))
