"""Resume checkpoints shared by the trained-policy stages (PPO: `prbench.downstream.ppo.train`, GRPO:
`prbench.downstream.grpo.train`).

Both keep the newest complete checkpoint of a run as `{out_dir}/checkpoints/step-NNNNNN/`, holding
a `state.json` with the run's `fingerprint` (a hash of everything that determines the run): a
checkpoint counts once its `state.json` exists, and a new run resumes from the newest one only when
the fingerprints agree (`latest_checkpoint`); otherwise the stale checkpoints are removed.
"""
from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

from ..io import json_sha256, read_json
from ..models import resolve_model_ref

log = logging.getLogger("prbench.downstream.checkpoints")

CKPT_PREFIX = "step-"
STATE_NAME = "state.json"


def fingerprint(*parts) -> str:
    """Short content hash of `parts` (io.json_sha256 with ASCII escapes, as earlier checkpoints were hashed)."""
    return json_sha256(parts, ensure_ascii=True)[:16]


def file_digest(path) -> str:
    """sha256 of a file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def model_fingerprint(ref: str) -> str:
    """A model reference's identity: a local folder by the content of every file in it (weights
    included), anything else (a hub id) by the reference itself."""
    folder = Path(resolve_model_ref(str(ref)))
    if not folder.is_dir():
        return str(ref)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return fingerprint([[str(p.relative_to(folder)), file_digest(p)] for p in files])


def list_checkpoints(ckpt_root: Path) -> list[Path]:
    """Complete checkpoints (with their state.json), oldest first."""
    if not ckpt_root.exists():
        return []
    return sorted((p for p in ckpt_root.iterdir() if p.name.startswith(CKPT_PREFIX) and (p / STATE_NAME).exists()),
                  key=lambda p: int(p.name[len(CKPT_PREFIX):]))


def latest_checkpoint(ckpt_root: Path, fp: str, label: str, scratch: str = f".tmp-{CKPT_PREFIX}*") -> Path | None:
    """Newest complete checkpoint of this run; checkpoints of other settings are removed, and so
    are the half-written ones (`scratch`: the names a checkpoint has while it is written) of a
    run killed while saving."""
    if ckpt_root.exists():
        for tmp in ckpt_root.glob(scratch):
            shutil.rmtree(tmp, ignore_errors=True)
    ckpts = list_checkpoints(ckpt_root)
    if not ckpts:
        return None
    last = ckpts[-1]
    state = read_json(last / STATE_NAME)
    if state.get("fingerprint") != fp:
        log.warning("discarding %s checkpoints in %s: written with other settings (fingerprint %s != %s)",
                    label, ckpt_root, state.get("fingerprint"), fp)
        for p in ckpts:
            shutil.rmtree(p, ignore_errors=True)
        return None
    return last
