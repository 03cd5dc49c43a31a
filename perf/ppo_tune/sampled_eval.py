"""Sampled evaluation: n answers per question at T, top_p; per-question mean; paired diff vs base.
usage: python exp/sampled_eval.py MODEL_DIR NAME [n] [T] [top_p]"""

import json
import os
import sys

sys.path.insert(0, "src")
import torch

torch.set_num_threads(1)
import numpy as np

from prbench.prompts import configure

P = json.load(open("exp/params.json"))
configure(P["prompts"])
from prbench.downstream.evaluation import eval_prompt_rows, load_judge_aspects
from prbench.downstream.policy import generate_answers, load_policy_model
from prbench.judge import JudgeItem, judge_items_cached, load_judge
from prbench.stats import bootstrap_ci

model_dir, name = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 4
T = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
tp = float(sys.argv[5]) if len(sys.argv) > 5 else 0.9
prompts = eval_prompt_rows("results/data/prompts/eval.jsonl", P["eval"])
model, tok = load_policy_model(model_dir, False, "cpu")
ans = generate_answers(model, tok, prompts, n=n, temperature=T, top_p=tp, max_new_tokens=72, seed=12345, progress=False)
asp = load_judge_aspects("results/data/judge_keys/personalized.jsonl")
judge = load_judge(P["judge"], P["seed"])
items = [
    JudgeItem(question=p["question"], answer=a, aspects=asp[p["question_id"]])
    for p, al in zip(prompts, ans)
    for a in al
]
res = judge_items_cached(judge, items, "results/cache/judge", f"exp_{name}.jsonl")
sc = np.array([r.score for r in res], dtype=float).reshape(len(prompts), n)
per_q = sc.mean(1)
os.makedirs("exp/sampled", exist_ok=True)
np.save(f"exp/sampled/{name}_n{n}_T{T}_p{tp}.npy", sc)
out = {"name": name, "n": n, "T": T, "top_p": tp, "mean": float(per_q.mean())}
bp = f"exp/sampled/base_n{n}_T{T}_p{tp}.npy"
if name != "base" and os.path.exists(bp):
    b = np.load(bp).mean(1)
    est, lo, hi = bootstrap_ci(per_q - b, n_boot=1000, seed=0)
    out.update(base=float(b.mean()), diff=est, lo=lo, hi=hi)
print("RESULT", json.dumps(out))
with open("exp/sampled_results.jsonl", "a") as f:
    f.write(json.dumps(out) + "\n")
