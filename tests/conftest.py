"""Environment for every test: offline Hugging Face, quiet tokenizers and trl. What the tests share
(the repository root, Snakemake runs) lives in tests/helpers.py."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def test_config_run(tmp_path_factory):
    """One complete run of configs/test.yaml from nothing, shared by the tests that need one
    (tests/test_e2e.py, tests/test_partial_run.py, tests/test_faults.py): (workdir, Snakemake's output).
    Tests that change files copy the folder first (shutil.copytree keeps mtimes and .snakemake's
    records). PRBENCH_TEST_CONFIG_RUN=<folder of a finished run> reuses one (never modified)."""
    from pathlib import Path

    from helpers import REPO, SNAKEFILE, snakemake, snakemake_env

    reuse = os.environ.get("PRBENCH_TEST_CONFIG_RUN")  # an edit loop's shortcut: a finished run's folder
    if reuse:
        assert (Path(reuse) / "results/tables/correlations.csv").exists(), f"PRBENCH_TEST_CONFIG_RUN={reuse}: no run"
        return Path(reuse), ""
    workdir = tmp_path_factory.mktemp("e2e_a")
    proc = snakemake("--snakefile", SNAKEFILE, "--directory", workdir, "--configfile", REPO / "configs" / "test.yaml",
                     "--cores", "2", env=snakemake_env(HF_HUB_OFFLINE="1", PYTHONHASHSEED="0"), timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return workdir, out
