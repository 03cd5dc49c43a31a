"""Rule merge_samples: deterministic merge of the sample shards (prbench.downstream.bon.merge_samples)."""
from prbench.downstream.bon import merge_samples
from prbench.log import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
merge_samples(list(sm.input), sm.output[0], n=sm.params.n)
