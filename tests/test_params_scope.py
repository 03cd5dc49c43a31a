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
from synthetic_analysis import demo_config_for_world

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
    cfg = wd.parent / "params_scope_demo.yaml"
    cfg.write_text(yaml.safe_dump(DEMO, sort_keys=False))
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


# the demo config with the RM set of kinds these tests separate (classifiers, a length RM, a generative
# pairwise judge: tests/synthetic_analysis.py RM_ENTRIES); the RM family's keys are in tests/test_param_keys.py
DEMO = demo_config_for_world(yaml.safe_load((REPO / "configs" / "demo.yaml").read_text()))
# the whole DAG writes BoN's per-sample files: the null worlds as the demo has them
DEMO["correlation"]["null_world"] = yaml.safe_load(
    (REPO / "configs" / "demo.yaml").read_text())["correlation"]["null_world"]


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
     {"bon_table", "bon_measures", "correlations", "fig_bon_curves", "fig_scatter", "fig_correlations",
      "leaderboard", "null_world"}),
    ("scoring_bootstrap", _edit("scoring", "bootstrap", 77),
     {"accuracy_table", "fig_accuracy", "benchmark_reports", "leaderboard"}),
    ("correlation_bootstrap", _edit("correlation", "bootstrap", 77),
     {"correlations", "fig_correlations", "fig_scatter", "leaderboard", "null_world"}),
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
TABLE_AND_ANALYSIS = {"accuracy_table", "benchmark_reports", "bon_table", "ppo_table", "grpo_table", "correlations",
                      "fig_accuracy", "fig_bon_curves", "fig_scatter", "fig_correlations", "fig_training",
                      "bon_measures", "judged_measures", "leaderboard", "null_world"}


def test_key_order_reruns_nothing(scratch, tmp_path):
    cfg = _reverse_keys(DEMO)
    for section in ("reward_models", "policies"):
        cfg[section] = {k: _reverse_keys(DEMO[section][k]) for k in DEMO[section]}
    assert list(cfg) != list(DEMO)
    assert _dry_run(scratch, cfg, tmp_path, "reordered") == set()


def test_replicate_keys_add_jobs_and_reach_only_the_tables(scratch, tmp_path):
    """bon.sample_sets, ppo.seeds, grpo.seeds = 2: the extra replicate's jobs (under set1/ and seed1/)
    plus the jobs that read every replicate (the tables and measures, their analysis); replicate 0's
    sampling, training and evaluation (same paths, same seed) rerun nothing."""
    cfg = copy.deepcopy(DEMO)
    cfg["bon"]["sample_sets"] = 2
    cfg["ppo"]["seeds"] = 2
    cfg["grpo"]["seeds"] = 2
    jobs = _dry_run(scratch, cfg, tmp_path, "replicates")
    extra = {"sample_bon_set", "merge_samples_set", "judge_bon_set", "score_bon_set", "train_ppo_seed",
             "train_grpo_seed", "eval_policy_seed"}
    assert extra <= jobs
    assert {"bon_table", "bon_measures", "judged_measures", "ppo_table", "grpo_table", "correlations"} <= jobs
    # the run manifest records the validated config's hash: any edit reruns it (a seconds-long job)
    assert jobs - extra - {"manifest"} <= TABLE_AND_ANALYSIS
    assert not jobs & {"sample_bon", "judge_bon", "score_bon", "train_ppo", "train_grpo", "eval_policy",
                       "base_answers", "fig_training"}


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


def test_ppo_reward_scale_reaches_train_ppo(scratch, tmp_path):
    """ppo.reward_scale is read by train_ppo (the reward it trains on), not by the evaluation."""
    jobs = _dry_run(scratch, _edit("ppo", "reward_scale", 0.1), tmp_path, "ppo_reward_scale")
    assert {"train_ppo", "eval_policy", "ppo_table"} <= jobs
    assert not jobs & {"base_answers", "train_grpo", "grpo_table"}


def test_ppo_eval_top_p_reaches_the_evaluation(scratch, tmp_path):
    """ppo.eval_top_p is read by the evaluation's answer generation (base and trained policies),
    never by a training job."""
    jobs = _dry_run(scratch, _edit("ppo", "eval_top_p", 0.8), tmp_path, "ppo_eval_top_p")
    assert {"base_answers", "eval_policy", "ppo_table", "grpo_table"} <= jobs
    assert not jobs & {"train_ppo", "train_grpo"}


# The RM-side protocol keys (config `scoring` pairwise rules, section `reward`) reach exactly the jobs
# of the RMs they apply to: demo RMs are classifiers, one length RM and one generative_pairwise judge.
DEMO_KINDS = {rm: e["kind"] for rm, e in DEMO["reward_models"].items()}
CLASSIFIERS = {rm for rm, k in DEMO_KINDS.items() if k == "classifier"}
GENERATIVE = {rm for rm, k in DEMO_KINDS.items() if k.startswith("generative")}


def _rm_jobs(wd: Path, cfg: dict, tmp_path: Path, name: str) -> dict[str, set[str]]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run = dry_run("--rerun-triggers", "params", workdir=wd, configfile=path, timeout=240)
    out: dict[str, set[str]] = {}
    for job in run.jobs:
        if "rm" in job.wildcards:
            out.setdefault(job.rule, set()).add(job.wildcards["rm"])
    return out


def test_pairwise_scoring_keys_reach_only_the_pairwise_judges_benchmark_jobs(scratch, tmp_path):
    assert GENERATIVE and CLASSIFIERS
    cfg = copy.deepcopy(DEMO)
    cfg["scoring"].update(order_seed=42, order_rule="sequential", pairwise_parse="first_result",
                          pairwise_failure="predict_a")
    jobs = _rm_jobs(scratch, cfg, tmp_path, "pairwise_rules")
    assert jobs == {"score_benchmark": GENERATIVE}


def test_classifier_input_keys_reach_only_the_classifiers_jobs(scratch, tmp_path):
    """scoring.add_special_tokens and scoring.truncation: the classifier RMs' benchmark scoring and
    their downstream reward jobs rerun, no other RM's."""
    assert CLASSIFIERS
    cfg = copy.deepcopy(DEMO)
    cfg["scoring"].update(add_special_tokens=True, truncation="right")
    jobs = _rm_jobs(scratch, cfg, tmp_path, "classifier_input")
    assert jobs.get("score_benchmark") == CLASSIFIERS, jobs
    for rule in ("score_bon", "train_ppo", "train_grpo"):
        assert jobs.get(rule) == CLASSIFIERS, (rule, jobs)


@pytest.mark.parametrize("reward,rerun", [
    ({"profile": "always"}, CLASSIFIERS),
    ({"generative": "pointwise"}, GENERATIVE),
    ({"generative_max_new_tokens": 7, "generative_failure_score": 0.25, "generative_parse": "authors"},
     set()),  # read only under pointwise
], ids=["profile_always", "generative_pointwise", "pointwise_settings_under_round_robin"])
def test_reward_keys_reach_the_downstream_jobs_of_their_rms(scratch, tmp_path, reward, rerun):
    cfg = copy.deepcopy(DEMO)
    cfg["reward"] = reward
    jobs = _rm_jobs(scratch, cfg, tmp_path, "reward")
    if not rerun:
        assert jobs == {}
        return
    assert "score_benchmark" not in jobs  # the benchmark input is the RM's own
    for rule in ("score_bon", "train_ppo", "train_grpo"):
        assert jobs.get(rule) == rerun, (rule, jobs)
