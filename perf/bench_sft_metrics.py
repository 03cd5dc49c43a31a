"""Does skipping trl's per-step SFT metrics speed up the demo policy? (It does not, measurably.)

    OMP_NUM_THREADS=1 .venv/bin/python perf/bench_sft_metrics.py [--train results/data/train/personalized.jsonl]
        [--epochs 0.5] [--order 0,1,0,1]

trl's SFTTrainer computes, every step, the entropy and the argmax token accuracy over the full
logits (under no_grad, only logged). This trains the first `--epochs` of the demo policy
(configs/demo.yaml demo_training.policy, one thread) with trl's trainer (1) and with a subclass
whose compute_loss is transformers' plain Trainer.compute_loss (0), in the given order, and prints
the CPU seconds of training and a hash of the weights (equal both ways).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from prbench.config import with_defaults  # noqa: E402
from prbench.io import read_jsonl  # noqa: E402
from prbench.seeding import seed_everything  # noqa: E402
from prbench.training import policy as pol  # noqa: E402
from prbench.validation import load_config  # noqa: E402


def loss_only(sft_cls):
    from transformers import Trainer

    class LossOnly(sft_cls):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            inputs["use_cache"] = False
            return Trainer.compute_loss(self, model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)

    return LossOnly


def main(argv=None) -> int:
    import trl

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="results/data/train/personalized.jsonl")
    ap.add_argument("--epochs", type=float, default=0.5)
    ap.add_argument("--order", default="0,1,0,1")
    a = ap.parse_args(argv)
    cfg = with_defaults(dict(load_config(str(REPO / "configs/demo.yaml"))["demo_training"]["policy"],
                             epochs=a.epochs), "demo_training.policy")
    max_length = int(cfg["max_length"])
    torch.set_num_threads(1)
    pairs = read_jsonl(a.train)
    original = trl.SFTTrainer
    for way in a.order.split(","):
        trl.SFTTrainer = original if way == "1" else loss_only(original)
        try:
            seed_everything(0)
            tok = pol.train_tokenizer(pol._tokenizer_texts(pairs), int(cfg["vocab_size"]), model_max_length=max_length)
            ex, _ = pol.build_sft_examples(pairs, tok, max_length, 0)
            model = pol.build_model(tok, cfg, 0, max_positions=max(1024, 4 * max_length))
            t = time.process_time()
            model, result, _, _ = pol._sft_train(model, tok, ex, cfg, 0, max_length)
            cpu = time.process_time() - t
        finally:
            trl.SFTTrainer = original
        h = hashlib.sha256(b"".join(v.numpy().tobytes() for _, v in sorted(model.state_dict().items()))).hexdigest()
        print(f"trl_metrics={way} steps={result.global_step} cpu={cpu:.1f}s loss={result.training_loss!r} "
              f"weights={h[:16]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
