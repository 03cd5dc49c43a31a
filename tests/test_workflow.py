"""The DAG itself: lint-clean, parses offline on the paper config, lists the expected jobs."""
import re

import pytest
from helpers import REPO, dry_run, snakemake

pytestmark = pytest.mark.dag


def _job_counts(out: str) -> dict:
    """Parse the 'Job stats' table of a dry run into {rule: count}."""
    counts, in_table = {}, False
    for line in out.splitlines():
        if line.startswith("job ") and "count" in line:
            in_table = True
            continue
        if in_table:
            m = re.match(r"^(\S+)\s+(\d+)$", line.strip())
            if m:
                counts[m.group(1)] = int(m.group(2))
            elif line.strip().startswith("total"):
                break
    return counts


def test_lint_clean():
    proc = snakemake("--lint", "--profile", "profiles/demo")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Lints for rule" not in out and "Lints for snakefile" not in out, out


def test_paper_config_dry_run_offline():
    """config.yaml: every RM is scored on every benchmark; the RMs with downstream runs (not
    `downstream: false`) get BoN and PPO jobs."""
    import yaml

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    n_all = len(cfg["reward_models"])
    n_rm = sum(1 for e in cfg["reward_models"].values() if e.get("downstream", True))
    assert n_rm < n_all  # config.yaml has a benchmark-only RM
    n_bench = 1 + len(cfg["data"]["baselines"])
    n_pol = len(cfg["policies"])
    counts = _job_counts(dry_run("--forceall", cores=4).out)
    assert counts.get("score_benchmark") == n_all * n_bench
    assert counts.get("score_bon") == n_rm * n_pol
    # the authors' PPO: one policy per RM and subset (ppo.per_subset), no pooled run
    n_sub = len(cfg["data"]["personalized"]["subsets"])
    assert cfg["ppo"]["per_subset"] is True
    assert counts.get("train_ppo_subset") == n_rm * n_pol * n_sub and "train_ppo" not in counts
    assert counts.get("eval_policy_subset") == n_rm * n_pol * n_sub
    assert counts.get("sample_bon") == cfg["bon"]["shards"] * n_pol
    # the paper config trains nothing of its own: models come from the hub
    assert "train_demo_rm" not in counts and "demo_world" not in counts


def test_demo_dry_run_trains_its_own_models():
    counts = _job_counts(dry_run("--profile", "profiles/demo", "--forceall", cores=2).out)
    assert counts.get("demo_world") == 1
    assert counts.get("train_demo_policy") == 1
    # one training job per RM entry with a `train:` block
    import yaml

    cfg = yaml.safe_load((REPO / "configs/demo.yaml").read_text())
    assert counts.get("train_demo_rm") == sum("train" in e for e in cfg["reward_models"].values())
