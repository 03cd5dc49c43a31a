"""End to end: the whole DAG on the tiny config (configs/test.yaml), from nothing to figures.

Runs the real rules and code (demo world, RM training, scoring, BoN, PPO, correlations,
figures, report) at toy sizes in a scratch directory, then checks that
- every final table and figure exists and covers every RM,
- a rerun with nothing changed does no work,
- a second run from scratch gives byte-identical tables (seeds everywhere).
"""
import filecmp

import pandas as pd
import pytest
import yaml
from helpers import REPO, SNAKEFILE, snakemake, snakemake_env

pytestmark = [pytest.mark.slow, pytest.mark.dag]

CONFIG = REPO / "configs" / "test.yaml"
TABLES = ["benchmark_accuracy.csv", "bon.csv", "ppo.csv", "grpo.csv", "correlations.csv"]


def _run(workdir, *extra, timeout=1800):
    proc = snakemake("--snakefile", SNAKEFILE, "--directory", workdir, "--configfile", CONFIG, "--cores", "2", *extra,
                     env=snakemake_env(HF_HUB_OFFLINE="1", PYTHONHASHSEED="0"), timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def runs(test_config_run):
    return test_config_run  # conftest.py: one run of configs/test.yaml shared with test_partial_run.py


def test_all_outputs(runs):
    workdir, _ = runs
    cfg = yaml.safe_load(CONFIG.read_text())
    rms = set(cfg["reward_models"])
    acc = pd.read_csv(workdir / "results/tables/benchmark_accuracy.csv")
    assert set(acc["rm"]) == rms
    assert {"personalized", *cfg["data"]["baselines"]} <= set(acc["benchmark"])
    bon = pd.read_csv(workdir / "results/tables/bon.csv")
    assert rms <= set(bon["rm"])
    assert set(bon["k"]) == set(cfg["bon"]["ks"])
    ppo = pd.read_csv(workdir / "results/tables/ppo.csv")
    assert set(ppo["rm"]) == rms
    grpo = pd.read_csv(workdir / "results/tables/grpo.csv")
    assert set(grpo["rm"]) == rms
    corr = pd.read_csv(workdir / "results/tables/correlations.csv")
    assert len(corr) > 0
    assert list(dict.fromkeys(corr["downstream"])) == ["bon", "ppo", "grpo"]  # from the registry
    for name in ["accuracy", "bon_curves", "scatter", "correlations", "ppo_training", "grpo_training"]:
        for ext in ("png", "pdf"):
            assert (workdir / f"results/figures/{name}.{ext}").stat().st_size > 1000


def test_rerun_does_nothing(runs):
    workdir, _ = runs
    rc, out = _run(workdir, "-n")
    assert rc == 0, out
    assert "Nothing to be done" in out, out[-3000:]


def test_report_builds(runs):
    workdir, _ = runs
    rc, out = _run(workdir, "--report", str(workdir / "report.html"))
    assert rc == 0, out[-3000:]
    assert (workdir / "report.html").stat().st_size > 10_000


def test_second_run_identical_tables(runs, tmp_path):
    workdir, _ = runs
    rc, out = _run(tmp_path)
    assert rc == 0, out[-6000:]
    for table in TABLES:
        assert filecmp.cmp(workdir / "results/tables" / table, tmp_path / "results/tables" / table,
                           shallow=False), table
