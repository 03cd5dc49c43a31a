"""Rule score_benchmark: accuracy of one RM on one benchmark (prbench.scoring.benchmark.score_benchmark),
or the join of a split job's parts (prbench.scoring.parts.merge_parts; no model, so no torch)."""
from prbench.job import start

start(snakemake, torch_threads=not snakemake.input.parts)

sm = snakemake
common = dict(bench_path=sm.input.bench, spec=sm.params.spec, pairs_out=sm.output.pairs, acc_out=sm.output.accuracy,
              bench=sm.wildcards.bench, seed=sm.params.seed, scoring=sm.params.scoring,
              bench_kind=sm.params.bench_kind)
if sm.input.parts:
    from prbench.scoring.parts import merge_parts

    merge_parts(part_pairs=list(sm.input.parts), part_infos=list(sm.input.part_info), **common)
else:
    from prbench.scoring.benchmark import score_benchmark

    score_benchmark(**common)
