"""The demo as a study with a known answer, recovered both ways (issue 34): on the demo world the
judge rates rubric following, so the BoN verdict must be "personalized", decided; the mirror
(configs/mirror.yaml: the same samples and RM scores, a general-quality judge) must give the
general baseline, decided. On 3 of 3 seeds, through the real DAG.

Sizes: the demo's RMs (35: its 32-member family, pers_profile, untrained, length_only) on fewer
questions (QUESTIONS per subset instead of 40), smaller benchmarks and train splits, BoN only. The
policy is trained once, on the seed-0 world, and then named by path (`policies.demo_policy.path`):
the seeds redraw the world's users and questions, the RMs' training, the samples and the
bootstraps, and the policy's training is the one cost a seed would not change the meaning of (it
learns the world's language, which every seed shares). The expectations were fixed before the
first run (perf/README.md, "The demo as a study")."""
import shutil

import pandas as pd
import pytest
import yaml
from helpers import REPO, SNAKEFILE, config_rms, snakemake, snakemake_env

pytestmark = [pytest.mark.slow, pytest.mark.dag]

SEEDS = (0, 1, 2)
QUESTIONS = 16  # per subset (the demo: 40)
POLICY = "results/models/policy/demo_policy"
VERDICTS = "results/tables/correlation_comparisons.csv"


def _config(seed: int, policy: str | None) -> dict:
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    cfg["seed"] = seed
    cfg["demo"].update(train_per_subset=250, test_per_subset=100, general_train=600, general_test=200)
    cfg["bon"].update(questions_per_subset=QUESTIONS, bootstrap=200)
    cfg["ppo"]["enabled"] = False
    cfg["grpo"]["enabled"] = False
    cfg["scoring"]["bootstrap"] = 200
    cfg["correlation"].update(bootstrap=200, permutations=200, power_simulations=0)
    if policy:
        cfg["policies"] = {"demo_policy": {"path": policy}}
    return cfg


def _run(workdir, cfg: dict, *extra, mirror=False):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "study.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    configs = [workdir / "study.yaml"] + ([REPO / "configs" / "mirror.yaml"] if mirror else [])
    proc = snakemake("--snakefile", SNAKEFILE, "--directory", workdir, "--configfiles", *configs, "--cores", "2",
                     *extra, env=snakemake_env(HF_HUB_OFFLINE="1", PYTHONHASHSEED="0"), timeout=1800)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    return proc.stdout + proc.stderr


def _bon_verdict(workdir) -> pd.Series:
    comp = pd.read_csv(workdir / VERDICTS)
    rows = comp[(comp["family"] == "confirmatory") & (comp["downstream"] == "bon")]
    assert len(rows) == 1, comp
    return rows.iloc[0]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    _run(root / "policy", _config(0, None), POLICY)  # the policy, once
    policy = root / "policy" / POLICY
    out = {}
    for seed in SEEDS:
        wd = root / f"seed{seed}"
        cfg = _config(seed, str(policy))
        _run(wd, cfg, VERDICTS)
        demo = _bon_verdict(wd)
        judged = (wd / "results/bon/demo_policy/judged.jsonl").read_bytes()
        scores = {p.name: p.read_bytes() for p in sorted((wd / "results/bon/demo_policy").glob("rm_scores/*.jsonl"))}
        log = _run(wd, cfg, VERDICTS, mirror=True)
        out[seed] = dict(workdir=wd, cfg=cfg, demo=demo, mirror=_bon_verdict(wd), log=log, judged=judged,
                         scores=scores)
    shutil.rmtree(root / "policy", ignore_errors=True)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_both_verdicts_decided(study, seed):
    run = study[seed]
    demo, mirror = run["demo"], run["mirror"]
    n_rms = len(config_rms(run["cfg"]))
    assert n_rms == 35 and demo["n_rms"] == n_rms == mirror["n_rms"]
    assert demo["benchmark_b"] == "general" == mirror["benchmark_b"]
    assert demo["verdict"] == "personalized", demo.to_dict()
    assert mirror["verdict"] == "baseline", mirror.to_dict()
    assert demo["q"] <= 0.05 and mirror["q"] <= 0.05


def test_mirror_changes_only_the_judge(study):
    """The mirror reran the judge and what reads it: the samples and every RM's BoN scores are the
    demo run's, byte for byte; the judge's ratings differ."""
    run = study[SEEDS[0]]
    wd = run["workdir"]
    assert run["scores"] and run["scores"] == {
        p.name: p.read_bytes() for p in sorted((wd / "results/bon/demo_policy").glob("rm_scores/*.jsonl"))}
    assert (wd / "results/bon/demo_policy/judged.jsonl").read_bytes() != run["judged"]
    for rule in ("sample_bon", "score_bon", "rm_family_heads", "train_demo_rm", "score_benchmark"):
        assert f"rule {rule}:" not in run["log"] and f"rule {rule} " not in run["log"], rule
