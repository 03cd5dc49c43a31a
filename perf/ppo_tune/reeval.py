"""re-evaluate a run's model: python exp/reeval.py RUN_DIR greedy|T"""

import json
import sys

sys.path.insert(0, "src")
import torch

torch.set_num_threads(1)
from prbench.prompts import configure

P = json.load(open("exp/params.json"))
configure(P["prompts"])
import pandas as pd

from prbench.downstream.evaluation import eval_policy, paired_diff
from prbench.io import read_jsonl
from prbench.seeding import stable_seed

d, mode = sys.argv[1], sys.argv[2]
if mode == "greedy":
    ev, base = dict(P["eval"]), "results/ppo/demo_policy/base_answers.jsonl"
else:
    ev, base = dict(P["eval"], eval_greedy=False, temperature=float(mode)), f"exp/base_T{mode}.jsonl"
out = f"{d}/eval_{mode}.jsonl" if "snap-" not in d else f"{d}.eval_{mode}.jsonl"
model = d if (d.endswith("demo_policy") or "snap-" in d) else f"{d}/model"
eval_policy(
    model,
    base,
    "results/data/prompts/eval.jsonl",
    "results/data/judge_keys/personalized.jsonl",
    P["judge"],
    "results/cache/judge",
    out,
    ev,
    P["seed"],
)
df = pd.DataFrame(read_jsonl(out))
r = {
    "run": d,
    "mode": mode,
    "mean": df.score.mean(),
    "base": df.base_score.mean(),
    **paired_diff(df, 1000, stable_seed(P["seed"], "ppo-table-diff", "demo_policy", "pers_profile")),
}
print("REEVAL", json.dumps(r))
open("exp/reeval.jsonl", "a").write(json.dumps(r) + "\n")
