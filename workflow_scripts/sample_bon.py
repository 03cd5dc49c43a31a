"""Rule sample_bon: bon.n samples per evaluation question for one shard (prbench.downstream.bon.sample_bon)."""
from prbench.downstream.bon import sample_bon
from prbench.log import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
import torch  # noqa: E402

from prbench.prompts import configure as configure_prompts

configure_prompts(snakemake.params.prompts)

torch.set_num_threads(max(1, sm.threads))
sample_bon(
    prompts_path=sm.input.prompts,
    policy_spec=dict(sm.params.policy),
    bon_cfg=dict(sm.params.bon),
    seed=sm.params.seed,
    shard=int(sm.wildcards.shard),
    out_path=sm.output[0],
)
