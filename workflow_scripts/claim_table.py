"""Snakemake entry point (rule claim_table): results/tables/{ppo,grpo}_claim.csv, the learning claim
fixed in the config (ppo.claim, grpo.claim) per training seed and pooled (prbench.downstream.claim)."""
from prbench.job import start

log = start(snakemake)

from prbench.downstream.claim import write_claim_table

sm = snakemake
df = write_claim_table(sm.params.runs, list(sm.input.judged), list(sm.input.train_logs), sm.output[0],
                       training_seeds={int(k): int(v) for k, v in sm.params.training_seeds.items()})
log.info("%s:\n%s", sm.output[0], df.to_string(index=False))
