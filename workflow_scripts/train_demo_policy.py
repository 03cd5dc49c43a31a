"""Rule train_demo_policy: train the demo policy from scratch (prbench.training.policy.train_demo_policy)."""
from prbench.log import setup_logging
from prbench.prompts import configure as configure_prompts
from prbench.training.policy import train_demo_policy

configure_prompts(snakemake.params.prompts)

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
train_demo_policy(
    train_path=sm.input.train,
    out_dir=sm.output[0],
    cfg=dict(sm.params.train),
    seed=sm.params.seed,
    threads=sm.threads,
)
