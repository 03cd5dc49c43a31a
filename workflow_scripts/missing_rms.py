"""Snakemake entry point (rule missing_rms): the RMs a partial run leaves out (prbench.partial)."""
from prbench.job import start

log = start(snakemake)

from prbench import partial

partial.missing_table(dict(snakemake.params.missing), snakemake.output[0])
log.info("%s", partial.describe(dict(snakemake.params.missing)) or "complete run: no RM missing")
