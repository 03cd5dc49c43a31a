"""The demo and test configs run GRPO for every RM, through the shared PPO evaluation, into the
downstream contract's table and the analysis; with grpo.enabled false no GRPO job exists."""
import os
import re
import subprocess

import pytest
import yaml
from conftest import REPO, snakemake_bin


def _jobs(workdir, cfg: dict) -> list[tuple[str, dict, str]]:
    path = workdir / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    cmd = [snakemake_bin(), "-n", "--cores", "1", "-s", str(REPO / "Snakefile"), "-d", str(workdir),
           "--configfile", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ, OMP_NUM_THREADS="1"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if m:
            wc = re.search(r"wildcards: (.*)", block)
            wildcards = dict(kv.split("=", 1) for kv in wc.group(1).split(", ")) if wc else {}
            jobs.append((m.group(1), wildcards, block))
    return jobs


@pytest.mark.parametrize("name", ["demo", "test"])
def test_config_runs_grpo_for_every_rm(tmp_path, name):
    cfg = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    jobs = _jobs(tmp_path, cfg)
    runs = {(p, r) for p in cfg["policies"] for r in cfg["reward_models"]}
    trained = {(wc["policy"], wc["rm"]) for rule, wc, _ in jobs if rule == "train_grpo"}
    assert trained == runs
    evaluated = {(wc["policy"], wc["rm"]) for rule, wc, _ in jobs if rule == "eval_policy" and wc["method"] == "grpo"}
    assert evaluated == runs
    measures = {wc["method"] for rule, wc, _ in jobs if rule == "judged_measures"}
    assert measures == {"ppo", "grpo"}
    assert {wc["method"] for rule, wc, _ in jobs if rule == "fig_training"} == {"ppo", "grpo"}
    corr = [block for rule, _, block in jobs if rule == "correlations"]
    assert len(corr) == 1 and "results/downstream/grpo.csv" in corr[0] and "results/downstream/bon.csv" in corr[0]
    assert "grpo_table" in {rule for rule, _, _ in jobs}


def test_grpo_disabled_has_no_grpo_job(tmp_path):
    cfg = yaml.safe_load((REPO / "configs" / "test.yaml").read_text())
    cfg["grpo"]["enabled"] = False
    jobs = _jobs(tmp_path, cfg)
    assert not [j for j in jobs if "grpo" in j[0] or j[1].get("method") == "grpo"]
    assert "results/downstream/grpo.csv" not in "".join(block for _, _, block in jobs)
