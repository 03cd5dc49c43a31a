"""reward_models.<rm>.downstream false: the RM is scored on the benchmarks only."""
import pytest
from helpers import dry_run

pytestmark = pytest.mark.dag

RM = "qwen25_7b_pointwise"  # config.yaml: downstream false (the same downstream reward as qwen25_7b_pairwise)


def test_benchmark_only_rm_has_no_downstream_jobs():
    run = dry_run("--forceall", "--configfile", "config.yaml")
    mine = [j for j in run.jobs if j.wildcards.get("rm") == RM]
    assert {j.rule for j in mine} == {"score_benchmark"}, sorted({j.rule for j in mine})
    assert "correlations" in run.rules and "score_bon" in run.rules and "train_ppo_subset" in run.rules
    corr = next(j for j in run.jobs if j.rule == "correlations")
    assert not any(f"results/scores/{RM}/" in f for f in corr.input)
    acc = next(j for j in run.jobs if j.rule == "accuracy_table")  # the benchmark table keeps every RM
    assert any(f"results/scores/{RM}/" in f for f in acc.input)
