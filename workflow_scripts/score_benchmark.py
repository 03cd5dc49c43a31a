"""Rule score_benchmark: accuracy of one RM on one benchmark (prbench.scoring.benchmark.score_benchmark)."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.scoring.benchmark import score_benchmark

sm = snakemake
score_benchmark(
    bench_path=sm.input.bench,
    spec=sm.params.spec,
    pairs_out=sm.output.pairs,
    acc_out=sm.output.accuracy,
    bench=sm.wildcards.bench,
    seed=sm.params.seed,
    scoring=sm.params.scoring,
    bench_kind=sm.params.bench_kind,
)
