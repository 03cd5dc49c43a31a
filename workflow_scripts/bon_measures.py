"""Rule bon_measures: every (policy, RM) best-of-k curves file -> results/downstream/bon.csv."""
from prbench.job import start

log = start(snakemake)

from prbench.downstream.bon import write_bon_measures

sm = snakemake
curves = {(p, r): path for (p, r), path in zip(sm.params.runs, sm.input.curves)}
df = write_bon_measures(curves, sm.output[0])
log.info("BoN measures: %d rows, %d runs", len(df), len(curves))
