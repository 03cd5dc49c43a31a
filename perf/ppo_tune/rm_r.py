"""within-question correlation of an RM folder's scores with the judge on the BoN samples, and BoN@16.
usage: python exp/rm_r.py RM_DIR"""

import json
import sys

sys.path.insert(0, "src")
import torch

torch.set_num_threads(1)
import numpy as np
import pandas as pd

from prbench.prompts import ScoreRequest, configure

P = json.load(open("exp/params.json"))
configure(P["prompts"])
from prbench.io import read_jsonl
from prbench.rms import load_reward_model

spec = dict(P["rm_spec"], path=sys.argv[1])
rm = load_reward_model(spec)
prompts = {r["question_id"]: r for r in read_jsonl("results/data/prompts/eval.jsonl")}
S = pd.DataFrame(read_jsonl("results/bon/demo_policy/samples.jsonl"))
print(S.columns.tolist())
S = S[S.question_id.isin(prompts)]
reqs = [
    ScoreRequest(
        question=prompts[q]["question"],
        answer=a,
        profile=tuple(prompts[q]["profile"]),
        categories=tuple(prompts[q].get("profile_categories", ())),
    )
    for q, a in zip(S.question_id, S.answer)
]
S["rm"] = np.asarray(rm.score(reqs).scores, dtype=float)
J = pd.DataFrame(read_jsonl("results/bon/demo_policy/judged.jsonl"))[["question_id", "sample_idx", "score"]]
S = S.merge(J, on=["question_id", "sample_idx"])
rc = S.rm - S.groupby("question_id").rm.transform("mean")
jc = S.score - S.groupby("question_id").score.transform("mean")
best = S.loc[S.groupby("question_id").rm.idxmax()]
print(
    "RRESULT",
    sys.argv[1],
    "n",
    len(S),
    "r_within %.3f" % np.corrcoef(rc, jc)[0, 1],
    "BoN@16 %.3f" % best.score.mean(),
    "mean %.3f" % S.score.mean(),
)
