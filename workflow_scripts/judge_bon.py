"""Rule judge_bon: judge every unique sample once, through the shared cache (prbench.downstream.bon.judge_bon)."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.downstream.bon import judge_bon

sm = snakemake
judge_bon(sm.input.samples, sm.input.prompts, sm.input.judge_keys, dict(sm.params.judge), sm.params.seed,
          sm.params.cache, sm.output[0])
