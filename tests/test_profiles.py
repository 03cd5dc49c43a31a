"""profiles/slurm and profiles/local: parse, declare what Snakemake + the SLURM plugin need,
and turn GPU resources into the right sbatch flags."""

import dataclasses
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from helpers import REPO, snakemake, snakemake_bin

SLURM = REPO / "profiles" / "slurm" / "config.yaml"
LOCAL = REPO / "profiles" / "local" / "config.yaml"
SMOKE = REPO / "tests" / "slurm" / "smoke" / "Snakefile"


def load(path):
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path}: not a mapping"
    return doc


def cli_options():
    from snakemake.cli import get_argument_parser

    return set(get_argument_parser()._option_string_actions)


@pytest.mark.parametrize("path", [SLURM, LOCAL], ids=["slurm", "local"])
def test_profile_keys_are_snakemake_options(path):
    """A misspelt key is silently passed as an unknown flag and aborts the run: catch it here."""
    opts = cli_options()
    keys = list(load(path))
    if not any(o.startswith("--slurm-") for o in opts):  # plugin not installed: its keys are
        keys = [k for k in keys if not k.startswith("slurm-")]  # checked by the plugin test
    unknown = [k for k in keys if f"--{k}" not in opts]
    assert not unknown, f"{path}: not snakemake options: {unknown}"


def test_slurm_profile_declares_plugin_essentials():
    prof = load(SLURM)
    assert prof["executor"] == "slurm"
    assert isinstance(prof["jobs"], int) and prof["jobs"] >= 1
    assert prof["retries"] >= 1, "killed/preempted jobs should be resubmitted"
    assert prof["latency-wait"] >= 10, "shared filesystems need a latency wait"
    assert prof["rerun-incomplete"] is True
    res = prof["default-resources"]
    assert isinstance(res["mem_mb"], int) and res["mem_mb"] > 0
    assert isinstance(res["runtime"], int) and res["runtime"] > 0  # minutes
    # site-specific values stay commented placeholders, so the profile runs anywhere as is
    assert "slurm_partition" not in res and "slurm_account" not in res
    text = SLURM.read_text()
    for key in ("slurm_partition", "slurm_account", "gpu_model", "cpus_per_gpu"):
        assert re.search(rf"^\s*#\s*{key}:", text, re.M), f"{SLURM}: document {key} for the site"
    assert prof["slurm-status-command"] in {"sacct", "squeue"}
    assert isinstance(prof["slurm-init-seconds-before-status-checks"], int)
    assert prof["slurm-init-seconds-before-status-checks"] > 0


def test_slurm_profile_settings_exist_in_plugin():
    plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
    fields = {f.name for f in dataclasses.fields(plugin.ExecutorSettings)}
    keys = [k for k in load(SLURM) if k.startswith("slurm-")]
    assert keys
    for key in keys:
        assert key[len("slurm-") :].replace("-", "_") in fields, f"{key}: no such plugin setting"


def test_local_profile_limits_gpus():
    prof = load(LOCAL)
    assert prof["cores"] == "all"
    assert prof["resources"]["gpu"] >= 1, "the gpu limit keeps GPU jobs from sharing one device"
    assert "executor" not in prof or prof["executor"] == "local"
    assert prof["default-resources"]["mem_mb"] > 0 and prof["default-resources"]["runtime"] > 0


class _Resources(dict):
    __getattr__ = dict.__getitem__


def _sbatch(resources, threads=4):
    plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    job = SimpleNamespace(resources=_Resources(resources), threads=threads, name="score_benchmark")
    settings = SimpleNamespace(requeue=False, no_requeue=False, qos=None, reservation=None)
    params = dict(run_uuid="u", slurm_logfile="l.log", comment_str="rule_x", account="", partition="", workdir=".")
    assert plugin is not None
    return get_submit_command(job, params, settings) + set_gres_string(job)


def test_gpu_resources_become_sbatch_flags():
    """The resource names the rules and profile use (gpu, gpu_model, cpus_per_gpu) are the ones the
    plugin turns into --gpus / --cpus-per-gpu; a CPU job gets --cpus-per-task = threads."""
    defaults = load(SLURM)["default-resources"]
    gpu_call = _sbatch({**defaults, "gpu": 2, "gpu_model": "a100", "cpus_per_gpu": 8})
    assert "--gpus=a100:2" in gpu_call
    assert "--cpus-per-gpu=8" in gpu_call
    assert f"--mem {defaults['mem_mb']}" in gpu_call
    assert re.search(rf"-t '?{defaults['runtime']}'?", gpu_call)
    cpu_call = _sbatch({**defaults, "gpu": 0}, threads=3)
    assert "--gpus" not in cpu_call and "--cpus-per-task=3" in cpu_call


@pytest.mark.parametrize("profile", ["slurm", "local"])
@pytest.mark.dag
def test_profile_dry_run(tmp_path, profile):
    """Snakemake itself loads the profile and plans a small workflow with it (no cluster needed)."""
    if profile == "slurm":
        pytest.importorskip("snakemake_executor_plugin_slurm")
    assert Path(snakemake_bin()).exists(), snakemake_bin()
    shutil.copy(SMOKE, tmp_path / "Snakefile")
    proc = snakemake("-n", "--profile", REPO / "profiles" / profile, cwd=tmp_path, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert re.search(r"part\s+3", out), out[-2000:]
    assert "mem_mb=200" in out and "runtime=5" in out
