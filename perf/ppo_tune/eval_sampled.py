"""The pipeline's evaluation (eval_policy with ppo.eval_samples 6, eval_top_p 0.9: exp/params6.json is
exp/params.json with the demo's eval keys) of PPO policies against the base policy's answers
(exp/base6.jsonl, written on the first call), and tables/ppo.csv's paired_diff with its bootstrap seed
for pers_profile.

usage: python exp/eval_sampled.py NAME=MODEL_DIR ..."""

import json
import os
import sys

sys.path.insert(0, "src")
import torch

torch.set_num_threads(1)
from prbench.prompts import configure

P = json.load(open("exp/params6.json"))
configure(P["prompts"])
import pandas as pd

from prbench.downstream.evaluation import eval_policy, paired_diff, write_base_answers
from prbench.io import read_jsonl
from prbench.seeding import stable_seed

base = "exp/base6.jsonl"
if not os.path.exists(base):
    write_base_answers(P["policy_path"], "results/data/prompts/eval.jsonl", base, P["eval"], P["seed"])
for arg in sys.argv[1:]:
    name, d = arg.split("=")
    out = f"exp/ev6_{name}.jsonl"
    eval_policy(d, base, "results/data/prompts/eval.jsonl", "results/data/judge_keys/personalized.jsonl",
                P["judge"], "results/cache/judge", out, P["eval"], P["seed"])
    df = pd.DataFrame(read_jsonl(out))
    r = paired_diff(df, 1000, stable_seed(P["seed"], "ppo-table-diff", "demo_policy", "pers_profile"))
    print("EVAL", name, "mean %.3f base %.3f diff %+.3f [%+.3f, %+.3f]" % (
        df.score.mean(), df.base_score.mean(), r["diff_base"], r["diff_ci_low"], r["diff_ci_high"]), flush=True)
