"""Rule merge_samples: deterministic merge of the sample shards (prbench.downstream.bon.merge_samples)."""
from prbench.job import start

start(snakemake)

from prbench.downstream.bon import merge_samples

sm = snakemake
merge_samples(list(sm.input), sm.output[0], n=sm.params.n)
