"""The data rules parse and wire up: demo_world feeds the prepare rules in the demo; the paper
config (hub sources) needs no input files and no network at parse time."""
import pytest
from helpers import dry_run

pytestmark = pytest.mark.dag

DATA_TARGETS = ["results/data/reports/personalized.json", "results/data/benchmarks/personalized.jsonl",
                "results/data/judge_keys/personalized.jsonl", "results/data/prompts/eval.jsonl"]


def _dry(targets, *extra):
    return dry_run("--forceall", *extra, targets=targets).out


@pytest.mark.parametrize("variant", ["demo", "paper"])
def test_data_rules_dry_run(variant):
    if variant == "demo":
        out = _dry(DATA_TARGETS + ["results/data/train/general.jsonl", "results/data/train/personalized.jsonl"],
                   "--configfile", "configs/demo.yaml")
        assert "demo_world" in out and "prepare_personalized" in out and "prepare_baseline" in out
    else:
        out = _dry(DATA_TARGETS + ["results/data/benchmarks/rewardbench.jsonl",
                                   "results/data/benchmarks/rmbench.jsonl"])
        assert "demo_world" not in out and "prepare_personalized" in out and "prepare_baseline" in out
