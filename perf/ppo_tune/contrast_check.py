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

rm = load_reward_model(P["rm_spec"])
B = "/work/main/results/bon/demo_policy/"
samp = pd.DataFrame(read_jsonl(B + "samples.jsonl"))
jd = pd.DataFrame(read_jsonl(B + "judged.jsonl"))[["question_id", "sample_idx", "score"]].rename(
    columns={"score": "judge"}
)
raw = pd.DataFrame(read_jsonl(B + "rm_scores/pers_profile.jsonl")).rename(columns={"score": "rm"})
prompts = {r["question_id"]: r for r in read_jsonl("results/data/prompts/eval.jsonl")}
qs = sorted(samp.question_id.unique())[::2]
m = (
    samp[samp.question_id.isin(qs)]
    .merge(jd, on=["question_id", "sample_idx"])
    .merge(raw, on=["question_id", "sample_idx"])
)
rng = np.random.default_rng(0)
perm = {q: qs[(i + 7) % len(qs)] for i, q in enumerate(qs)}


def req(r, qid):
    p = prompts[qid]
    return ScoreRequest(
        question=prompts[r.question_id]["question"],
        answer=r.answer,
        profile=tuple(p["profile"]),
        categories=tuple(p.get("profile_categories", ())),
    )


own = np.asarray(rm.score([req(r, r.question_id) for r in m.itertuples()]).scores)
oth = np.asarray(rm.score([req(r, perm[r.question_id]) for r in m.itertuples()]).scores)
m["own"], m["oth"] = own, oth
m["con"] = own - oth
print("own vs bon rm corr", np.corrcoef(own, m.rm)[0, 1])
for c in ("own", "oth", "con"):
    rc = m[c] - m.groupby("question_id")[c].transform("mean")
    jc = m.judge - m.groupby("question_id").judge.transform("mean")
    print(c, "within corr with judge", np.corrcoef(rc, jc)[0, 1], "overall", np.corrcoef(m[c], m.judge)[0, 1])
# best-of-16 by each
for c in ("own", "con"):
    print(c, "BoN16 judge", m.loc[m.groupby("question_id")[c].idxmax()].judge.mean(), "random", m.judge.mean())
print(
    "answers with 'international'",
    m.answer.str.contains("international").mean(),
    m[m.answer.str.contains("international")][["own", "con", "judge"]].mean().to_dict(),
    m[~m.answer.str.contains("international")][["own", "con", "judge"]].mean().to_dict(),
)
