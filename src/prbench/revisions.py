"""Pinned revisions and the revision lock (docs/DESIGN.md, "Revision lock").

Every hub model and dataset of the config may carry a `revision` (a commit hash, branch or tag) on
its entry. What a job loads (`resolve`):

1. the entry's pinned `revision`, when set;
2. else the commit recorded for that hub id in the lock file (config key `revisions.lock`, default
   results/revisions.lock.json, kept with the results like a package lock);
3. else nothing: the first load takes the repository's default branch and records the commit it
   resolved (`record_loaded`: the model config's `_commit_hash`, else the local Hugging Face cache's
   refs/main) in the lock, so every later run loads exactly that commit.

Local folders, `pkg:` models and folders the workflow builds have no revision: the folder is the pin.
`trust_remote_code` on a hub id runs only at a pinned or locked commit (`check_remote_code`).

    python -m prbench.revisions --check   [--configfile F]   # each ref and what a job would load
    python -m prbench.revisions --refresh [--configfile F]   # re-resolve every unpinned ref, rewrite the lock

`--refresh` reads the commit of the default branch (or the entry's branch or tag) from the local
cache (works with HF_HUB_OFFLINE=1 after `make prefetch`), or asks the hub when online and the cache
does not hold it. The lock is written atomically (temporary file + rename) under an exclusive file
lock, so Snakemake jobs that load models side by side each add their entry without losing another's.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import tempfile
from pathlib import Path

from .manifest import config_refs, hub_cache_revision
from .models import PKG_PREFIX, looks_local

log = logging.getLogger("prbench.revisions")

LOCK_DEFAULT = "results/revisions.lock.json"
LOCK_ENV = "PRBENCH_REVISIONS_LOCK"
LOCK_VERSION = 1
HASH_RE = re.compile(r"^[0-9a-f]{40}$")
# a branch, tag or commit: git ref characters, no spaces, no '..'
REVISION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")

_lock_path: str | None = None


def configure(path: str | os.PathLike | None) -> None:
    """Set the lock file this process and the processes it starts (PPO's torchrun workers, through
    PRBENCH_REVISIONS_LOCK) read and write: prbench.job.start passes config `revisions.lock`.
    None = results/revisions.lock.json."""
    global _lock_path
    _lock_path = str(path) if path else None
    if path:
        os.environ[LOCK_ENV] = str(path)
    else:
        os.environ.pop(LOCK_ENV, None)


def lock_path() -> Path:
    return Path(_lock_path or os.environ.get(LOCK_ENV) or LOCK_DEFAULT)


def is_hub(ref: str, basedir: str | os.PathLike = ".") -> bool:
    """True for a hub id: not `pkg:`, not a path, not an existing local folder."""
    if not ref or ref.startswith(PKG_PREFIX) or looks_local(ref):
        return False
    return not (Path(basedir) / os.path.expanduser(ref)).exists()


def check_revision_value(revision, key: str) -> None:
    """A revision must be a commit hash, branch or tag name; raise naming the config key if not."""
    if revision is None:
        return
    if not isinstance(revision, str) or not REVISION_RE.match(revision) or ".." in revision:
        raise ValueError(f"config key {key}: revision {revision!r} is not a commit hash, branch or tag name")


def _lock_id(ref: str, kind: str) -> str:
    return f"{kind}:{ref}"


def read_lock(path: str | os.PathLike | None = None) -> dict:
    """{"<kind>:<hub id>": {"commit", "key"}} of the lock file ({} when it does not exist)."""
    p = Path(path) if path else lock_path()
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"revision lock {p}: not valid JSON ({exc}); fix it or rebuild it with "
                         "`python -m prbench.revisions --refresh`") from exc
    refs = data.get("refs") if isinstance(data, dict) else None
    if not isinstance(refs, dict):
        raise ValueError(f"revision lock {p}: no 'refs' object; rebuild it with "
                         "`python -m prbench.revisions --refresh`")
    for k, v in refs.items():
        if not isinstance(v, dict) or not isinstance(v.get("commit"), str) or not HASH_RE.match(v["commit"]):
            raise ValueError(f"revision lock {p}: entry {k!r} has no 40-hex 'commit'")
    return refs


def locked(ref: str, kind: str = "model", path: str | os.PathLike | None = None) -> str | None:
    entry = read_lock(path).get(_lock_id(ref, kind))
    return entry["commit"] if entry else None


def resolve(ref: str, kind: str = "model", pinned: str | None = None, basedir: str | os.PathLike = ".") -> str | None:
    """The revision a job loads `ref` at: the pinned one, else the lock's, else None (the first load:
    the default branch, recorded afterwards). None for local folders and `pkg:` models."""
    if not is_hub(ref, basedir):
        return None
    return pinned or locked(ref, kind)


def check_remote_code(ref: str, kind: str, pinned: str | None, trust_remote_code: bool, key: str) -> None:
    """Refuse remote code from a hub id that has neither a pinned revision nor a lock entry."""
    if trust_remote_code and is_hub(ref) and not resolve(ref, kind, pinned):
        entry = key.rsplit(".", 1)[0] if "." in key else key
        raise ValueError(
            f"config key {entry}.trust_remote_code: remote code of the hub {kind} {ref!r} runs only at a pinned or "
            f"locked commit, and it has neither a `revision` ({entry}.revision) nor an entry in the lock file "
            f"{lock_path()}. Set {entry}.revision to a commit hash, or run `python -m prbench.revisions --refresh` "
            "(make lock) to lock the commit your cache holds, after reading that code.")


def hub_kwargs(ref: str, kind: str = "model", pinned: str | None = None, *, key: str = "",
               trust_remote_code: bool = False) -> dict:
    """Keyword arguments for from_pretrained / load_dataset / snapshot_download: {"revision": ...}
    for a hub id with a pinned or locked revision, {} otherwise (local folders, first loads). Checks
    the remote-code rule first (`key`: the config key of the reference, e.g. reward_models.x.path)."""
    check_remote_code(ref, kind, pinned, trust_remote_code, key or ref)
    rev = resolve(ref, kind, pinned)
    return {"revision": rev} if rev else {}


def _commit_of(obj) -> str | None:
    for cand in (getattr(obj, "_commit_hash", None), getattr(getattr(obj, "config", None), "_commit_hash", None)):
        if isinstance(cand, str) and HASH_RE.match(cand):
            return cand
    return None


def record_loaded(ref: str, kind: str = "model", pinned: str | None = None, *, key: str = "",
                  loaded=None) -> str | None:
    """After a hub load with no pinned or locked revision: write the commit it resolved to the lock
    (a `_commit_hash` `loaded` or its config carries, which transformers 4 set, else the cache's
    refs/main, which the load itself wrote, else, online only, the hub's main). Returns the commit recorded,
    None when nothing was to record (local, pinned, already locked) or the commit is unknown (logged)."""
    if not is_hub(ref) or resolve(ref, kind, pinned):
        return None
    commit = _commit_of(loaded) or current_commit(ref, kind)[0]
    if not commit:
        log.warning("revision lock: could not tell which commit of the hub %s %r was loaded (config key %s); "
                    "run `python -m prbench.revisions --refresh` to lock it", kind, ref, key or "?")
        return None
    update_lock({_lock_id(ref, kind): {"commit": commit, "key": key}})
    log.info("revision lock %s: %s %s -> %s (first load, config key %s)", lock_path(), kind, ref, commit, key or "?")
    return commit


@contextlib.contextmanager
def _exclusive(path: Path):
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".flock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write(path: Path, refs: dict) -> None:
    text = json.dumps({"version": LOCK_VERSION, "refs": {k: refs[k] for k in sorted(refs)}}, indent=1,
                      sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def update_lock(entries: dict, *, replace: bool = False, path: str | os.PathLike | None = None) -> dict:
    """Add entries to the lock (or, with replace, write exactly these), atomically, under a file
    lock: an entry another job wrote meanwhile is kept, one already there is not overwritten."""
    p = Path(path) if path else lock_path()
    with _exclusive(p):
        refs = {} if replace else read_lock(p)
        for k, v in entries.items():
            if replace or k not in refs:
                refs[k] = v
        _write(p, refs)
    return refs


def current_commit(ref: str, kind: str, revision: str | None = None) -> tuple[str | None, str]:
    """(commit, where) the hub's `revision` (default branch when None) points at now: the local cache's
    refs first, then the hub unless HF_HUB_OFFLINE is set."""
    commit = hub_cache_revision(ref, kind, revision)
    if commit:
        return commit, "cache"
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return None, "not in the local cache (HF_HUB_OFFLINE=1)"
    try:
        from huggingface_hub import HfApi

        api = HfApi()
        info = (api.dataset_info if kind == "dataset" else api.model_info)(ref, revision=revision)
        return info.sha, "hub"
    except Exception as exc:  # offline, unknown repo, network
        return None, f"hub lookup failed ({type(exc).__name__}: {exc})"


def plan(config: dict, basedir: str | os.PathLike = ".") -> list[dict]:
    """One row per hub reference of the config: key, ref, kind, pinned, locked, loads (what a job loads)."""
    lock = read_lock()
    rows = []
    for key, r in config_refs(config).items():
        if not is_hub(r["ref"], basedir):
            continue
        entry = lock.get(_lock_id(r["ref"], r["kind"]))
        rows.append({"key": key, "ref": r["ref"], "kind": r["kind"], "pinned": r["revision"],
                     "locked": entry["commit"] if entry else None})
    for row in rows:
        row["loads"] = row["pinned"] or row["locked"] or "default branch (recorded at the first load)"
    return rows


def refresh(config: dict, basedir: str | os.PathLike = ".", out=None) -> int:
    """Re-resolve every unpinned hub reference and rewrite the lock; 1 when one could not be resolved."""
    out = sys.stdout if out is None else out
    entries, bad = {}, 0
    for row in plan(config, basedir):
        lid = _lock_id(row["ref"], row["kind"])
        if row["pinned"] or lid in entries:  # a pinned ref loads its pin (hash, branch or tag): never locked
            continue
        commit, where = current_commit(row["ref"], row["kind"])
        if commit:
            entries[lid] = {"commit": commit, "key": row["key"]}
            was = f" (was {row['locked']})" if row["locked"] and row["locked"] != commit else ""
            print(f"locked {row['key']}: {row['ref']} -> {commit} [{where}]{was}", file=out)
        else:
            bad += 1
            print(f"UNRESOLVED {row['key']}: {row['ref']} {where}", file=out)
    update_lock(entries, replace=True)
    print(f"{lock_path()}: {len(entries)} entries" + (f", {bad} unresolved" if bad else ""), file=out)
    return 1 if bad else 0


def check(config: dict, basedir: str | os.PathLike = ".", out=None) -> int:
    """Print each hub reference and the revision a job would load (pinned, locked, or first load)."""
    out = sys.stdout if out is None else out
    for row in plan(config, basedir):
        src = "pinned" if row["pinned"] else ("locked" if row["locked"] else "unlocked")
        print(f"{src:8s} {row['key']}: {row['ref']} -> {row['loads']}", file=out)
    print(f"lock file: {lock_path()}", file=out)
    return 0


def main(argv=None) -> int:
    import yaml

    from .config import validate_schema

    ap = argparse.ArgumentParser(prog="python -m prbench.revisions", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", default="config.yaml")
    ap.add_argument("--lock", help="lock file (default: the config's revisions.lock)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--refresh", action="store_true", help="re-resolve every unpinned hub ref and rewrite the lock")
    g.add_argument("--check", action="store_true", help="list each hub ref and the revision a job would load")
    args = ap.parse_args(argv)
    config = validate_schema(yaml.safe_load(Path(args.configfile).read_text(encoding="utf-8")))
    configure(args.lock or (config.get("revisions") or {}).get("lock"))
    return refresh(config) if args.refresh else check(config)


if __name__ == "__main__":
    sys.exit(main())
