"""Rule train_demo_policy: train the demo policy from scratch (prbench.training.policy.train_demo_policy)."""
from prbench.job import start

start(snakemake)

from prbench.training.policy import train_demo_policy

sm = snakemake
train_demo_policy(
    train_path=sm.input.train,
    out_dir=sm.output[0],
    cfg=dict(sm.params.train),
    seed=sm.params.seed,
    threads=sm.threads,
)
