"""Each job's params hold exactly what it reads, in a key-order-free form.

A scratch working directory records, with `snakemake --touch -F`, the params of every job of the
demo config (Snakemake's own metadata), and every output is then created. A dry run with only the
`params` rerun trigger then lists the jobs whose recorded params differ from those of an edited
config, plus (as Snakemake always does) the jobs downstream of them. Each edit of a table or
analysis setting must rerun only the table/analysis job that reads it (and its figures); a
resource hint (judge.params_b) and the same config with every mapping's keys in reverse order must
rerun nothing.
"""
import base64
import copy
import os
from pathlib import Path

import pytest
import yaml
from helpers import REPO, SNAKEFILE, dry_run, snakemake, snakemake_env

pytestmark = pytest.mark.dag


def _touch_all(workdir: Path, configfile: Path) -> None:
    """`snakemake --touch -F`: every job of the config recorded (params), no job run."""
    proc = snakemake("--cores", "1", "-s", SNAKEFILE, "-d", workdir, "--configfile", configfile, "--touch", "-F", "-q",
                     env=snakemake_env(OMP_NUM_THREADS="1"), timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]


def _recorded_outputs(workdir: Path) -> list[str]:
    meta = workdir / ".snakemake" / "metadata"
    out = []
    for f in meta.rglob("*"):
        if f.is_file():
            key = str(f.relative_to(meta)).replace(os.sep, "")
            out.append(base64.urlsafe_b64decode(key.encode()).decode())
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """The demo config's DAG, every job recorded (params) and every output present."""
    wd = tmp_path_factory.mktemp("params_scope")
    cfg = REPO / "configs" / "demo.yaml"
    _touch_all(wd, cfg)
    outputs = _recorded_outputs(wd)
    assert len(outputs) > 50, outputs
    for rel in outputs:
        p = wd / rel
        if p.suffix:  # a file
            p.parent.mkdir(parents=True, exist_ok=True)
            p.touch()
        else:  # directory() outputs (model folders) have no suffix
            p.mkdir(parents=True, exist_ok=True)
    _touch_all(wd, cfg)  # again, now that the files exist: fresh input records
    return wd


def _dry_run(wd: Path, cfg: dict, tmp_path: Path, name: str) -> set[str]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run = dry_run("--rerun-triggers", "params", workdir=wd, configfile=path, timeout=240)
    return run.rules - {"all"}


def _reverse_keys(x):
    """Every mapping's keys in reverse order, except the order of the RM and policy entries
    (that order is the row order of the tables, a legitimate output change)."""
    if isinstance(x, dict):
        return {k: _reverse_keys(x[k]) for k in reversed(list(x))}
    if isinstance(x, list):
        return [_reverse_keys(v) for v in x]
    return x


DEMO = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())


def _edit(section, key, value):
    cfg = copy.deepcopy(DEMO)
    cfg.setdefault(section, {})[key] = value
    return cfg


@pytest.mark.parametrize("name,cfg,expected", [
    ("unchanged", DEMO, set()),
    ("ppo_bootstrap", _edit("ppo", "bootstrap", 77), {"ppo_table"}),
    ("grpo_bootstrap", _edit("grpo", "bootstrap", 77), {"grpo_table"}),
    # bon_table writes the curves with their bootstrap CIs, which the analysis reads
    ("bon_bootstrap", _edit("bon", "bootstrap", 77),
     {"bon_table", "bon_measures", "correlations", "fig_bon_curves", "fig_scatter", "fig_correlations"}),
    ("scoring_bootstrap", _edit("scoring", "bootstrap", 77), {"accuracy_table", "fig_accuracy"}),
    ("correlation_bootstrap", _edit("correlation", "bootstrap", 77),
     {"correlations", "fig_correlations", "fig_scatter"}),
    ("judge_validity_bootstrap", _edit("judge", "validity_bootstrap", 77), {"judge_validity"}),
    ("judge_params_b", _edit("judge", "params_b", 123.0), set()),
])
def test_edit_reruns_only_readers(scratch, tmp_path, name, cfg, expected):
    jobs = _dry_run(scratch, cfg, tmp_path, name)
    # the run manifest records the validated config's hash: any edit reruns it (a seconds-long job)
    assert ("manifest" in jobs) == (name != "unchanged")
    jobs -= {"manifest"}
    assert jobs == expected
    assert jobs <= TABLE_AND_ANALYSIS | {"judge_validity"}  # never a model, sampling or judging job


# The seconds-long table and figure jobs (Snakefile `localrules`).
TABLE_AND_ANALYSIS = {"accuracy_table", "bon_table", "ppo_table", "grpo_table", "correlations", "fig_accuracy",
                      "fig_bon_curves", "fig_scatter", "fig_correlations", "fig_training",
                      "bon_measures", "judged_measures"}


def test_key_order_reruns_nothing(scratch, tmp_path):
    cfg = _reverse_keys(DEMO)
    for section in ("reward_models", "policies"):
        cfg[section] = {k: _reverse_keys(DEMO[section][k]) for k in DEMO[section]}
    assert list(cfg) != list(DEMO)
    assert _dry_run(scratch, cfg, tmp_path, "reordered") == set()


def test_a_read_setting_still_reruns(scratch, tmp_path):
    """The converse: a training setting reruns training and everything downstream of it."""
    jobs = _dry_run(scratch, _edit("ppo", "kl_coef", 0.123), tmp_path, "kl")
    assert {"train_ppo", "eval_policy", "ppo_table"} <= jobs
    assert "base_answers" not in jobs and "score_benchmark" not in jobs


def test_a_grpo_setting_reruns_only_grpo(scratch, tmp_path):
    """A GRPO training setting retrains GRPO (and what reads it), never PPO or BoN."""
    jobs = _dry_run(scratch, _edit("grpo", "lr", 0.123), tmp_path, "grpo_lr")
    assert {"train_grpo", "eval_policy", "judged_measures", "grpo_table", "correlations", "fig_training"} <= jobs
    assert not jobs & {"train_ppo", "ppo_table", "base_answers", "bon_table", "score_bon"}
