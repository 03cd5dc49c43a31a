"""One PPO run with the demo's settings plus overrides: training CPU-s and the reward rise over the
rollouts (Welch over the first and last quarter's rollout rewards, the adapter's own scores, as
`prbench.downstream.reward_rise` computes it from the log's reward_sd / reward_n).

usage (repository root of a finished demo run; exp/params.json from mkparams.py, its ppo.actor_lr 2e-4):
    SEED=s python exp/rise_run.py NAME '{"lr_scheduler": "constant"}'
writes exp/runs/ppo/NAME/{model,train_log.csv,raw.json}; evaluate the model with eval_sampled.py."""

import json
import os
import resource
import sys
import time

sys.path.insert(0, "src")
import numpy as np
import torch
from scipy import stats as sps

torch.set_num_threads(1)
from prbench.prompts import configure

P = json.load(open("exp/params.json"))
configure(P["prompts"])
P["seed"] = int(os.environ.get("SEED", P["seed"]))
import prbench.downstream.ppo.train as T

RAW = []
_orig = T._log_row


def _log_row(step, episode, logs, stats):
    RAW.append(list(stats.raw))  # the step's RM scores (reward_scale 1, no failures in the demo)
    return _orig(step, episode, logs, stats)


T._log_row = _log_row


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


name, over = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "{}")
cfg = dict(P["ppo"])
cfg.update(over)
out = f"exp/runs/ppo/{name}"
c0, t0 = cpu(), time.time()
T.train_ppo(P["policy_path"], P["rm_spec"], "results/data/prompts/train.jsonl", out, f"{out}/model",
            f"{out}/train_log.csv", cfg, P["seed"], run_name=name)
print("TIME", name, "cpu %.1f wall %.1f" % (cpu() - c0, time.time() - t0))
json.dump(RAW, open(f"{out}/raw.json", "w"))
R = [np.array(r) for r in RAW]
q = len(R) // 4
a, b = np.concatenate(R[:q]), np.concatenate(R[-q:])
ci = sps.ttest_ind(b, a, equal_var=False).confidence_interval()
print("RISE", name, "%.3f [%.3f, %.3f] n=%d sd %.2f" % (b.mean() - a.mean(), ci.low, ci.high, len(a),
                                                       np.concatenate(R).std()))
