"""Prefetch for compute nodes without internet (docs/CLUSTER.md, "Offline compute nodes").

    python -m prbench.prefetch --configfile config.yaml            # login node: download
    HF_HUB_OFFLINE=1 python -m prbench.prefetch --configfile config.yaml --check   # verify offline

Every hub model and dataset the config names (prbench.manifest.config_refs: keys `path`, `model`,
`base` and `source`) is downloaded with `huggingface_hub.snapshot_download` into the Hugging Face
cache (HF_HOME / HF_HUB_CACHE) at the entry's `revision` when it has one, else at the commit the
revision lock holds for it (prbench.revisions, config `revisions.lock`), else the repository's
default branch (then `python -m prbench.revisions --refresh` locks what was fetched). Local folders
are checked to exist, `pkg:` models to be installed, folders under results/ are made by the workflow
and skipped. The prompt files `prompts.remote` maps (prbench.prompt_source) are downloaded into
the prompt cache (`prompts.remote.cache`) at the pinned commit. `--check` uses `local_files_only=True`
(and reads the prompt cache only): it passes only when everything a job would load is already local,
which is what a run with HF_HUB_OFFLINE=1 needs. Exit status 1 when anything is missing, with one line
per missing artefact naming its config key.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import prompt_source
from .manifest import config_refs
from .models import PKG_PREFIX, looks_local, resolve_model_ref
from .revisions import configure as configure_lock
from .revisions import locked


def plan(config: dict, basedir: str | os.PathLike = ".") -> list[dict]:
    """One row per reference: key, ref, kind (model|dataset|prompt), revision, where
    (hub|local|package|built|prompt); a prompt row also carries its `spec` and repository `path`."""
    rows = []
    for key, r in config_refs(config).items():
        ref = r["ref"]
        if ref.startswith(PKG_PREFIX):
            where = "package"
        elif ref.startswith("results/"):
            where = "built"
        elif looks_local(ref) or (Path(basedir) / os.path.expanduser(ref)).exists():
            where = "local"
        else:
            where = "hub"
        rev = r["revision"] or (locked(ref, r["kind"]) if where == "hub" else None)
        rows.append({"key": key, "ref": ref, "kind": r["kind"], "revision": rev, "where": where})
    spec = prompt_source.remote_spec(config.get("prompts"))
    for role, path in prompt_source.remote_files(config.get("prompts")).items():
        rows.append({"key": f"prompts.remote.files.{role}", "ref": f"{spec['repo']}:{path}", "kind": "prompt",
                     "revision": spec["commit"], "where": "prompt", "spec": spec, "path": path})
    return rows


def fetch_one(row: dict, *, check: bool, basedir: str | os.PathLike = ".") -> tuple[bool, str]:
    """(ok, message) for one planned reference."""
    if row["where"] == "prompt":  # a prompt file at a pinned commit: the prompt cache, else downloaded
        cached = prompt_source.cache_file(row["spec"], row["path"], basedir)
        if cached.is_file():
            return True, str(cached)
        if check:
            return False, f"not in the prompt cache ({cached})"
        try:
            return True, str(prompt_source.fetch(row["spec"], row["path"], basedir, row["key"].rsplit(".", 1)[1]))
        except FileNotFoundError as e:
            return False, f"download failed ({e})"
    if row["where"] == "built":
        return True, "made by the workflow"
    if row["where"] == "package":
        try:
            return True, resolve_model_ref(row["ref"])
        except FileNotFoundError as e:
            return False, str(e)
    if row["where"] == "local":
        path = Path(basedir) / os.path.expanduser(row["ref"])
        return (True, str(path)) if path.exists() else (False, f"local path {path} does not exist")
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo_id=row["ref"], repo_type=row["kind"], revision=row["revision"],
                                   local_files_only=check)
    except Exception as e:  # offline and not cached, unknown repo or revision, network
        how = "not in the local cache" if check else "download failed"
        return False, f"{how} ({type(e).__name__}: {e})"
    return True, folder


def run(config: dict, *, check: bool, basedir: str | os.PathLike = ".", out=sys.stdout) -> int:
    bad = 0
    for row in plan(config, basedir):
        ok, msg = fetch_one(row, check=check, basedir=basedir)
        bad += not ok
        rev = f"@{row['revision']}" if row["revision"] else ""
        print(f"{'ok  ' if ok else 'MISSING'} {row['key']}: {row['ref']}{rev} [{row['where']}] {msg}", file=out)
    print(f"{'all present' if not bad else f'{bad} missing'} ({'checked offline' if check else 'prefetched'})",
          file=out)
    return 1 if bad else 0


def main(argv=None) -> int:
    import yaml

    from .config import validate_schema

    ap = argparse.ArgumentParser(prog="python -m prbench.prefetch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", default="config.yaml")
    ap.add_argument("--check", action="store_true", help="only check the local cache (local_files_only)")
    args = ap.parse_args(argv)
    path = Path(args.configfile)
    config = validate_schema(yaml.safe_load(path.read_text(encoding="utf-8")))
    configure_lock(config["revisions"]["lock"])
    return run(config, check=args.check, basedir=".")


if __name__ == "__main__":
    sys.exit(main())
