"""What the tests share about the repository and Snakemake: where the checkout is, which
`snakemake` to start, a real run of it and a dry run that returns the jobs it plans.

Tests that start Snakemake (a dry run or a real run) carry the `dag` marker."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = REPO / "Snakefile"


def tracked_files(root: Path = REPO) -> list[str]:
    """The paths git tracks under `root` (`git ls-files`); raises where git or the checkout is missing."""
    return subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.splitlines()


# JSON keys that hold wall-clock measurements, not results: two runs of the same job may differ there
# (tests/slurm/compare_outputs.py, tests/test_e2e.py).
WALL_CLOCK_KEYS = {"seconds", "elapsed_seconds", "wall_seconds", "runtime_seconds", "timestamp", "started", "finished"}


def without_wall_clock(obj, dropped: set[str], path: str = ""):
    """`obj` (parsed JSON) less its WALL_CLOCK_KEYS at any depth; the JSON path of each key left out
    is added to `dropped`."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in WALL_CLOCK_KEYS:
                dropped.add(f"{path}/{k}")
            else:
                out[k] = without_wall_clock(v, dropped, f"{path}/{k}")
        return out
    if isinstance(obj, list):
        return [without_wall_clock(v, dropped, path) for v in obj]
    return obj


def same_but_wall_clock(name: str, a: bytes, b: bytes, dropped: set[str]) -> bool:
    """Two contents of the file `name` agree: equal bytes, or, for differing JSON, equal once their
    wall-clock fields are left out (only there: a tokenizer's vocabulary holds such words as keys).
    Raises json.JSONDecodeError for a differing .json file that is not JSON."""
    if a == b:
        return True
    if not name.endswith(".json"):
        return False
    import json

    return without_wall_clock(json.loads(a), dropped) == without_wall_clock(json.loads(b), dropped)


def snakemake_bin() -> str:
    """The `snakemake` next to this interpreter (the virtualenv's), else the one on PATH."""
    cand = Path(sys.executable).parent / "snakemake"
    return str(cand) if cand.exists() else "snakemake"


def snakemake_env(*pythonpath: Path, **variables: str) -> dict[str, str]:
    """This process's environment (conftest.py makes it offline) with `pythonpath` and REPO/src in
    front of PYTHONPATH, so Snakemake and the jobs it starts import this checkout's prbench even
    where the installed package points elsewhere; `variables` set on top."""
    paths = [str(p) for p in (*pythonpath, REPO / "src")]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **variables}


def snakemake(*args: str | Path, cwd: Path = REPO, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    """`snakemake *args` run from `cwd` (the checkout unless told), stdout and stderr captured as
    text; `env` defaults to snakemake_env(). The caller checks the return code."""
    return subprocess.run([snakemake_bin(), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=snakemake_env() if env is None else env)


@dataclass(frozen=True)
class Job:
    """One job of a dry run, as Snakemake prints it (its params are not printed)."""

    rule: str
    wildcards: dict[str, str]
    input: tuple[str, ...]
    output: tuple[str, ...]
    text: str  # the job's whole block of the dry-run output


@dataclass(frozen=True)
class DryRun:
    out: str  # stdout and stderr
    jobs: list[Job]  # in the printed order, `all` included when it is a job

    @property
    def rules(self) -> set[str]:
        return {job.rule for job in self.jobs}


def _files(block: str, item: str) -> tuple[str, ...]:
    m = re.search(rf"^\s+{item}: (.*)$", block, flags=re.M)
    return tuple(m.group(1).split(", ")) if m else ()


def parse_jobs(out: str) -> list[Job]:
    """The `rule NAME:` blocks of a dry run's output."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not m:
            continue
        wc = re.search(r"wildcards: (.*)", block)
        wildcards = dict(kv.split("=", 1) for kv in wc.group(1).split(", ")) if wc else {}
        jobs.append(Job(m.group(1), wildcards, _files(block, "input"), _files(block, "output"), block))
    return jobs


def dry_run(*args: str | Path, targets: Sequence[str | Path] = (), snakefile: Path | None = SNAKEFILE,
            workdir: Path | None = None, configfile: Path | None = None, cores: int | None = 1, cwd: Path = REPO,
            env: dict[str, str] | None = None, timeout: float = 300) -> DryRun:
    """`snakemake -n [options] *args -- *targets` run from `cwd`, which must succeed. `None` leaves
    an option out (a profile's own settings then hold). One OMP thread: a dry run computes nothing."""
    cmd: list[str | Path] = ["-n"]
    if cores is not None:
        cmd += ["--cores", str(cores)]
    if snakefile is not None:
        cmd += ["-s", snakefile]
    if workdir is not None:
        cmd += ["-d", workdir]
    if configfile is not None:
        cmd += ["--configfile", configfile]
    if targets:
        args = (*args, "--", *targets)
    proc = snakemake(*cmd, *args, cwd=cwd, env=snakemake_env(OMP_NUM_THREADS="1") if env is None else env,
                     timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    jobs = parse_jobs(out)
    if "Nothing to be done" in out:
        assert not jobs, out[-6000:]
    return DryRun(out, jobs)


def config_rms(cfg: dict) -> list[str]:
    """The RMs a config runs, in its order: its RM families expanded into their members (prbench.rms.family)."""
    import copy

    from prbench.rms.family import expand_families

    cfg = copy.deepcopy(cfg)
    expand_families(cfg)
    return list(cfg["reward_models"])


def method_rms(cfg: dict, method: str) -> list[str]:
    """The RMs a trained-policy method (ppo, grpo) runs with: `<method>.rms`, else every RM."""
    chosen = (cfg.get(method) or {}).get("rms")
    return [r for r in config_rms(cfg) if chosen is None or r in chosen]
