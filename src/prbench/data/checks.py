"""Bad-data handling shared by every adapter.

Policy (never silent):
- a missing field, a wrong type or a malformed nested record raises `DataError` naming the
  file (or hub dataset), the row and the field;
- an empty answer, an empty question, chosen == rejected, and a duplicate id whose content
  is identical to an earlier row are dropped, counted by reason and listed (first ids) in the
  report written to `results/data/reports/{bench}.json` and to the log;
- a duplicate id with *different* content raises `DataError`: dropping either row would
  silently pick one of two conflicting records.
"""
from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..io import json_sha256

log = logging.getLogger("prbench.data")

MAX_EXAMPLES = 10


class DataError(ValueError):
    """Bad input data; the message names the file, the row and the field."""


def where(origin: str, row: int | str) -> str:
    return f"{origin}: row {row}"


def require(rec: Any, key: str, origin: str, row: int | str, kind: type | tuple = str, path: str = "") -> Any:
    """Return rec[key]; raise DataError naming file/row/field when missing or of the wrong type."""
    name = f"{path}{key}"
    if not isinstance(rec, dict):
        raise DataError(f"{where(origin, row)}: expected an object for field {path.rstrip('.') or '<row>'!r}, "
                        f"got {type(rec).__name__}")
    if key not in rec or rec[key] is None:
        raise DataError(f"{where(origin, row)}: missing field {name!r}")
    val = rec[key]
    if kind is str and isinstance(val, (int,)) and not isinstance(val, bool) and key == "id":
        return str(val)  # RewardBench ids are integers on the hub
    if not isinstance(val, kind):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DataError(f"{where(origin, row)}: field {name!r} must be {want}, got {type(val).__name__}")
    return val


def is_blank(text: str) -> bool:
    return not text or not text.strip()


def content_hash(obj: Any) -> str:
    return json_sha256(obj)


@dataclass
class DropLog:
    """Counts rows read / kept / dropped by reason, with the first few ids per reason."""

    name: str
    read: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=lambda: defaultdict(list))
    notes: list = field(default_factory=list)

    def drop(self, reason: str, ident: str, origin: str = "", row: int | str = "") -> None:
        self.dropped[reason] += 1
        if len(self.examples[reason]) < MAX_EXAMPLES:
            self.examples[reason].append(str(ident))
        log.warning("%s: dropped %s (%s) at %s", self.name, ident, reason, where(origin, row) if origin else "?")

    def note(self, text: str) -> None:
        self.notes.append(text)
        log.warning("%s: %s", self.name, text)

    def as_dict(self) -> dict:
        return {
            "read": self.read,
            "kept": self.kept,
            "dropped": dict(sorted(self.dropped.items())),
            "dropped_total": int(sum(self.dropped.values())),
            "drop_examples": {k: list(v) for k, v in sorted(self.examples.items())},
            "notes": list(self.notes),
        }


class DuplicateGuard:
    """Tracks ids: an identical repeat is a counted drop, a conflicting repeat is an error."""

    def __init__(self, origin_label: str):
        self.seen: dict[str, tuple[str, str]] = {}
        self.origin_label = origin_label

    def check(self, ident: str, record: Any, origin: str, row: int | str) -> bool:
        """True when the row is new; False when it repeats an identical earlier row."""
        h = content_hash(record)
        if ident in self.seen:
            prev_h, prev_where = self.seen[ident]
            if prev_h != h:
                raise DataError(
                    f"{where(origin, row)}: duplicate id {ident!r} with different content "
                    f"(first seen at {prev_where}); refusing to pick one silently"
                )
            return False
        self.seen[ident] = (h, where(origin, row))
        return True


def check_pair_texts(question: str, chosen: str, rejected: str, ident: str, drops: DropLog,
                     origin: str, row: int | str) -> bool:
    """Counted drops for an empty question/answer or chosen == rejected. True = keep."""
    if is_blank(question):
        drops.drop("empty_question", ident, origin, row)
        return False
    if is_blank(chosen) or is_blank(rejected):
        drops.drop("empty_answer", ident, origin, row)
        return False
    if chosen.strip() == rejected.strip():
        drops.drop("chosen_equals_rejected", ident, origin, row)
        return False
    return True


def log_report(report: dict) -> None:
    for part, d in report.get("splits", {}).items():
        log.info("%s [%s]: read %d, kept %d, dropped %d %s", report.get("benchmark"), part, d["read"], d["kept"],
                 d["dropped_total"], d["dropped"] or "")
