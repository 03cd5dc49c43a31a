"""Rule train_demo_rm: fine-tune one demo RM (prbench.training.rm.train_demo_rm)."""
from prbench.log import setup_logging
from prbench.training.rm import train_demo_rm

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
train_demo_rm(
    spec=sm.params.spec,
    train_files={k: v for k, v in sm.input.items()},
    out_dir=sm.output[0],
    train_cfg=sm.params.train,
    seed=sm.params.seed,
    threads=sm.threads,
)
