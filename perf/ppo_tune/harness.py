"""Tuning harness (not part of the pipeline): one PPO/GRPO run with overrides, evaluated like the pipeline.
usage: python exp/harness.py NAME METHOD '{"key": value, ...}'"""

import json
import os
import resource
import sys
import time

sys.path.insert(0, "src")
import torch

torch.set_num_threads(1)
from prbench.prompts import configure as configure_prompts  # noqa

name, method, over = sys.argv[1], sys.argv[2], json.loads(sys.argv[3] if len(sys.argv) > 3 else "{}")
P = json.load(open(os.environ.get("PARAMS", "exp/params.json")))
P["seed"] = int(os.environ.get("SEED", P["seed"]))
configure_prompts(P["prompts"])
import logging

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
out = f"exp/runs/{method}/{name}"
os.makedirs(out, exist_ok=True)


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


c0, t0 = cpu(), time.time()
snap = int(os.environ.get("SNAP", "0"))
cbs = []
if os.environ.get("ORACLE"):
    import numpy as np

    from prbench.downstream import reward_adapter as RA
    from prbench.judge import JudgeItem, load_judge

    _asp = {}
    for sub in ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"):
        for line in open(f"results/demo/raw/personalized/{sub}/train.jsonl"):
            r = json.loads(line)
            _asp[r["question"], tuple(p["text"] for p in r["profile"][:1])] = tuple(
                a["aspect"] for a in r["rubric_aspects"]
            )
    _byq = {}
    for line in open("results/data/prompts/train.jsonl"):
        r = json.loads(line)
        _byq.setdefault(r["question"], []).append(r)
    _judge = load_judge(P["judge"], P["seed"])
    _qa = {}
    for sub in ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"):
        for line in open(f"results/demo/raw/personalized/{sub}/train.jsonl"):
            r = json.loads(line)
            texts = {p["text"] for p in r["profile"]}
            _qa.setdefault(r["question"], []).append((texts, tuple(a["aspect"] for a in r["rubric_aspects"])))

    def _aspects(req):
        cands = _qa[req.question]
        best = max(cands, key=lambda c: len(c[0] & set(req.profile)))
        return best[1]

    def _score(self, requests):
        res = _judge.judge([JudgeItem(question=r.question, answer=r.answer, aspects=_aspects(r)) for r in requests])
        sc = np.array([x.score for x in res], dtype=np.float64)
        for st in (self.stats, self.total):
            st.scored += len(requests)
            st.raw.extend(float(v) for v in sc)
        return np.nan_to_num(sc) * self.reward_scale

    RA.RewardAdapter.score_requests = _score
if os.environ.get("CONTRAST"):
    import dataclasses

    import numpy as np

    from prbench.downstream import reward_adapter as RA
    from prbench.io import read_jsonl as _rj

    _profs = sorted(
        {
            (tuple(r.get("profile", [])), tuple(r.get("profile_categories", [])))
            for r in _rj("results/data/prompts/train.jsonl")
        }
    )
    _other = {p: _profs[(i + len(_profs) // 2) % len(_profs)] for i, p in enumerate(_profs)}
    _orig = RA.RewardAdapter.score_requests

    def _score(self, requests):
        own = _orig(self, requests)
        alt = []
        for r in requests:
            o = _other.get((tuple(r.profile), tuple(r.categories)))
            if o is None:
                o = _profs[hash(r.profile) % len(_profs)]
            alt.append(dataclasses.replace(r, profile=o[0], categories=o[1]))
        res = np.asarray(self.rm.score(alt).scores, dtype=np.float64) * self.reward_scale
        return own - res

    RA.RewardAdapter.score_requests = _score
if snap:
    from transformers import TrainerCallback

    class Snap(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, processing_class=None, **kw):
            if state.global_step % snap == 0:
                m = model.policy if hasattr(model, "policy") else model
                m.save_pretrained(f"{out}/snap-{state.global_step:03d}")
                processing_class.save_pretrained(f"{out}/snap-{state.global_step:03d}")
            return control

    cbs = [Snap()]
if method == "ppo":
    from prbench.downstream.ppo.train import train_ppo

    cfg = dict(P["ppo"])
    cfg.update(over)
    summ = train_ppo(
        P["policy_path"],
        P["rm_spec"],
        "results/data/prompts/train.jsonl",
        out,
        f"{out}/model",
        f"{out}/train_log.csv",
        cfg,
        P["seed"],
        run_name=name,
        callbacks=cbs,
    )
else:
    from prbench.downstream.grpo.train import train_grpo

    cfg = dict(P["grpo"])
    cfg.update(over)
    summ = train_grpo(
        P["policy_path"],
        P["rm_spec"],
        "results/data/prompts/train.jsonl",
        out,
        f"{out}/model",
        f"{out}/train_log.csv",
        cfg,
        P["seed"],
        run_name=name,
        callbacks=cbs,
    )
train_cpu, train_wall = cpu() - c0, time.time() - t0
import pandas as pd

from prbench.downstream.evaluation import eval_policy, paired_diff
from prbench.downstream.reward_rise import reward_rise
from prbench.io import read_jsonl

ev = dict(P["eval"])
eval_policy(
    f"{out}/model",
    "results/ppo/demo_policy/base_answers.jsonl",
    "results/data/prompts/eval.jsonl",
    "results/data/judge_keys/personalized.jsonl",
    P["judge"],
    "results/cache/judge",
    f"{out}/eval_judged.jsonl",
    ev,
    P["seed"],
)
df = pd.DataFrame(read_jsonl(f"{out}/eval_judged.jsonl"))
from prbench.seeding import stable_seed

d = paired_diff(df, 1000, stable_seed(P["seed"], "ppo-table-diff", "demo_policy", "pers_profile"))
rr = reward_rise([f"{out}/train_log.csv"])
res = {
    "name": name,
    "method": method,
    "over": over,
    "mean": float(df.score.mean()),
    "base": float(df.base_score.mean()),
    **d,
    "rise": rr[0],
    "rise_lo": rr[1],
    "rise_hi": rr[2],
    "train_cpu": round(train_cpu, 1),
    "train_wall": round(train_wall, 1),
}
print("RESULT", json.dumps(res))
with open("exp/results.jsonl", "a") as f:
    f.write(json.dumps(res) + "\n")
