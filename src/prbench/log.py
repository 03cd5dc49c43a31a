"""Logging for workflow scripts: everything goes to the rule's log file and stderr."""
from __future__ import annotations

import logging
import sys
from pathlib import Path


def setup_logging(path: str | None = None, level: int = logging.INFO) -> logging.Logger:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(path, mode="w", encoding="utf-8"))
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        handlers=handlers, force=True)
    sys.excepthook = _log_uncaught
    return logging.getLogger("prbench")


def _log_uncaught(kind, value, tb) -> None:
    """An exception that ends the job goes to its log file too (stderr through the same handlers):
    a failed job's log says why it failed (a partial run's missing_rms.csv points at these logs)."""
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    logging.getLogger("prbench").critical("job failed: %s: %s", kind.__name__, value, exc_info=(kind, value, tb))
