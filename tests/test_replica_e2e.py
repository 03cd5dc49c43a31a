"""The paper DAG on replicas: `snakemake --cores 2 --configfile configs/replica.yaml`
from an empty directory builds every replica (models and data) and runs data preparation, scoring of
all seven RMs of config.yaml, BoN, PPO, correlations and figures offline; every table covers every RM.
Random weights: the numbers mean nothing, but unparseable generative replies must be counted."""
import time

import pandas as pd
import pytest
import yaml
from helpers import REPO, SNAKEFILE, snakemake, snakemake_env

pytestmark = [pytest.mark.slow, pytest.mark.dag]

CONFIG = REPO / "configs" / "replica.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("replica")
    start = time.monotonic()
    proc = snakemake("--snakefile", SNAKEFILE, "--directory", workdir, "--configfile", CONFIG, "--cores", "2",
                     env=snakemake_env(HF_HUB_OFFLINE="1", PYTHONHASHSEED="0"), timeout=2400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    print(f"replica DAG: {time.monotonic() - start:.0f} s")
    return workdir, yaml.safe_load(CONFIG.read_text())


def test_every_table_and_figure(run):
    run, cfg = run
    rms = set(cfg["reward_models"])
    assert len(rms) == 7  # config.yaml's seven RMs, incl. internlm2_7b_reward and armorm_llama3_8b
    for name in cfg["replica"]["models"]:
        assert (run / "results/replica/models" / name / "config.json").exists(), name
    acc = pd.read_csv(run / "results/tables/benchmark_accuracy.csv")
    assert set(acc["rm"]) == rms
    assert set(acc["benchmark"]) == {"personalized", "rewardbench", "rmbench"}
    overall = acc[acc["level"] == "overall"]
    assert len(overall) == 3 * len(rms)
    # classifier RMs score every pair; random generative RMs fail to parse, and that is counted
    for rm, entry in cfg["reward_models"].items():
        rows = overall[overall["rm"] == rm]
        if entry["kind"] == "classifier":
            assert (rows["failures"] == 0).all(), rm
        assert (rows["n"] > 0).all(), rm
    rb = acc[(acc["benchmark"] == "rewardbench") & (acc["level"] == "section")]
    assert {"chat", "chat_hard", "safety", "reasoning"} <= set(rb["group"])
    rmb = acc[(acc["benchmark"] == "rmbench") & (acc["level"] == "section")]
    assert {"easy", "normal", "hard"} <= set(rmb["group"])
    # the downstream runs: every RM but the benchmark-only ones (reward_models.<rm>.downstream: false)
    down = {rm for rm, e in cfg["reward_models"].items() if e.get("downstream", True)}
    assert down and down < rms
    bon = pd.read_csv(run / "results/tables/bon.csv")
    assert down <= set(bon["rm"]) and not (rms - down) & set(bon["rm"]) and set(bon["k"]) == set(cfg["bon"]["ks"])
    ppo = pd.read_csv(run / "results/tables/ppo.csv")
    assert set(ppo["rm"]) == down
    for rm in down:
        assert (run / f"results/ppo/qwen25_05b/{rm}/train_log.csv").exists(), rm
    assert len(pd.read_csv(run / "results/tables/correlations.csv")) > 0
    assert (run / "results/tables/correlation_summary.md").stat().st_size > 0
    for name in ["accuracy", "bon_curves", "scatter", "correlations", "ppo_training"]:
        for ext in ("png", "pdf"):
            assert (run / f"results/figures/{name}.{ext}").stat().st_size > 1000, name

