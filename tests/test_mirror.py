"""The demo as a study with a known answer, recovered both ways (issue 34): on the demo world the
judge rates rubric following, so the BoN verdict must be "personalized", decided; the mirror
(configs/mirror.yaml: the same samples and RM scores, a general-quality judge) must give the
general baseline, decided. On 3 of 3 seeds, through the real DAG.

Sizes: more RMs than the demo's 34 (49: its family with a third training-set size, 48 members, and
length_only; the two cross-encoders, which cost most of a seed's time, are left out), on
the demo's questions (QUESTIONS per subset), a smaller personalized benchmark and train split,
BoN only. The
policy is trained once, on the seed-0 world, and then named by path (`policies.demo_policy.path`):
the seeds redraw the world's users and questions, the RMs' training, the samples and the
bootstraps, and the policy's training is the one cost a seed would not change the meaning of (it
learns the world's language, which every seed shares). The expectations were fixed before the
first run (perf/README.md, "The demo as a study")."""
import subprocess

import pandas as pd
import pytest
import yaml
from helpers import REPO, SNAKEFILE, config_rms, snakemake_bin, snakemake_env

pytestmark = [pytest.mark.slow, pytest.mark.dag]

SEEDS = (0, 1, 2)
QUESTIONS = 40  # per subset, the demo's (24 before: perf/README.md, "The mirror world's cost", the AVX2-only host)
POLICY = "results/models/policy/demo_policy"
NULL_WORLD = "results/tables/null_world.csv"
NULL_DRAWS = 400
VERDICTS = "results/tables/correlation_comparisons.csv"


def _config(seed: int, policy: str | None) -> dict:
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    cfg["seed"] = seed
    cfg["demo"].update(train_per_subset=200, test_per_subset=100)  # the demo: 500, 150
    # one baseline, the general one the mirror's judge rates against: the study's confirmatory BoN cell
    cfg["data"]["baselines"] = {"general": cfg["data"]["baselines"]["general"]}
    # more RMs than the demo, at less cost: the family with a third training-set size (48 members)
    # and length_only; the two cross-encoders (pers_profile, untrained) cost most of a seed's time
    cfg["reward_models"] = {"length_only": cfg["reward_models"]["length_only"], "heads": cfg["reward_models"]["heads"]}
    cfg["reward_models"]["heads"]["grid"]["train_pairs"] = [16, 48, 128]
    cfg["bon"].update(questions_per_subset=QUESTIONS, bootstrap=200, shards=1)
    cfg["ppo"].update(enabled=False, rms=None)
    cfg["grpo"].update(enabled=False, rms=None)
    cfg["scoring"]["bootstrap"] = 200
    cfg["correlation"].update(bootstrap=200, permutations=200, power_simulations=0)
    # the null and graded worlds on the run's own picks (seed 0's first pass only: NULL_WORLD)
    cfg["correlation"]["null_world"] = {"draws": NULL_DRAWS, "judges": ["random", "other_user"],
                                        "rm_subsets": [35, 12], "graded": True}
    if policy:
        cfg["policies"] = {"demo_policy": {"path": policy}}
    return cfg


def _start(workdir, cfg: dict, *extra, mirror=False, cores=1):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "study.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    configs = [workdir / "study.yaml"] + ([REPO / "configs" / "mirror.yaml"] if mirror else [])
    cmd = [snakemake_bin(), "--snakefile", SNAKEFILE, "--directory", workdir, "--configfiles", *configs,
           "--cores", str(cores), *extra]
    # output to a file, not a pipe: runs side by side would block on a full pipe nobody reads yet
    log = workdir / ("mirror.log" if mirror else "run.log")
    with open(log, "w") as fh:
        proc = subprocess.Popen(list(map(str, cmd)), cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                env=snakemake_env(HF_HUB_OFFLINE="1", PYTHONHASHSEED="0"))
    return proc, log


def _wait(procs: dict) -> dict:
    """Each run's output; every run must succeed."""
    for proc, _ in procs.values():
        proc.wait(timeout=2400)
    out = {k: log.read_text() for k, (_, log) in procs.items()}
    for k, (proc, _) in procs.items():
        assert proc.returncode == 0, (k, out[k][-6000:])
    return out


def _bon_verdict(workdir) -> pd.Series:
    comp = pd.read_csv(workdir / VERDICTS)
    rows = comp[(comp["family"] == "confirmatory") & (comp["downstream"] == "bon")]
    assert len(rows) == 1, comp
    return rows.iloc[0]


def _bon_scores(workdir) -> dict:
    return {p.name: p.read_bytes() for p in sorted((workdir / "results/bon/demo_policy/rm_scores").glob("*.jsonl"))}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The policy once (in seed 0's folder, on its world), then the seeds side by side (one core
    each: the BoN DAG alone leaves a core idle much of the time), first with the demo's judge, then
    with the mirror's."""
    root = tmp_path_factory.mktemp("study")
    wds = {seed: root / f"seed{seed}" for seed in SEEDS}
    # the policy in seed 0's folder: that seed's first pass reuses its world's data jobs
    _wait({"policy": _start(wds[SEEDS[0]], _config(SEEDS[0], None), POLICY, cores=2)})
    policy = str(wds[SEEDS[0]] / POLICY)
    cfgs = {seed: _config(seed, policy) for seed in SEEDS}
    _wait({seed: _start(wds[seed], cfgs[seed], VERDICTS, *([NULL_WORLD] if seed == SEEDS[0] else []))
           for seed in SEEDS})
    out = {seed: dict(workdir=wds[seed], cfg=cfgs[seed], demo=_bon_verdict(wds[seed]), scores=_bon_scores(wds[seed]),
                      judged=(wds[seed] / "results/bon/demo_policy/judged.jsonl").read_bytes()) for seed in SEEDS}
    out["null_world"] = pd.read_csv(wds[SEEDS[0]] / NULL_WORLD)
    logs = _wait({seed: _start(wds[seed], cfgs[seed], VERDICTS, mirror=True) for seed in SEEDS})
    for seed in SEEDS:
        out[seed].update(mirror=_bon_verdict(wds[seed]), log=logs[seed])
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_both_verdicts_decided(study, seed):
    run = study[seed]
    demo, mirror = run["demo"], run["mirror"]
    n_rms = len(config_rms(run["cfg"]))
    assert n_rms == 49 and demo["n_rms"] == n_rms == mirror["n_rms"]
    assert demo["benchmark_b"] == "general" == mirror["benchmark_b"]
    assert demo["verdict"] == "personalized", demo.to_dict()
    assert mirror["verdict"] == "baseline", mirror.to_dict()
    assert demo["q"] <= 0.05 and mirror["q"] <= 0.05


def test_null_world_on_the_runs_own_picks(study):
    """Seed 0's own BoN picks, the judge's ratings replaced (prbench.analysis.null_world): judges
    unrelated to both benchmarks (N(0, 1) per sample; another user's aspects by the demo world's
    vocabulary) decide the family at most 0.05 + 3 Monte Carlo SE of the time, over all 49 RMs and
    random 35- and 12-RM subsets, 400 draws each; the graded world (w x own aspects + (1 - w) x tip
    soundness) moves from "baseline" through "undecided" to "personalized" as w grows."""
    nw = study["null_world"]
    fam = nw[nw["cell"] == "family"]
    assert sorted(zip(fam["world"], fam["rms"])) == sorted(
        (w, n) for w in ("random", "other_user") for n in (49, 35, 12))
    assert (fam["draws"] == NULL_DRAWS).all()
    for _, r in fam.iterrows():
        assert r["decided"] <= r["limit"] == pytest.approx(0.05 + 3 * (0.05 * 0.95 / NULL_DRAWS) ** 0.5), r.to_dict()
    graded = nw[nw["world"] == "graded"].sort_values("w")
    assert len(graded) == 11
    order = {"baseline": 0, "undecided": 1, "personalized": 2}
    steps = [order[v] for v in graded["verdict"]]
    assert steps == sorted(steps) and steps[0] == 0 and steps[-1] == 2, graded[["w", "diff", "q", "verdict"]]


def test_mirror_changes_only_the_judge(study):
    """The mirror reran the judge and what reads it: the samples and every RM's BoN scores are the
    demo run's, byte for byte; the judge's ratings differ."""
    run = study[SEEDS[0]]
    wd = run["workdir"]
    assert run["scores"] and run["scores"] == {
        p.name: p.read_bytes() for p in sorted((wd / "results/bon/demo_policy/rm_scores").glob("*.jsonl"))}
    assert (wd / "results/bon/demo_policy/judged.jsonl").read_bytes() != run["judged"]
    for rule in ("sample_bon", "score_bon", "rm_family", "train_demo", "score_benchmark"):  # rule-name prefixes
        assert f"rule {rule}" not in run["log"], rule
    assert "rule judge_bon:" in run["log"] and "rule calibrate_judge:" in run["log"]
