"""Rule bon_measures: every (policy, RM) best-of-k curves file -> results/downstream/bon.csv."""
from prbench.downstream.bon import write_bon_measures
from prbench.log import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
log = setup_logging(sm.log[0])
curves = {(p, r): path for (p, r), path in zip(sm.params.runs, sm.input.curves)}
df = write_bon_measures(curves, sm.output[0])
log.info("BoN measures: %d rows, %d runs", len(df), len(curves))
