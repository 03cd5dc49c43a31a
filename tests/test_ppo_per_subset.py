"""ppo.per_subset (the authors': one PPO policy per RM and subset): the DAG trains and evaluates one
run per (policy, RM, subset) on that subset's prompts and questions, and the tables read them all."""
import copy

import pytest
import yaml
from helpers import REPO, dry_run, method_rms

pytestmark = pytest.mark.dag

DEMO = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
SUBSETS = DEMO["data"]["personalized"]["subsets"]
RMS = method_rms(DEMO, "ppo")  # ppo.rms: the RMs PPO trains with
POLICY = list(DEMO["policies"])[0]


@pytest.fixture(scope="module")
def per_subset(tmp_path_factory):
    cfg = copy.deepcopy(DEMO)
    cfg["ppo"]["per_subset"] = True
    path = tmp_path_factory.mktemp("per_subset") / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dry_run(workdir=path.parent / "wd", configfile=path)


def test_one_training_and_evaluation_per_rm_and_subset(per_subset):
    jobs = per_subset.jobs
    assert not [j for j in jobs if j.rule == "train_ppo"]  # no pooled PPO run
    train = [j for j in jobs if j.rule == "train_ppo_subset"]
    assert sorted((j.wildcards["rm"], j.wildcards["subset"]) for j in train) == sorted(
        (r, s) for r in RMS for s in SUBSETS)
    for j in train:  # every run trains from the shared prompt file (the job keeps its subset's rows)
        assert "results/data/prompts/train.jsonl" in j.input
        assert f"results/ppo/{POLICY}/{j.wildcards['rm']}/{j.wildcards['subset']}/model" in j.output
    evals = [j for j in jobs if j.rule == "eval_policy_subset"]
    assert sorted((j.wildcards["rm"], j.wildcards["subset"]) for j in evals) == sorted(
        (r, s) for r in RMS for s in SUBSETS)
    assert {j.wildcards["method"] for j in evals} == {"ppo"}
    for j in evals:
        assert f"results/ppo/{POLICY}/{j.wildcards['rm']}/{j.wildcards['subset']}/model" in j.input
    # GRPO stays pooled: its evaluation is the ordinary rule
    assert {j.wildcards["method"] for j in jobs if j.rule == "eval_policy"} == {"grpo"}


def test_the_tables_read_every_subset_run(per_subset):
    claim = DEMO["ppo"]["claim"]  # the claim's RM: claim.seeds runs per subset (seed r > 0 in seed{r}/)
    seeds = {r: [""] + [f"seed{k}/" for k in range(1, claim["seeds"] if r == claim["rm"] else 1)] for r in RMS}
    want = {f"results/ppo/{POLICY}/{r}/{s}/{d}eval_judged.jsonl" for r in RMS for s in SUBSETS for d in seeds[r]}
    logs = {f"results/ppo/{POLICY}/{r}/{s}/{d}train_log.csv" for r in RMS for s in SUBSETS for d in seeds[r]}
    (table,) = [j for j in per_subset.jobs if j.rule == "ppo_table"]
    assert set(table.input) == want | logs  # the judged answers, and the training logs' reward rise
    (measures,) = [j for j in per_subset.jobs if j.rule == "judged_measures" and j.wildcards["method"] == "ppo"]
    assert set(measures.input) == want
    (claim_job,) = [j for j in per_subset.jobs if j.rule == "claim_table" and j.wildcards["method"] == "ppo"]
    assert set(claim_job.input) == {f for f in want | logs if f"/{claim['rm']}/" in f}  # every subset and seed
    (fig,) = [j for j in per_subset.jobs if j.rule == "fig_training" and j.wildcards["method"] == "ppo"]
    assert set(fig.input) == {f"results/ppo/{POLICY}/{r}/{s}/train_log.csv" for r in RMS for s in SUBSETS}


def test_pooled_default_keeps_its_paths(tmp_path):
    run = dry_run(workdir=tmp_path / "wd", configfile=REPO / "configs" / "demo.yaml")
    assert not run.rules & {"train_ppo_subset", "eval_policy_subset"}
    train = [j for j in run.jobs if j.rule == "train_ppo"]
    assert {o for j in train for o in j.output if o.endswith("/model")} == {
        f"results/ppo/{POLICY}/{r}/model" for r in RMS}
