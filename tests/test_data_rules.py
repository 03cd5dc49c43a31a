"""The data rules parse and wire up: demo_world feeds the prepare rules in the demo; the paper
config (hub sources) needs no input files and no network at parse time."""
import subprocess

import pytest
from conftest import snakemake_bin

DATA_TARGETS = ["results/data/reports/personalized.json", "results/data/benchmarks/personalized.jsonl",
                "results/data/judge_keys/personalized.jsonl", "results/data/prompts/eval.jsonl"]


def _dry(repo, targets, *extra):
    cmd = [snakemake_bin(), "-n", "--cores", "1", "--forceall", *targets, *extra]
    res = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout + res.stderr


@pytest.mark.parametrize("variant", ["demo", "paper"])
def test_data_rules_dry_run(repo, variant):
    if variant == "demo":
        out = _dry(repo, DATA_TARGETS + ["results/data/train/general.jsonl", "results/data/train/personalized.jsonl"],
                   "--configfile", "configs/demo.yaml")
        assert "demo_world" in out and "prepare_personalized" in out and "prepare_baseline" in out
    else:
        out = _dry(repo, DATA_TARGETS + ["results/data/benchmarks/rewardbench.jsonl",
                                         "results/data/benchmarks/rmbench.jsonl"])
        assert "demo_world" not in out and "prepare_personalized" in out and "prepare_baseline" in out
