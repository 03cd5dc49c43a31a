"""Rule sample_bon: bon.n samples per evaluation question for one shard (prbench.downstream.bon.sample_bon)."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.downstream.bon import sample_bon

sm = snakemake
sample_bon(
    prompts_path=sm.input.prompts,
    policy_spec=dict(sm.params.policy),
    bon_cfg=dict(sm.params.bon),
    seed=sm.params.seed,
    shard=int(sm.wildcards.shard),
    out_path=sm.output[0],
)
