"""Rule accuracy_table: the tidy results/tables/benchmark_accuracy.csv (prbench.scoring.benchmark.accuracy_table)."""
from prbench.log import setup_logging
from prbench.scoring.benchmark import accuracy_table

sm = snakemake  # noqa: F821 (injected by Snakemake)
log = setup_logging(sm.log[0])
df = accuracy_table(list(sm.input.acc), sm.output[0], pairs_paths=list(sm.input.pairs), n_boot=sm.params.bootstrap,
                    seed=sm.params.seed)
log.info("wrote %s (%d rows)\n%s", sm.output[0], len(df), df[df.level == "overall"].to_string(index=False))
