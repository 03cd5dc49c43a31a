"""Rule accuracy_table: the tidy results/tables/benchmark_accuracy.csv (prbench.scoring.benchmark.accuracy_table)."""
from prbench.job import start

log = start(snakemake)

from prbench.scoring.benchmark import accuracy_table

sm = snakemake
df = accuracy_table(list(sm.input.acc), sm.output[0], pairs_paths=list(sm.input.pairs), n_boot=sm.params.bootstrap,
                    seed=sm.params.seed)
log.info("wrote %s (%d rows)\n%s", sm.output[0], len(df), df[df.level == "overall"].to_string(index=False))
