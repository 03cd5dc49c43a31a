"""How every workflow script (workflow_scripts/*.py) begins: `log = start(snakemake)` as its first
statement, its heavy imports after it, so what they log reaches the job's log file."""
from __future__ import annotations

import gc
import logging

from .log import setup_logging
from .prompts import configure as configure_prompts
from .revisions import configure as configure_revisions


def start(snakemake, *, torch_threads: bool = False) -> logging.Logger:
    """Set up one Snakemake job: log to its log file (and stderr), select the prompt templates when
    the job's params have `prompts` (config section `prompts`), and with `torch_threads` set torch's
    thread count to the job's threads (torch is imported only then), and point the revision lock at
    the config's `revisions.lock` (prbench.revisions: where hub loads find and record their commit; a
    location, not a param: moving it reruns nothing). Returns the "prbench" logger.

    The cyclic collector: off while start imports, then what is alive (the interpreter's and
    torch's modules, some 10^5 objects) moved to its permanent generation, and its first threshold
    raised from 700 to JOB_GC_THRESHOLDS' 20,000 allocations for the job's life. A job process
    spent about 1 CPU-s in the collector, most of it rescanning those modules while transformers'
    were imported (perf/README.md, "CI time"); the numbers a job computes do not change, and garbage
    in reference cycles is still collected, after at most 20,000 allocations."""
    gc.disable()
    try:
        return _start(snakemake, torch_threads)
    finally:
        gc.freeze()
        gc.set_threshold(*JOB_GC_THRESHOLDS)
        gc.enable()


JOB_GC_THRESHOLDS = (20_000, 10, 10)


def _start(snakemake, torch_threads: bool) -> logging.Logger:
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
