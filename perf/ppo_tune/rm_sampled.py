"""RM and judge score of n sampled answers per eval question: model vs base (same noise).
usage: python exp/rm_sampled.py MODEL_DIR [n]"""

import json
import sys

sys.path.insert(0, "src")
import torch

torch.set_num_threads(1)
import numpy as np

from prbench.prompts import ScoreRequest, configure

P = json.load(open("exp/params.json"))
configure(P["prompts"])
from prbench.downstream.evaluation import eval_prompt_rows
from prbench.downstream.policy import generate_answers, load_policy_model
from prbench.rms import load_reward_model
from prbench.stats import bootstrap_ci

n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
prompts = eval_prompt_rows("results/data/prompts/eval.jsonl", P["eval"])
rm = load_reward_model(P["rm_spec"])


def rmscore(path):
    model, tok = load_policy_model(path, False, "cpu")
    ans = generate_answers(
        model, tok, prompts, n=n, temperature=1.0, top_p=0.9, max_new_tokens=72, seed=12345, progress=False
    )
    reqs = [
        ScoreRequest(
            question=p["question"],
            answer=a,
            profile=tuple(p["profile"]),
            categories=tuple(p.get("profile_categories", ())),
        )
        for p, al in zip(prompts, ans)
        for a in al
    ]
    return np.asarray(rm.score(reqs).scores, dtype=float).reshape(len(prompts), n).mean(1)


b = rmscore("results/models/policy/demo_policy")
m = rmscore(sys.argv[1])
est, lo, hi = bootstrap_ci(m - b, n_boot=1000, seed=0)
print("RMRESULT", sys.argv[1], "base %.3f model %.3f diff %.3f [%.3f, %.3f]" % (b.mean(), m.mean(), est, lo, hi))
