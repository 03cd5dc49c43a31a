"""Rule calibrate_judge: fit the minilm judge's 0/1/2 thresholds on the train split (prbench.judge)."""
from prbench.judge import calibrate_judge_files
from prbench.log import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
import torch  # noqa: E402

from prbench.prompts import configure as configure_prompts

configure_prompts(snakemake.params.prompts)

torch.set_num_threads(max(1, sm.threads))
calibrate_judge_files(list(sm.input), dict(sm.params.judge), sm.params.seed, sm.output[0], sm.params.max_pairs)
