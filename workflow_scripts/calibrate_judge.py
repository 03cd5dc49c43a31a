"""Rule calibrate_judge: fit the minilm judge's 0/1/2 thresholds on the train split (prbench.judge)."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.judge import calibrate_judge_files

sm = snakemake
calibrate_judge_files(list(sm.input), dict(sm.params.judge), sm.params.seed, sm.output[0], sm.params.max_pairs)
