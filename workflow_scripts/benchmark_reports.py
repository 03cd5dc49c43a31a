"""Rule benchmark_reports: accuracy by answer position (pairwise RMs) and chosen-minus-rejected score
margins (pointwise RMs) beside the accuracy table (prbench.scoring.benchmark.benchmark_reports)."""
from prbench.job import start

log = start(snakemake)

from prbench.scoring.benchmark import benchmark_reports

sm = snakemake
pos, margin = benchmark_reports(list(sm.input.acc), list(sm.input.pairs), sm.output.position, sm.output.margin,
                                n_boot=sm.params.bootstrap, seed=sm.params.seed)
log.info("wrote %s (%d rows), %s (%d rows)", sm.output.position, len(pos), sm.output.margin, len(margin))
if len(pos):
    log.info("position, overall:\n%s", pos[pos.level == "overall"].to_string(index=False))
if len(margin):
    log.info("margin, overall:\n%s", margin[margin.level == "overall"].to_string(index=False))
