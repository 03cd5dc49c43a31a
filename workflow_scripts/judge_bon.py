"""Rule judge_bon: judge every unique sample once, through the shared cache (prbench.downstream.bon.judge_bon)."""
from prbench.downstream.bon import judge_bon
from prbench.log import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
setup_logging(sm.log[0])
import torch  # noqa: E402

from prbench.prompts import configure as configure_prompts

configure_prompts(snakemake.params.prompts)

torch.set_num_threads(max(1, sm.threads))
judge_bon(sm.input.samples, sm.input.prompts, sm.input.judge_keys, dict(sm.params.judge), sm.params.seed,
          sm.params.cache, sm.output[0])
