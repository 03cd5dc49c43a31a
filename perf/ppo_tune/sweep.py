"""The demo's PPO / GRPO tuning sweep: rerun one recorded setting of runs.csv on a finished demo run.

    python perf/ppo_tune/sweep.py list
    python perf/ppo_tune/sweep.py run NAME|INDEX [--seed S] [--snap K] [--eval-samples N] [--out CSV]
    python perf/ppo_tune/sweep.py pool NAME --seeds S [S ...]

Run `run` from the root of a finished `make demo` (it reads results/ and writes under results/ppo_tune/).
The training job's and the evaluation job's params come from the demo's DAG (Snakemake's API, configs/
demo.yaml; nothing in results/ is rebuilt). The setting is the PPO or GRPO section of configs/demo.yaml at
the row's `world` commit (git), with the keys today's configs/demo.yaml sets and that one did not at their
schema default, plus the row's `overrides`; `seed` is the training seed (`train_ppo`'s / `train_grpo`'s
`seed`). The reward: the row's RM; `contrast` = pers_profile with the prompt's profile minus pers_profile
with another user's; `judge` = the demo judge on the training question's rubric aspects; `pers_profile+
corrupted:S` = pers_profile retrained with a share S of extra pairs, a chosen answer against a corrupted
copy of it. The policy is evaluated as rule eval_policy does (the demo's base answers, judge and cache),
`--eval-samples` answers per question when given, and the row is written like the table's (paired
difference with tables/ppo.csv's bootstrap seed, the reward rise of prbench.downstream.reward_rise).
`pool` decides the demo's learning claim (prbench.downstream.claim) over the `run`s of one setting with
the given training seeds, from their final policies' judged answers and training logs: one row per seed
and the pooled row, exactly as tables/ppo_claim.csv computes them.
"""
from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
TABLE = Path(__file__).with_name("runs.csv")
POLICY = "demo_policy"
# keys of a ppo / grpo section that are not the training's (the evaluation, the DAG's choices)
NOT_TRAINING = {"enabled", "rms", "seeds", "bootstrap", "eval_greedy", "eval_top_p", "eval_samples",
                "eval_max_new_tokens", "eval_batch_size", "eval_questions_per_subset", "eval_posts"}


def read_table(path: Path = TABLE) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def find(rows: list[dict], key: str) -> dict:
    """The row with that index, else the first training run of that name."""
    hits = [r for r in rows if r["index"] == key] or [r for r in rows if r["name"] == key and not r["snapshot"]]
    hits = [r for r in hits if r["method"] in ("ppo", "grpo")]
    if not hits:
        sys.exit(f"sweep: no training run {key!r} in {TABLE.name} (`list` shows them; 'base' rows train nothing)")
    return hits[0]


def setting(row: dict) -> dict:
    """The training keys of the row's run (module docstring)."""
    method = row["method"]
    old = yaml.safe_load(subprocess.run(["git", "show", f"{row['world']}:configs/demo.yaml"], cwd=REPO, check=True,
                                        capture_output=True, text=True).stdout)[method]
    now = yaml.safe_load((REPO / "configs/demo.yaml").read_text())[method]
    schema = yaml.safe_load((REPO / "schemas/config.schema.yaml").read_text())["properties"][method]["properties"]
    keys = {k: schema[k].get("default") for k in now if k not in old and k in schema}
    keys |= old | json.loads(row["overrides"])
    return {k: v for k, v in keys.items() if k not in NOT_TRAINING}


def job_params(method: str, rm: str) -> tuple[dict, dict]:
    """(train job params, eval_policy job params) of (method, demo_policy, rm) in the demo's DAG."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings

    config = yaml.safe_load((REPO / "configs/demo.yaml").read_text())
    # any RM of the demo, whether or not the method trains with it there (its DAG only knows `rms`)
    config[method]["rms"] = list(dict.fromkeys([*(config[method].get("rms") or []), rm]))
    target = f"results/{method}/{POLICY}/{rm}/eval_judged.jsonl"
    cwd, path = os.getcwd(), list(sys.path)
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
            wf = api.workflow(ResourceSettings(cores=1), ConfigSettings(config=config),
                              snakefile=REPO / "Snakefile", workdir=Path(cwd))
            wf.dag(DAGSettings(targets=[target], forceall=True))
            workflow = wf._workflow
            workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            jobs = {job.rule.name: job for job in workflow.dag.jobs}
            return (dict(jobs[f"train_{method}"].params.items()), dict(jobs["eval_policy"].params.items()))
    finally:
        os.chdir(cwd)
        sys.path[:] = path


def patch_reward(reward: str, judge_cfg: dict, seed: int) -> None:
    """The rewards that are not an RM of the config: RewardAdapter.score_requests replaced."""
    import numpy as np

    from prbench.downstream import reward_adapter as adapter
    from prbench.io import read_jsonl

    if reward == "contrast":
        profiles = sorted({(tuple(r.get("profile", [])), tuple(r.get("profile_categories", [])))
                           for r in read_jsonl("results/data/prompts/train.jsonl")})
        other = {p: profiles[(i + len(profiles) // 2) % len(profiles)] for i, p in enumerate(profiles)}
        own_score = adapter.RewardAdapter.score_requests

        def score(self, requests):
            alt = [dataclasses.replace(r, profile=o[0], categories=o[1]) for r in requests
                   for o in [other.get((tuple(r.profile), tuple(r.categories)),
                                       profiles[hash(r.profile) % len(profiles)])]]
            return own_score(self, requests) - np.asarray(self.rm.score(alt).scores, float) * self.reward_scale
    elif reward == "judge":
        from prbench.judge import JudgeItem, load_judge

        judge, by_question = load_judge(judge_cfg, seed), {}
        for raw in Path("results/demo/raw/personalized").glob("*/train.jsonl"):
            for r in read_jsonl(raw):
                by_question.setdefault(r["question"], []).append(
                    ({p["text"] for p in r["profile"]}, tuple(a["aspect"] for a in r["rubric_aspects"])))

        def aspects(req):  # the training row whose profile shares most posts with the prompt's
            return max(by_question[req.question], key=lambda c: len(c[0] & set(req.profile)))[1]

        def score(self, requests):
            res = judge.judge([JudgeItem(question=r.question, answer=r.answer, aspects=aspects(r)) for r in requests])
            sc = np.array([x.score for x in res], dtype=np.float64)
            for st in (self.stats, self.total):
                st.scored += len(requests)
                st.raw.extend(float(v) for v in sc)
            return np.nan_to_num(sc) * self.reward_scale
    else:
        return
    adapter.RewardAdapter.score_requests = score


def corrupted_rm(spec: dict, share: float, out: str) -> str:
    """pers_profile's training with a share of extra pairs: a chosen answer against a corrupted copy of it
    (a sentence repeated, a word doubled or two sentences spliced)."""
    import numpy as np

    from prbench.training import rm as train_rm

    def corrupt(text, rng):
        s = re.split(r"(?<=[.!?])\s+", text.strip())
        kind = int(rng.integers(3))
        if kind == 0 and len(s) > 2:
            i, j = rng.choice(len(s), 2, replace=False)
            s[i] = s[j]
        elif kind == 1 or len(s) < 2:
            i = int(rng.integers(len(s)))
            w = s[i].split()
            k = int(rng.integers(len(w)))
            w.insert(k, w[k])
            s[i] = " ".join(w)
        else:
            i, j = rng.choice(len(s), 2, replace=False)
            a, b = s[i].split(), s[j].split()
            s[i] = " ".join(a[: len(a) // 2] + b[len(b) // 2:])
        return " ".join(s)

    sample_mix = train_rm.sample_mix

    def with_corrupted(*a, **k):
        rows, rng = sample_mix(*a, **k), np.random.default_rng(0)
        return rows + [dict(r, rejected=corrupt(r["chosen"], rng)) for r in rows if rng.random() < share]

    train_rm.sample_mix = with_corrupted
    cfg = yaml.safe_load((REPO / "configs/demo.yaml").read_text())["demo_training"]["rm"]
    train_rm.train_demo_rm({k: v for k, v in spec.items() if k != "path"},
                           {"personalized": "results/data/train/personalized.jsonl"}, out, cfg, seed=0, threads=1)
    train_rm.sample_mix = sample_mix
    return out


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(row: dict, seed: int | None, snap: int, eval_samples: int | None, out_csv: str) -> list[dict]:
    import torch

    torch.set_num_threads(1)
    method, reward = row["method"], row["reward"]
    rm = rm_of(reward)
    train_p, eval_p = job_params(method, rm)
    from prbench.prompts import configure

    configure(dict(train_p["prompts"]))
    import pandas as pd
    from transformers import TrainerCallback

    from prbench.downstream.evaluation import eval_policy, paired_diff, write_base_answers
    from prbench.downstream.reward_rise import reward_rise
    from prbench.io import read_jsonl
    from prbench.seeding import stable_seed

    seed = int(row["seed"]) if seed is None else seed
    out = run_dir(row, seed)
    os.makedirs(out, exist_ok=True)
    spec = copy.deepcopy(dict(train_p["rm_spec"]))
    if reward.startswith("pers_profile+corrupted:"):
        spec["path"] = corrupted_rm(spec, float(reward.split(":")[1]), f"{out}/rm")
    patch_reward(reward, dict(eval_p["judge"]), seed)

    class Snapshots(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, processing_class=None, **kw):
            if snap and state.global_step % snap == 0:
                for obj in (getattr(model, "policy", model), processing_class):
                    obj.save_pretrained(f"{out}/snap-{state.global_step:03d}")
            return control

    cfg = dict(train_p[method]) | setting(row)
    c0, t0 = cpu_seconds(), time.time()
    if method == "ppo":
        from prbench.downstream.ppo.train import train_ppo as train
    else:
        from prbench.downstream.grpo.train import train_grpo as train
    train(train_p["policy_path"], spec, "results/data/prompts/train.jsonl", out, f"{out}/model",
          f"{out}/train_log.csv", cfg, seed, run_name=row["name"], callbacks=[Snapshots()])
    train_cpu, train_wall = cpu_seconds() - c0, time.time() - t0
    ev = dict(eval_p["ppo"]) | ({"eval_samples": eval_samples} if eval_samples else {})
    evaluation = "greedy" if ev.get("eval_greedy") else f"pipeline (eval_policy), T {ev.get('temperature')}, " \
                                                         f"top_p {ev.get('eval_top_p')}"
    base = f"results/ppo/{POLICY}/base_answers.jsonl"
    if ev.get("eval_samples", 1) != eval_p["ppo"].get("eval_samples", 1):  # the base policy's as many answers
        base = f"results/ppo_tune/base_answers_n{eval_samples}.jsonl"
        if not os.path.exists(base):
            write_base_answers(train_p["policy_path"], "results/data/prompts/eval.jsonl", base, ev, eval_p["seed"])
    rise = reward_rise([f"{out}/train_log.csv"])
    n_boot = yaml.safe_load((REPO / "configs/demo.yaml").read_text())[method].get("bootstrap", 1000)
    results = []
    for model in sorted(Path(out).glob("snap-*")) + [Path(out) / "model"]:
        judged = f"{out}/eval_{model.name}.jsonl"
        eval_policy(str(model), base, "results/data/prompts/eval.jsonl",
                    "results/data/judge_keys/personalized.jsonl", dict(eval_p["judge"]), eval_p["cache"], judged,
                    ev, eval_p["seed"])
        df = pd.DataFrame(read_jsonl(judged))
        diff = paired_diff(df, n_boot, stable_seed(eval_p["seed"], "ppo-table-diff", POLICY, rm))  # as tables/ppo.csv
        final = model.name == "model"
        results.append(dict(row, snapshot="" if final else model.name, seed=seed, evaluation=evaluation,
                            answers=ev.get("eval_samples", 1), mean=df["score"].mean(),
                            base=df["base_score"].mean(), **diff,
                            reward_rise=rise[0] if final else "", reward_rise_ci_low=rise[1] if final else "",
                            reward_rise_ci_high=rise[2] if final else "",
                            train_cpu_s=round(train_cpu, 1), train_wall_s=round(train_wall, 1)))
    new = not os.path.exists(out_csv)
    os.makedirs(os.path.dirname(out_csv) or ".", exist_ok=True)
    with open(out_csv, "a", newline="") as f:
        w = csv.DictWriter(f, list(row), lineterminator="\n")
        if new:
            w.writeheader()
        for r in results:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()} | {"recorded": ""})
    return results


def rm_of(reward: str) -> str:
    """The config RM a reward is built on (its training and evaluation params, the bootstrap seed)."""
    return reward if reward in ("pers_profile",) or reward.startswith("heads_") else "pers_profile"


def run_dir(row: dict, seed: int) -> str:
    """Where `run` trains the row's setting with that training seed."""
    return f"results/ppo_tune/{row['method']}/{row['name']}" + (f"_seed{seed}" if seed else "")


def pool(row: dict, seeds: list[int]):
    """The claim table (prbench.downstream.claim.claim_rows) over the final policies of `run`s of the
    row's setting with these training seeds; replicate i is seeds[i]."""
    from prbench.downstream.claim import claim_rows

    rm = rm_of(row["reward"])
    dirs = {i: run_dir(row, s) for i, s in enumerate(seeds)}
    missing = [f"{d}/{f}" for d in dirs.values() for f in ("eval_model.jsonl", "train_log.csv")
               if not os.path.exists(f"{d}/{f}")]
    if missing:
        sys.exit(f"sweep: no finished run for {', '.join(missing)} (run `sweep.py run {row['name']} --seed S` first)")
    return claim_rows({i: [f"{d}/eval_model.jsonl"] for i, d in dirs.items()},
                      {i: [f"{d}/train_log.csv"] for i, d in dirs.items()}, POLICY, rm, dict(enumerate(seeds)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the recorded training runs, one line each")
    r = sub.add_parser("run", help="rerun one recorded setting on a finished demo run (the current folder)")
    r.add_argument("run", help="a row's index or a run's name (runs.csv)")
    r.add_argument("--seed", type=int, help="training seed (default: the row's)")
    r.add_argument("--snap", type=int, default=0, help="save and evaluate the policy every K steps too")
    r.add_argument("--eval-samples", type=int, help="answers per evaluation question (default: the demo's)")
    r.add_argument("--out", default="results/ppo_tune/sweep.csv", help="CSV the rows are appended to")
    p = sub.add_parser("pool", help="the learning claim over a setting's runs with several training seeds")
    p.add_argument("run", help="a row's index or a run's name (runs.csv)")
    p.add_argument("--seeds", type=int, nargs="+", required=True, help="the training seeds of its runs")
    a = ap.parse_args(argv)
    rows = read_table()
    if a.cmd == "list":
        for row in rows:
            if row["method"] in ("ppo", "grpo") and not row["snapshot"]:
                print(f"{row['index']:>4} {row['name']:<28} {row['method']:<4} world {row['world']} seed {row['seed']} "
                      f"reward {row['reward']:<14} {row['overrides']}")
        return
    if a.cmd == "pool":
        import pandas as pd

        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(pool(find(rows, a.run), a.seeds).to_string(index=False))
        return
    for res in run(find(rows, a.run), a.seed, a.snap, a.eval_samples, a.out):
        print("RESULT", json.dumps(res, default=str))


if __name__ == "__main__":
    main()
