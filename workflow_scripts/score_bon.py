"""Rule score_bon: one RM scores every BoN sample (prbench.downstream.bon.score_bon)."""
from prbench.downstream.bon import score_bon
from prbench.log import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
import torch  # noqa: E402

from prbench.prompts import configure as configure_prompts

configure_prompts(snakemake.params.prompts)

torch.set_num_threads(max(1, sm.threads))
score_bon(sm.input.samples, sm.input.prompts, dict(sm.params.spec), sm.output[0])
