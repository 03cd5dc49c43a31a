"""Rule judge_validity: does the judge score chosen above rejected on the test pairs? (prbench.judge)"""
from prbench.judge import judge_validity
from prbench.log import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
import torch  # noqa: E402

from prbench.prompts import configure as configure_prompts

configure_prompts(snakemake.params.prompts)

torch.set_num_threads(max(1, sm.threads))
judge_validity(sm.input.bench, sm.input.judge_keys, dict(sm.params.judge), sm.params.seed, sm.params.cache,
               sm.output[0], n_boot=sm.params.bootstrap)
