"""A paper run where one RM's jobs fail (issue 24): configs/test.yaml plus an RM `broken` whose model
folder has a corrupt weight file, run with --keep-going on a copy of a complete test-config run.

- the run exits non-zero, yet the tables, figures and a report cover the four RMs that finished;
- results/tables/missing_rms.csv names `broken`, each failed rule and its log (the logs exist and
  hold the loader's error); the correlation summary states n and the missing RM; the figures are
  redrawn for the partial set;
- once the folder is fixed, a plain rerun runs only `broken`'s jobs and the aggregates and exits 0,
  and the tables then cover all five RMs.
"""
import json
import shutil

import pandas as pd
import pytest
import yaml
from helpers import REPO, SNAKEFILE, config_rms, method_rms, snakemake, snakemake_env

pytestmark = [pytest.mark.slow, pytest.mark.dag]

BROKEN = "broken"
# Jobs of the aggregate stages: the ones a partial run and the fixing rerun may run besides the RM's own.
AGGREGATES = {"accuracy_table", "bon_table", "bon_measures", "ppo_table", "grpo_table", "judged_measures",
              "correlations", "missing_rms", "fig_accuracy", "fig_bon_curves", "fig_scatter", "fig_correlations",
              "fig_training", "manifest", "benchmark_reports", "leaderboard", "all"}


def _run(workdir, config, *extra):
    proc = snakemake("--snakefile", SNAKEFILE, "--directory", workdir, "--configfile", config, "--cores", "2",
                     *extra, env=snakemake_env(HF_HUB_OFFLINE="1", PYTHONHASHSEED="0"), timeout=1800)
    return proc.returncode, proc.stdout + proc.stderr


def _jobs_run(out: str) -> list[tuple[str, str]]:
    """(rule, wildcards line) of every job Snakemake started, from its log."""
    jobs, rule = [], None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith(("rule ", "localrule ")) and s.endswith(":"):
            rule = s.split()[1][:-1]
            jobs.append([rule, ""])
        elif rule and s.startswith("wildcards:"):
            jobs[-1][1] = s
        elif not s:
            rule = None
    return [tuple(j) for j in jobs]


@pytest.fixture(scope="module")
def partial_run(test_config_run, tmp_path_factory):
    base, _ = test_config_run
    work = tmp_path_factory.mktemp("partial") / "w"
    shutil.copytree(base, work, symlinks=True)
    good = work / "results/models/rm/pers_profile"
    folder = work / "broken_model"
    shutil.copytree(good, folder)
    (folder / "model.safetensors").write_bytes(b"\x00corrupt" * 64)
    cfg = yaml.safe_load((REPO / "configs/test.yaml").read_text())
    cfg["reward_models"][BROKEN] = {"kind": "classifier", "use_profile": True, "path": "broken_model"}
    for method in ("ppo", "grpo"):  # the broken RM trains a policy too
        if cfg[method].get("rms") is not None:
            cfg[method]["rms"] = [*cfg[method]["rms"], BROKEN]
    config = work / "config.broken.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    rc, out = _run(work, config, "--keep-going")
    return work, config, rc, out, good, folder


def test_partial_run_exits_nonzero_and_names_the_missing_rm(partial_run):
    work, _, rc, out, *_ = partial_run
    assert rc != 0, out[-4000:]
    assert f"Partial run: 1 RM(s) missing: {BROKEN} (rule score_benchmark" in out, out[-6000:]
    missing = pd.read_csv(work / "results/tables/missing_rms.csv")
    assert set(missing["rm"]) == {BROKEN}
    assert {"score_benchmark", "score_bon", "train_ppo", "train_grpo"} <= set(missing["rule"])
    for log in missing["log"]:
        text = (work / log).read_text()
        # the loader's error names the config key and the folder
        assert f"config key reward_models.{BROKEN}.path: corrupt or truncated safetensors weights in" in text, log
        assert "broken_model" in text, log


def test_partial_outputs_cover_the_other_rms(partial_run):
    work, *_ = partial_run
    cfg = yaml.safe_load((REPO / "configs/test.yaml").read_text())
    rms = config_rms(cfg)
    assert set(pd.read_csv(work / "results/tables/benchmark_accuracy.csv")["rm"]) == set(rms)
    for method in ("ppo", "grpo"):
        assert set(pd.read_csv(work / "results/tables" / f"{method}.csv")["rm"]) == set(method_rms(cfg, method))
    assert set(rms) <= set(pd.read_csv(work / "results/tables/bon.csv")["rm"])
    assert BROKEN not in set(pd.read_csv(work / "results/tables/bon.csv")["rm"])
    summary = (work / "results/tables/correlation_summary.md").read_text()
    # the summary opens with the verdict; the n line follows it
    assert summary.startswith("# Which benchmark predicts downstream quality?\n\n<!-- verdict -->\n")
    after = summary.split("<!-- /verdict -->\n\n", 1)[1]
    first = after.splitlines()[0]
    # in the config's order (the second run's config keeps it), then the missing RM with its failures
    assert first.startswith(f"n = {len(rms)} RMs: {', '.join(rms)}. Partial run"), first
    assert f"missing: {BROKEN} (rule" in first, first
    missing_time = (work / "results/tables/missing_rms.csv").stat().st_mtime
    for name in ["accuracy", "bon_curves", "scatter", "correlations", "ppo_training", "grpo_training"]:
        assert (work / f"results/figures/{name}.png").stat().st_mtime >= missing_time - 60, name
    report = (work / "results/report_partial.html").read_text(errors="replace")
    assert "missing_rms.csv" in report


def test_fixed_rm_reruns_only_its_jobs_and_the_aggregates(partial_run):
    work, config, rc, _, good, folder = partial_run
    assert rc != 0
    key = f"reward_models.{BROKEN}.path"
    before = json.loads((work / "results/manifest.json").read_text())["models_and_data"][key]["digest"]["sha256"]
    shutil.copy2(good / "model.safetensors", folder / "model.safetensors")
    rc2, out2 = _run(work, config)
    assert rc2 == 0, out2[-6000:]
    jobs = _jobs_run(out2)
    others = [(r, w) for r, w in jobs if r not in AGGREGATES and f"rm={BROKEN}" not in w]
    assert others == [], others
    assert {r for r, w in jobs if f"rm={BROKEN}" in w} >= {"score_benchmark", "score_bon", "train_ppo", "train_grpo"}
    acc = pd.read_csv(work / "results/tables/benchmark_accuracy.csv")
    assert BROKEN in set(acc["rm"])
    assert len(pd.read_csv(work / "results/tables/missing_rms.csv")) == 0
    assert "Partial run" not in (work / "results/tables/correlation_summary.md").read_text()
    # the run manifest follows the model file: the fixed folder has another digest
    after = json.loads((work / "results/manifest.json").read_text())["models_and_data"][key]["digest"]["sha256"]
    assert after != before
