"""Rule score_bon: one RM scores every BoN sample (prbench.downstream.bon.score_bon)."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.downstream.bon import score_bon

sm = snakemake
score_bon(sm.input.samples, sm.input.prompts, dict(sm.params.spec), sm.output[0])
