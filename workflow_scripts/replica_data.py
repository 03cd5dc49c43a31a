"""Rule replica_data: write the three benchmarks' small replica data in their hub schemas."""
from prbench.job import start

start(snakemake)

from prbench.replica.data import write_data

sm = snakemake
written = write_data(sm.params.out_dir, seed=sm.params.seed, **dict(sm.params.data))
missing = sorted(set(sm.output) - {f for files in written.values() for f in files})
if missing:
    raise RuntimeError(f"rule replica_data: outputs not written: {missing}")
