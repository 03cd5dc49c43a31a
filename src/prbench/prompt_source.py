"""Prompt files read at run time from a public git repository at a pinned commit (config key
`prompts.remote`): the authors' own prompt files, loaded, never copied into the project.

    prompts:
      templates: default                      # every role not mapped below
      remote:
        repo: Martin-qyma/Personalized-RewardBench
        commit: a5c6814d22738c264f3c27576f54e50e04e16c10   # full 40-hex, never a branch; null = off
        files: {policy_user: prompts/sample.txt, ...}    # role -> path in the repository (schema defaults)

A role's file is read from `<cache>/<repo>/<commit>/<path>`; when it is not there, a job downloads it
from `<base_url>/<repo>/<commit>/<path>` (GitHub's raw-file address by default; a `file://` URL or a
local folder serves a copy of that layout) and writes it into the cache atomically, unless
HF_HUB_OFFLINE is set (an offline compute node): then the missing file is an error naming the role,
the path and the commit. `python -m prbench.prefetch` (`make prefetch`) fills the cache on a machine
with internet. Validation and DAG parsing never call `read`: they see the mapping only
(`remote_files`). As the authors' loaders do (`f.read().strip()`), a fetched file is used stripped of
surrounding whitespace.
"""
from __future__ import annotations

import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath

from .config import with_defaults

FETCH_TIMEOUT_S = 60


def remote_spec(prompts_cfg: dict | None) -> dict | None:
    """The section `prompts.remote` with its schema defaults, or None when it pins no commit."""
    spec = with_defaults((prompts_cfg or {}).get("remote"), "prompts.remote")
    return None if spec["commit"] is None else spec


def remote_files(prompts_cfg: dict | None) -> dict[str, str]:
    """role -> path in the repository, for the roles `prompts.remote.files` maps (no I/O)."""
    spec = remote_spec(prompts_cfg)
    if spec is None:
        return {}
    out = {role: path for role, path in spec["files"].items() if path is not None}
    for role, path in out.items():
        if ".." in PurePosixPath(path).parts:
            raise ValueError(f"config key prompts.remote.files.{role}: {path!r} leaves the repository")
    return out


def where(spec: dict, path: str) -> str:
    """`repo@commit:path`, as errors and logs name a file."""
    return f"{spec['repo']}@{spec['commit']}:{path}"


def url(spec: dict, path: str) -> str:
    """The download address of `path`: <base_url>/<repo>/<commit>/<path> (a base without a URL
    scheme is a local folder)."""
    base = spec["base_url"]
    if "://" not in base:
        base = Path(base).expanduser().resolve().as_uri()
    return "/".join([base.rstrip("/"), spec["repo"], spec["commit"], urllib.parse.quote(path)])


def cache_file(spec: dict, path: str, basedir: str | os.PathLike = ".") -> Path:
    """Where the cache keeps `path` at the spec's commit: <cache>/<repo>/<commit>/<path>."""
    root = Path(os.path.expanduser(spec["cache"]))
    if not root.is_absolute():
        root = Path(basedir) / root
    return root / spec["repo"] / spec["commit"] / PurePosixPath(path)


def offline() -> bool:
    """True when the hub is switched off (HF_HUB_OFFLINE, as huggingface_hub reads it): no downloads."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def fetch(spec: dict, path: str, basedir: str | os.PathLike = ".", role: str | None = None) -> Path:
    """Download `path` at the spec's commit into the cache (atomically: a temporary file in the same
    folder, then a rename, so concurrent jobs never read half a file); returns the cached file.
    FileNotFoundError names the role, the path, the commit and the address on any failure."""
    target = cache_file(spec, path, basedir)
    address = url(spec, path)
    try:
        with urllib.request.urlopen(address, timeout=FETCH_TIMEOUT_S) as resp:
            data = resp.read()
        data.decode("utf-8")  # a prompt file is text; fail here, not in the first job that reads it
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise FileNotFoundError(f"config key prompts.remote{f'.files.{role}' if role else ''}: "
                                f"{path!r} at commit {spec['commit']} of {spec['repo']} could not be fetched "
                                f"from {address} ({type(e).__name__}: {e})") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read(spec: dict, role: str, path: str, *, fetch_missing: bool | None = None,
         basedir: str | os.PathLike = ".") -> str:
    """The text of `role`'s file: from the cache, else (online, `fetch_missing` None or true)
    downloaded first. Stripped of surrounding whitespace, as the authors' loaders read it."""
    f = cache_file(spec, path, basedir)
    if not f.is_file():
        if fetch_missing is False or (fetch_missing is None and offline()):
            raise FileNotFoundError(
                f"config key prompts.remote.files.{role}: {path!r} at commit {spec['commit']} of {spec['repo']} "
                f"is not in the prompt cache ({f}) and HF_HUB_OFFLINE is set: run `make prefetch` "
                "(python -m prbench.prefetch) where there is internet, with the same prompts.remote.cache")
        fetch(spec, path, basedir, role)
    return f.read_text(encoding="utf-8").strip()
