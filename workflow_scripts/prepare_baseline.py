"""Rule prepare_baseline: canonical pairs (and the train split, if any) of one general baseline."""
from prbench.job import start

start(snakemake)

from prbench.data.prepare import prepare_baseline

sm = snakemake
prepare_baseline(sm.wildcards.baseline, dict(sm.params.cfg), dict(sm.output.items()))
