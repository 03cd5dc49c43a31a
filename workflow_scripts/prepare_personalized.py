"""Rule prepare_personalized: canonical pairs, judge keys, train pairs, prompt rows, report."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.data.prepare import prepare_personalized

sm = snakemake
prepare_personalized(dict(sm.params.data), dict(sm.params.retriever), int(sm.params.seed), dict(sm.output.items()))
