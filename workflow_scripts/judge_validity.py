"""Rule judge_validity: does the judge score chosen above rejected on the test pairs? (prbench.judge)"""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.judge import judge_validity

sm = snakemake
judge_validity(sm.input.bench, sm.input.judge_keys, dict(sm.params.judge), sm.params.seed, sm.params.cache,
               sm.output[0], n_boot=sm.params.bootstrap)
