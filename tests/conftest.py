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


# Parallel runs (pytest-xdist; `make test` runs `-n 2 --dist loadscope --no-loadscope-reorder`): a test
# module is one unit of work, so its module-scoped fixtures (a Snakemake run, a calibration) are built
# once, on one worker; the modules that share the session's configs/test.yaml run (which write into its
# folder) are one unit, so that run is made once. The units that take longest (measured on 2 cores,
# 2026-11-26: the mirror study 10.5 min, the configs/test.yaml run and its users 9 min, the replica DAG
# 7.5 min, the param-key DAGs 4 min) go first, so that none of them starts while the other worker runs
# out of work. (xdist's own `--dist loadgroup` marks do not group under pytest 9: it renames node ids.)
SHARED_RUN = ("test_e2e.py", "test_partial_run.py", "test_faults.py")
LONGEST_FIRST = ("test_mirror.py", *SHARED_RUN, "test_replica_e2e.py", "test_param_keys.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def unit_of_work(nodeid: str) -> str:
    """The xdist work unit of a test: its module, or "test_config_run" for the modules sharing that run."""
    module = nodeid.split("::", 1)[0]
    return "test_config_run" if module.rsplit("/", 1)[-1] in SHARED_RUN else module


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist (the dev extra) not installed: one process, nothing to schedule
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:
    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_work(nodeid)

    @pytest.hookimpl(optionalhook=True)  # `-p no:xdist` (one process) leaves the hook unknown: not an error
    def pytest_xdist_make_scheduler(config, log):
        return ModuleScheduling(config, log)
