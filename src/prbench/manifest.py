"""The run manifest, results/manifest.json (rule `manifest`, docs/DESIGN.md "Run manifest"): what
produced the tables beside it. The git commit and dirty state of the checkout, the SHA-256 of the
validated config, Python and package versions, every model and dataset the config names (a hub id
with its pinned revision or the commit the local Hugging Face cache resolved, a local folder with a
digest of its file names, sizes, small config files and safetensors headers: no rehashing of
weights), the seeds, and the devices the manifest job saw. A separate file the report links, so the
tables stay byte-identical across commits that change nothing in them.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import struct
import subprocess
from importlib import metadata
from pathlib import Path

from .io import json_sha256
from .models import PKG_PREFIX, looks_local, resolve_model_ref

# Config keys whose string values name a model (hub id, local folder, pkg:) or a dataset source.
MODEL_KEYS = ("path", "model", "base")
DATA_KEYS = ("source",)
PACKAGES = ("torch", "transformers", "trl", "datasets", "huggingface_hub", "safetensors", "accelerate", "peft",
            "tokenizers", "numpy", "scipy", "pandas", "statsmodels", "matplotlib", "snakemake", "vllm")
# Files hashed whole in a folder digest (configs, tokenizers); anything else by name and size only.
SMALL_FILE_BYTES = 4 << 20


def config_refs(config: dict) -> dict[str, dict]:
    """{dotted config key: {"ref", "kind": model|dataset, "revision" (the entry's, or None)}} for every
    model and dataset reference in the config, in key order."""
    out: dict[str, dict] = {}

    def walk(node, key):
        if isinstance(node, dict):
            for k in sorted(node):
                v = node[k]
                dotted = f"{key}.{k}" if key else str(k)
                if isinstance(v, str) and k in MODEL_KEYS + DATA_KEYS:
                    out[dotted] = {"ref": v, "kind": "dataset" if k in DATA_KEYS else "model",
                                   "revision": node.get("revision") if isinstance(node.get("revision"), str) else None}
                else:
                    walk(v, dotted)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{key}[{i}]")

    walk(config, "")
    return out


def _safetensors_header(path: Path) -> str:
    """SHA-256 of a safetensors file's header (tensor names, dtypes, shapes, offsets): changes with
    the layout of the weights, read in one small read whatever the file's size."""
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return "unreadable: shorter than 8 bytes"
        (n,) = struct.unpack("<Q", head)
        if n > (100 << 20):
            return f"unreadable: header length {n}"
        return hashlib.sha256(head + fh.read(n)).hexdigest()


def folder_digest(path: str | os.PathLike) -> dict:
    """Digest of a local model or data folder (or file): every file's relative name and size, the
    SHA-256 of files under 4 MiB (configs, tokenizers, data shards of the replicas) and of the
    header of each .safetensors file. One sha256 over all of it plus the per-file list."""
    root = Path(path)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    entries = []
    for p in files:
        rel = p.name if p == root else p.relative_to(root).as_posix()
        size = p.stat().st_size
        entry = {"file": rel, "bytes": size}
        if p.suffix == ".safetensors":
            entry["header_sha256"] = _safetensors_header(p)
        elif size <= SMALL_FILE_BYTES:
            entry["sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
        entries.append(entry)
    return {"sha256": json_sha256(entries), "files": entries}


def hub_cache_revision(repo_id: str, kind: str, revision: str | None = None) -> str | None:
    """The commit the local Hugging Face cache resolved `revision` (default main) of a hub repo to,
    or None when the cache does not hold it. Reads the cache's refs file: no network."""
    from huggingface_hub import constants

    if revision and len(revision) == 40 and all(c in "0123456789abcdef" for c in revision):
        return revision
    folder = Path(constants.HF_HUB_CACHE) / f"{kind}s--{repo_id.replace('/', '--')}" / "refs" / (revision or "main")
    return folder.read_text().strip() if folder.is_file() else None


def describe_ref(ref: str, kind: str, revision: str | None, basedir: str | os.PathLike = ".") -> dict:
    """One model or dataset of the config, as the manifest records it."""
    if ref.startswith(PKG_PREFIX):
        pkg = ref[len(PKG_PREFIX):]
        path = resolve_model_ref(ref)
        return {"ref": ref, "source": "package", "package_version": _version(pkg), "digest": folder_digest(path)}
    if ref.startswith("results/"):
        return {"ref": ref, "source": "built", "digest": None, "note": "made by the workflow: digested below"}
    local = Path(basedir) / os.path.expanduser(ref)
    if looks_local(ref) or local.exists():
        if not local.exists():
            return {"ref": ref, "source": "local", "digest": None, "note": "not built yet (made by the workflow)"}
        return {"ref": ref, "source": "local", "digest": folder_digest(local)}
    return {"ref": ref, "source": "hub", "kind": kind, "revision_pinned": revision,
            "revision_resolved": hub_cache_revision(ref, kind, revision)}


def describe_refs(config: dict, basedir: str | os.PathLike = ".") -> dict:
    return {key: describe_ref(r["ref"], r["kind"], r["revision"], basedir) for key, r in config_refs(config).items()}


def git_state(repo: str | os.PathLike) -> dict:
    """The checkout's commit and whether its tracked files differ from it (None outside git)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")  # untracked files: not code that ran
    changed = [line[3:] for line in status.stdout.splitlines()]
    return {"commit": head.stdout.strip(), "dirty": bool(changed), "changed_files": sorted(changed)[:200]}


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg.replace("_", "-"))
    except metadata.PackageNotFoundError:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None


def package_versions() -> dict:
    return {"python": platform.python_version(), **{p: _version(p) for p in PACKAGES}}


def seeds(config: dict) -> dict:
    """Every config key whose name contains 'seed', dotted, with its value."""
    out = {}

    def walk(node, key):
        if isinstance(node, dict):
            for k in sorted(node):
                dotted = f"{key}.{k}" if key else str(k)
                if "seed" in str(k) and not isinstance(node[k], (dict, list)):
                    out[dotted] = node[k]
                else:
                    walk(node[k], dotted)

    walk(config, "")
    return out


# The CPU flags that change what a run computes or how fast (vector widths, native bf16 matmuls)
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "neon", "asimd")


def cpu_info(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> dict:
    """The CPU that made the run's tables: model name, vendor, family and model, and which of
    CPU_FLAGS it has (first processor of /proc/cpuinfo; elsewhere platform.processor() only)."""
    fields: dict[str, str] = {}
    try:
        for line in Path(cpuinfo).read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.strip():
                if fields:
                    break  # the first processor's block
                continue
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return {"model_name": platform.processor() or None, "flags": []}
    have = set((fields.get("flags") or fields.get("Features") or "").split())
    return {"model_name": fields.get("model name") or platform.processor() or None,
            "vendor": fields.get("vendor_id"), "family": fields.get("cpu family"), "model": fields.get("model"),
            "flags": [f for f in CPU_FLAGS if f in have]}


def devices() -> dict:
    """What the manifest job sees: CPU (model and flags, `cpu_info`), CPU count, platform, CUDA devices
    (torch imported only if installed)."""
    out = {"platform": platform.platform(), "cpu": cpu_info(), "cpu_count": os.cpu_count(), "cuda": []}
    try:
        import torch

        out["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            out["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return out


def add_locked(refs: dict, lock: str | os.PathLike | None) -> dict:
    """Each hub reference with `revision_locked` (the revision lock's commit, prbench.revisions; read
    when the manifest job runs, after every load) and `revision_loaded`: the pinned revision, else the
    locked commit, what the jobs loaded (None: not loaded yet, or its commit could not be told)."""
    entries = {}
    if lock and Path(lock).is_file():
        entries = (json.loads(Path(lock).read_text(encoding="utf-8")) or {}).get("refs") or {}
    out = {}
    for key, v in refs.items():
        v = dict(v)
        if v.get("source") == "hub":
            locked = (entries.get(f"{v.get('kind')}:{v['ref']}") or {}).get("commit")
            v["revision_locked"] = locked
            v["revision_loaded"] = v.get("revision_pinned") or locked
        out[key] = v
    return out


def write_manifest(out: str | os.PathLike, *, git: dict, config_sha256: str, packages: dict, refs: dict,
                   built: dict[str, str], seeds: dict, lock: str | os.PathLike | None = None) -> dict:
    """Write results/manifest.json. `built`: {config key or name: folder the workflow built}, digested
    here (the job runs after every final table); `refs` describes the config's references, those the
    workflow makes (under results/) digested here when they exist; `lock`: the revision lock file
    (config revisions.lock), whose commits each hub reference gets (`add_locked`)."""
    refs = add_locked(refs, lock)
    for v in refs.values():
        if v.get("source") == "built" and Path(v["ref"]).exists():
            v.pop("note", None)
            v["digest"] = folder_digest(v["ref"])
    for key, folder in sorted(built.items()):
        digest = folder_digest(folder) if Path(folder).exists() else None
        refs[key] = {"ref": folder, "source": "built", "digest": digest}
    manifest = {"git": git, "config_sha256": config_sha256, "packages": packages, "models_and_data": refs,
                "seeds": seeds, "devices": devices(), "revision_lock": str(lock) if lock else None}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return manifest
