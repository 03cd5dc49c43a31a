"""Rule score_benchmark: accuracy of one RM on one benchmark (prbench.scoring.benchmark.score_benchmark)."""
import torch

from prbench.log import setup_logging
from prbench.prompts import configure as configure_prompts
from prbench.scoring.benchmark import score_benchmark

configure_prompts(snakemake.params.prompts)

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
torch.set_num_threads(max(1, int(sm.threads)))
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
