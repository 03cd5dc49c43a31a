import json
import sys

sys.path.insert(0, "src")
import torch

torch.set_num_threads(1)
import numpy as np

from prbench.prompts import ScoreRequest, configure

P = json.load(open("exp/params.json"))
configure(P["prompts"])
from prbench.io import read_jsonl
from prbench.rms import load_reward_model

rm = load_reward_model(P["rm_spec"])
prompts = {r["question_id"]: r for r in read_jsonl("results/data/prompts/eval.jsonl")}


def sc(rows, col):
    return np.asarray(
        rm.score(
            [
                ScoreRequest(
                    question=prompts[r["question_id"]]["question"],
                    answer=r[col],
                    profile=tuple(prompts[r["question_id"]]["profile"]),
                    categories=tuple(prompts[r["question_id"]].get("profile_categories", ())),
                )
                for r in rows
            ]
        ).scores
    )


for f in sys.argv[1:]:
    rows = read_jsonl(f)
    a, b = sc(rows, "answer"), sc(rows, "base_answer")
    print(
        f,
        "RM trained %.2f base %.2f | judge trained %.3f base %.3f"
        % (a.mean(), b.mean(), np.mean([r["score"] for r in rows]), np.mean([r["base_score"] for r in rows])),
    )
