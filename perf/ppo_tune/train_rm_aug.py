"""pers_profile variant trained with corrupted copies of chosen as extra rejected answers.
usage: python exp/train_rm_aug.py OUT SHARE"""

import json
import re
import sys

sys.path.insert(0, "src")
import numpy as np
import yaml

from prbench.prompts import configure

P = json.load(open("exp/params.json"))
configure(P["prompts"])
from prbench.training import rm as R

out, share = sys.argv[1], float(sys.argv[2])


def sentences(t):
    return re.split(r"(?<=[.!?])\s+", t.strip())


def corrupt(text, rng):
    s = sentences(text)
    kind = int(rng.integers(3))
    if kind == 0 and len(s) > 2:
        i, j = rng.choice(len(s), 2, replace=False)
        s[i] = s[j]
    elif kind == 1 or len(s) < 2:
        i = int(rng.integers(len(s)))
        w = s[i].split()
        k = int(rng.integers(len(w)))
        w.insert(k, w[k])
        s[i] = " ".join(w)
    else:
        i, j = rng.choice(len(s), 2, replace=False)
        a, b = s[i].split(), s[j].split()
        s[i] = " ".join(a[: len(a) // 2] + b[len(b) // 2 :])
    return " ".join(s)


orig = R.sample_mix


def aug(*a, **k):
    rows = orig(*a, **k)
    rng = np.random.default_rng(0)
    extra = [dict(r, rejected=corrupt(r["chosen"], rng)) for r in rows if rng.random() < share]
    print("extra", len(extra), "e.g.", extra[0]["rejected"] if extra else "")
    return rows + extra


R.sample_mix = aug
cfg = yaml.safe_load(open("configs/demo.yaml"))["demo_training"]["rm"]
spec = dict(P["rm_spec"])
spec.pop("path", None)
rep = R.train_demo_rm(spec, {"personalized": "results/data/train/personalized.jsonl"}, out, cfg, seed=0, threads=1)
print(json.dumps({k: rep[k] for k in ("pairs", "train_loss", "seconds")}))
