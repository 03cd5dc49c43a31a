"""prbench.plan (make plan): job counts from Snakemake's dry run, the verdict rule's power by its own
function, and configs/study.yaml's downstream rule applied mechanically."""
import pandas as pd
import pytest
from helpers import REPO, dry_run

from prbench import plan
from prbench.analysis import power
from prbench.config import ConfigError, entry_with_defaults
from prbench.plan.report import main

STUDY = [REPO / "config.yaml", REPO / "configs" / "study.yaml"]


@pytest.mark.dag
def test_job_counts_equal_snakemakes_dry_run_on_the_replica(tmp_path):
    run = dry_run(configfile=REPO / "configs" / "replica.yaml", workdir=tmp_path)
    counts = plan.job_counts([REPO / "configs" / "replica.yaml"])
    expected = {}
    for job in run.jobs:
        expected[job.rule] = expected.get(job.rule, 0) + 1
    assert {k: v for k, v in counts.items() if k != "total"} == expected
    assert counts["total"] == len(run.jobs)


def test_the_paper_config_cannot_decide(capsys):
    assert main(["--configfiles", str(REPO / "config.yaml"), "--no-jobs", "--sims", "100"]) == 0
    out = capsys.readouterr().out
    assert "CANNOT DECIDE" in out
    assert "5 downstream RMs < the rule's minimum 10 (verdict.MIN_RMS 10)" in out
    assert "4. hub entries with no pinned revision" in out


def test_the_demo_plans_no_gpu_and_its_power(capsys):
    """A demo config runs on the CPU: no GPU-hours, no GPUs requested, the power of its family."""
    assert main(["--configfiles", str(REPO / "configs" / "demo.yaml"), "--no-jobs", "--sims", "50"]) == 0
    out = capsys.readouterr().out
    assert "2. GPU-hours: none" in out and "5. resources per job: 0 GPUs" in out
    assert "demo_policy bon personalized vs rewardbench2: 34 RMs; decidable" in out
    assert "4. hub entries with no pinned revision: 0" in out


def test_the_study_has_32_rms_ppo_by_its_rule_and_can_decide(capsys):
    cfg = plan.load_layered(STUDY)
    assert len(plan.downstream_rms(cfg)) >= 32
    chosen = plan.extremes_by_org(cfg)
    assert cfg["ppo"]["rms"] == chosen == cfg["grpo"]["rms"]
    assert len(chosen) >= 12
    assert main(["--configfiles", *map(str, STUDY), "--no-jobs", "--sims", "100"]) == 0
    out = capsys.readouterr().out
    assert "the family CAN be decided" in out and "PPO 15, GRPO 15" in out


def test_the_power_is_power_rows_at_the_stated_assumptions():
    cfg = plan.load_layered(STUDY)
    cells, rows = plan.family_power(cfg, n_sims=100, seed=3)
    assert [c["n"] for c in cells] == [33] * 3 + [15] * 6  # bon, ppo, grpo x the three baselines
    direct = power.power_rows([{"center": c, "rho_ab": 0.5, "n": n, "diff": float("nan"), "var_meas": 0.0}
                               for c, n in [(0.257, 33)] * 3 + [(0.371, 15)] * 6], 100, 0.05, 3, None)
    assert pd.DataFrame(rows).equals(pd.DataFrame(direct))  # NaN where NaN, every other value equal


def test_bad_files_and_keys_are_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="bad.yaml: config must be a mapping"):
        plan.load_layered([REPO / "config.yaml", bad])
    bad.write_text("bon: {n: x}\n")
    with pytest.raises(ConfigError, match=r"config.yaml \+ .*bad.yaml"):
        plan.load_layered([REPO / "config.yaml", bad])


def test_the_rule_takes_each_organisations_extremes():
    rms = {"a": {"kind": "classifier", "path": "org1/a", "params_b": 8},
           "b": {"kind": "classifier", "path": "org1/b", "params_b": 1},
           "c": {"kind": "classifier", "path": "org1/c", "params_b": 8},
           "d": {"kind": "classifier", "path": "org2/d", "params_b": 3, "downstream": False},
           "e": {"kind": "classifier", "path": "org2/e", "params_b": 3}}
    cfg = plan.load_layered([REPO / "config.yaml"])
    cfg["reward_models"] = {k: entry_with_defaults(v, "reward_models.*") for k, v in rms.items()}  # as validated
    assert plan.extremes_by_org(cfg) == ["a", "b", "e"]
