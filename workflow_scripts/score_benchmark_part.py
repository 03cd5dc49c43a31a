"""Rule score_benchmark_part: one part of a split benchmark job (prbench.scoring.parts.score_part)."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.scoring.parts import score_part

sm = snakemake
score_part(
    bench_path=sm.input.bench,
    spec=sm.params.spec,
    part=int(sm.wildcards.part),
    parts=int(sm.params.parts),
    pairs_out=sm.output.pairs,
    info_out=sm.output.info,
    bench=sm.wildcards.bench,
    seed=sm.params.seed,
    scoring=sm.params.scoring,
)
