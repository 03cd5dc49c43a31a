"""What a config would cost and what it could decide, before anything runs:

    python -m prbench.plan --configfiles config.yaml configs/study.yaml     (make plan CONFIG="...")

prints (1) the job counts per rule of Snakemake's own dry run (`snakemake -n`, in a fresh work
folder unless --directory); (2) H100 GPU-hours per stage and per RM size class from the cost model
(`prbench.plan.cost`), every unit cost marked measured or ASSUMED with its source; (3) the power of
the config's confirmatory family under the verdict rule, by `prbench.analysis.power.power_rows` (the
run's own power function) at the planning assumptions `ASSUMPTIONS` (no run yet); (4) the hub
entries with no pinned revision; (5) the resources of each RM job per job class and RM size class
(`prbench.plan.resources`, which rules/common.smk calls too). Config files are layered as Snakemake's --configfiles does
(`snakemake.utils.update_config`) and validated like the Snakefile's.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from ..config import ConfigError
from ..validation import validate_config

REPO = Path(__file__).resolve().parents[3]

# Planning assumptions of the power table (no run yet): the centre of a cell (the mean of its two
# Spearman coefficients) and the benchmarks' inter-correlation. Each value with its source.
ASSUMPTIONS = {
    "center": {
        "bon": (0.257, "the paper's reported Spearman of its benchmark with BoN (arXiv 2604.07343)"),
        "ppo": (0.371, "the paper's reported Spearman of its benchmark with PPO (arXiv 2604.07343)"),
        "grpo": (0.371, "ASSUMED: PPO's (the paper has no GRPO)"),
    },
    "center_other": (0.3, "ASSUMED: between the paper's 0.257 and 0.371 (prbench.analysis.worlds)"),
    "rho_ab": (0.5, "ASSUMED: the planning inter-correlation of prbench.analysis.worlds' config.yaml family"),
    "var_meas": (0.0, "ASSUMED: exact RM-level values (no measurement noise): an optimistic bound"),
}


# ---- config files, layered ---------------------------------------------------------------------

def load_layered(paths) -> dict:
    """The config files merged in order as Snakemake's --configfiles does, validated; a bad file or
    key raises ConfigError naming the files."""
    from snakemake.utils import update_config

    if not paths:
        raise ConfigError("prbench.plan: give at least one config file (--configfiles)")
    merged: dict = {}
    for p in paths:
        try:
            data = yaml.safe_load(Path(p).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{p}: cannot read the config file ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: config must be a mapping")
        update_config(merged, data)
    try:
        return validate_config(merged)
    except (ConfigError, ValueError) as exc:
        raise ConfigError(f"{' + '.join(map(str, paths))}: {exc}") from None


def hub_org(path: str) -> str:
    """The owner of a hub id ('Skywork' of 'Skywork/Skywork-Reward-V2-Qwen3-8B'); a local path is its own."""
    return path.split("/", 1)[0] if path.count("/") == 1 else path


def trains(cfg: dict, name: str) -> bool:
    """Whether a PPO and a GRPO run with RM `name` fit resources.gpu_mem_gb by the memory plans
    (prbench.downstream.ppo.memory, prbench.downstream.grpo.memory) of the config's first policy."""
    from ..downstream.grpo.memory import grpo_plan_for_config
    from ..downstream.ppo.memory import check_plan, plan_for_config

    policy = next(iter(cfg["policies"]))
    try:
        check_plan(plan_for_config(cfg, policy, name))
    except ValueError:
        return False
    return bool(grpo_plan_for_config(cfg, policy, name).fits)


def extremes_by_org(cfg: dict) -> list[str]:
    """configs/study.yaml's rule for PPO and GRPO: among the downstream entries whose PPO and GRPO
    runs fit (`trains`), per hub organisation the one with the smallest params_b and the one with the
    largest (one when they coincide; ties: the first in order); the chosen names in config order."""
    down = [(n, e) for n, e in cfg["reward_models"].items()
            if e["downstream"] and e.get("path") and trains(cfg, n)]
    chosen = set()
    for org in dict.fromkeys(hub_org(e["path"]) for _, e in down):
        members = [(float(e.get("params_b") or 0.0), i, n) for i, (n, e) in enumerate(down)
                   if hub_org(e["path"]) == org]
        chosen.add(min(members)[2])
        chosen.add(min(members, key=lambda m: (-m[0], m[1]))[2])
    return [n for n, _ in down if n in chosen]


# ---- job counts from Snakemake's own dry run -----------------------------------------------------

def parse_job_stats(out: str) -> dict[str, int]:
    """The 'Job stats:' table of a dry run: rule -> count, with 'total'."""
    m = re.search(r"Job stats:\n\s*job\s+count\n[-\s]+\n(.*?)\n\s*total\s+(\d+)", out, flags=re.S)
    if not m:
        raise RuntimeError("no 'Job stats' table in the dry run's output:\n" + out[-3000:])
    counts = {}
    for line in m.group(1).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    counts["total"] = int(m.group(2))
    return counts


def job_counts(paths, directory: str | None = None, timeout: float = 600) -> dict[str, int]:
    """Rule -> job count of `snakemake -n --configfiles <paths>` (HF_HUB_OFFLINE: nothing is
    downloaded), run in `directory` or a fresh temporary folder (the whole run's jobs)."""
    files = [str(Path(p).resolve()) for p in paths]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="prbench-plan-") as tmp:
        cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "-s", str(REPO / "Snakefile"),
               "-d", directory or tmp, "--configfiles", *files]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake -n failed (rc {proc.returncode}):\n{out[-3000:]}")
    if "Nothing to be done" in out:
        return {"total": 0}
    return parse_job_stats(out)


# ---- the confirmatory family and its power -------------------------------------------------------

def downstream_rms(cfg: dict) -> list[str]:
    return [n for n, e in cfg["reward_models"].items() if e["downstream"]]


def method_rm_count(cfg: dict, method: str) -> int:
    """RMs whose correlation a method's cells run over: `<method>.rms` (trained methods), else every downstream RM."""
    chosen = (cfg.get(method) or {}).get("rms")
    return len([r for r in downstream_rms(cfg) if chosen is None or r in chosen])


def family(cfg: dict) -> list[dict]:
    """The declared confirmatory cells (policy, downstream method, baseline, n RMs): each method's
    headline cell vs each baseline, per policy, narrowed to `correlation.confirmatory` when given."""
    from ..downstream import enabled

    methods = enabled(cfg)
    cells = [{"policy": p, "downstream": m, "baseline": b, "n": method_rm_count(cfg, m)}
             for p in cfg["policies"] for m in methods for b in cfg["data"]["baselines"]]
    declared = (cfg.get("correlation") or {}).get("confirmatory")
    if declared is None:
        return cells
    return [c for c in cells if any(d["downstream"] == c["downstream"] and d["baseline"] == c["baseline"]
                                    and d.get("policy") in (None, c["policy"]) for d in declared)]


def power_inputs(cells: list[dict], assumptions: dict = ASSUMPTIONS) -> list[dict]:
    """power_rows' cells at the planning assumptions (diff NaN: no observed difference yet)."""
    return [{"center": assumptions["center"].get(c["downstream"], assumptions["center_other"])[0],
             "rho_ab": assumptions["rho_ab"][0], "n": c["n"], "diff": float("nan"),
             "var_meas": assumptions["var_meas"][0]} for c in cells]


def family_power(cfg: dict, n_sims: int | None = None, seed: int | None = None) -> tuple[list[dict], list[dict]]:
    """(cells, power_rows' rows) of the config's family under the verdict rule, at the assumptions."""
    from ..analysis import power

    corr = cfg.get("correlation") or {}
    cells = family(cfg)
    if not cells:
        return cells, []
    rows = power.power_rows(power_inputs(cells), int(n_sims or corr.get("power_simulations") or 1000),
                            float(corr["fdr"]), int(cfg["seed"] if seed is None else seed),
                            corr.get("min_rms"))
    return cells, rows


def decidable(cfg: dict, cells: list[dict]) -> list[tuple[dict, bool, str]]:
    """Per cell: whether the verdict rule can decide it at the config's RMs, and why not."""
    from ..analysis.verdict import MIN_RMS

    extra = (cfg.get("correlation") or {}).get("min_rms")
    need = max(MIN_RMS, int(extra or 0))
    src = f"verdict.MIN_RMS {MIN_RMS}" + (f", correlation.min_rms {extra}" if extra else "")
    return [(c, c["n"] >= need, "" if c["n"] >= need else
             f"cannot decide: {c['n']} downstream RMs < the rule's minimum {need} ({src})") for c in cells]


def unpinned(cfg: dict) -> list[dict]:
    """Hub references with no pinned revision (prbench.revisions.plan), with the locked commit if any."""
    from ..revisions import configure, plan

    configure((cfg.get("revisions") or {}).get("lock"))
    return [r for r in plan(cfg) if not r["pinned"]]
