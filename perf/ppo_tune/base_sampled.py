import json
import sys

sys.path.insert(0, "src")
import torch

torch.set_num_threads(1)
from prbench.prompts import configure

P = json.load(open("exp/params.json"))
configure(P["prompts"])
from prbench.downstream.evaluation import write_base_answers

for t in sys.argv[1:]:
    ev = dict(P["eval"], eval_greedy=False, temperature=float(t))
    write_base_answers(P["policy_path"], "results/data/prompts/eval.jsonl", f"exp/base_T{t}.jsonl", ev, P["seed"])
