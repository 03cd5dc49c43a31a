"""The demo and test configs run GRPO for every RM, through the shared PPO evaluation, into the
downstream contract's table and the analysis; with grpo.enabled false no GRPO job exists."""
import pytest
import yaml
from helpers import REPO, dry_run, method_rms

pytestmark = pytest.mark.dag


def _jobs(workdir, cfg: dict) -> list[tuple[str, dict, str]]:
    path = workdir / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run = dry_run(workdir=workdir, configfile=path, timeout=240)
    return [(job.rule, job.wildcards, job.text) for job in run.jobs]


@pytest.mark.parametrize("name", ["demo", "test"])
def test_config_runs_grpo_for_every_rm(tmp_path, name):
    """GRPO for every RM of grpo.rms (every RM when null)."""
    cfg = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    jobs = _jobs(tmp_path, cfg)
    runs = {(p, r) for p in cfg["policies"] for r in method_rms(cfg, "grpo")}
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
