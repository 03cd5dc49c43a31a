"""How every workflow script (workflow_scripts/*.py) begins: `log = start(snakemake)` as its first
statement, its heavy imports after it, so what they log reaches the job's log file."""
from __future__ import annotations

import logging

from .log import setup_logging
from .prompts import configure as configure_prompts
from .revisions import configure as configure_revisions


def start(snakemake, *, torch_threads: bool = False) -> logging.Logger:
    """Set up one Snakemake job: log to its log file (and stderr), select the prompt templates when
    the job's params have `prompts` (config section `prompts`), and with `torch_threads` set torch's
    thread count to the job's threads (torch is imported only then), and point the revision lock at
    the config's `revisions.lock` (prbench.revisions: where hub loads find and record their commit; a
    location, not a param: moving it reruns nothing). Returns the "prbench" logger."""
    log = setup_logging(snakemake.log[0])
    cfg = getattr(snakemake, "config", None)
    revisions = cfg.get("revisions") if isinstance(cfg, dict) else None
    configure_revisions(revisions.get("lock") if isinstance(revisions, dict) else None)
    if "prompts" in snakemake.params.keys():
        configure_prompts(snakemake.params.prompts)
    if torch_threads:
        import torch

        torch.set_num_threads(max(1, int(snakemake.threads)))
    return log
