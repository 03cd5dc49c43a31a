"""Rule train_demo_rm: fine-tune one demo RM (prbench.training.rm.train_demo_rm)."""
from prbench.job import start

start(snakemake)

from prbench.training.rm import train_demo_rm

sm = snakemake
train_demo_rm(
    spec=sm.params.spec,
    train_files={k: v for k, v in sm.input.items()},
    out_dir=sm.output[0],
    train_cfg=sm.params.train,
    seed=sm.params.seed,
    threads=sm.threads,
)
