"""Rule bon_measures: every (policy, RM, sample set) best-of-k curves file -> results/downstream/bon.csv."""
from prbench.job import start

log = start(snakemake)

from prbench.downstream.bon import write_bon_measures

sm = snakemake
curves = {(p, r, k): path for (p, r, k), path in zip(sm.params.runs, sm.input.curves)}  # k: sample set
df = write_bon_measures(curves, sm.output[0])
log.info("BoN measures: %d rows, %d runs", len(df), len(curves))
