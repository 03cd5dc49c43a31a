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

    The cyclic collector: off while start imports, then what is alive (the interpreter's modules,
    and torch's where `torch_threads` imports it) moved to its permanent generation, and its first
    threshold raised from 700 to JOB_GC_THRESHOLDS' 20,000 allocations for the job's life. A model
    job spent about 0.9 CPU-s in the collector, most of it rescanning the modules alive while
    transformers' were imported (imported later, so not frozen; perf/README.md, "CI time"). The
    numbers a job computes do not change. Garbage in reference cycles is still collected: the young
    generation's after 20,000 allocations, the older generations' about 10 and 100 times less often
    (the default 700, 10, 10, scaled)."""
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
