"""Small, atomic file helpers shared by every stage (jsonl / json / csv)."""
from __future__ import annotations

import errno
import glob
import gzip
import hashlib
import json
import os
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator


def _open(path: Path, mode: str):
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def iter_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield rows of a jsonl file; a malformed line raises ValueError naming file and line."""
    path = Path(path)
    with _open(path, "r") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from exc


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return list(iter_jsonl(path))


def _atomic_target(path: Path):
    """A temp file beside `path` (same filesystem, so os.replace is atomic), with the
    permissions a plain open() would give (mkstemp alone creates 0600 files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A writer killed mid-write (SIGKILL, scancel) leaves its temp file; each output has one
    # writer (one Snakemake job), so the next write of `path` removes those leftovers.
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return Path(tmp)


@contextmanager
def _atomic_write(path: Path):
    """Yield a temp path beside `path`; on success it replaces `path`, on error it is removed."""
    tmp = _atomic_target(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OSError(e.errno, f"{path}: no space left on the device while writing it "
                          f"({e.strerror}); nothing was written there, free space and rerun") from e
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


# Fault injection for tests (tests/test_faults.py): with PRBENCH_FAULT_KILL_AFTER_ROWS=N, a process
# whose write_jsonl has written N rows of an output whose name contains PRBENCH_FAULT_MATCH (default:
# any) kills itself with SIGKILL, mid-write, like an OOM killer or scancel would.
FAULT_ROWS = "PRBENCH_FAULT_KILL_AFTER_ROWS"
FAULT_MATCH = "PRBENCH_FAULT_MATCH"


def _fault_point(path: Path):
    n = os.environ.get(FAULT_ROWS)
    if not n or os.environ.get(FAULT_MATCH, "") not in str(path):
        return None
    return int(n)


def _maybe_die(kill_at, n: int, fh) -> None:
    if kill_at is not None and n >= kill_at:
        fh.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    """Write rows atomically (temp file + rename); returns the number of rows."""
    path = Path(path)
    n = 0
    kill_at = _fault_point(path)
    with _atomic_write(path) as tmp:
        opener = (gzip.open(tmp, "wt", encoding="utf-8") if str(path).endswith(".gz")
                  else open(tmp, "w", encoding="utf-8"))
        with opener as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
                n += 1
                _maybe_die(kill_at, n, fh)
    return n


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with _atomic_write(Path(path)) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, ensure_ascii=False, sort_keys=True, default=_json_default)
            fh.write("\n")


def write_csv(path: str | os.PathLike, df, float_format: str = "%.6g") -> None:
    """Write a pandas DataFrame atomically with stable float formatting."""
    with _atomic_write(Path(path)) as tmp:
        df.to_csv(tmp, index=False, float_format=float_format)


def json_sha256(obj: Any, *, sort_keys: bool = True, ensure_ascii: bool = False, default=str) -> str:
    """Hex sha256 of `obj` serialised as compact JSON (json.dumps' separators): the one content
    hash of the pipeline. The keyword arguments are json.dumps'; callers that must keep an
    existing hash pass the ones that hash was made with."""
    text = json.dumps(obj, sort_keys=sort_keys, ensure_ascii=ensure_ascii, default=default)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _json_default(obj):
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
