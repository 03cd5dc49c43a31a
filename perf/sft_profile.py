"""Where a step of the demo policy's SFT goes: torch's profiler over the first steps of the demo's own
training (configs/demo.yaml demo_training.policy, trl's SFTTrainer as prbench.training.policy runs it,
float32, one thread), the operators by self CPU time, and the tokens a step computes logits for
against those its loss reads (the completion's).

    OMP_NUM_THREADS=1 .venv/bin/python perf/sft_profile.py \
        --train <run>/results/data/train/personalized.jsonl [--steps 40]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", default="results/data/train/personalized.jsonl")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rows", type=int, default=12, help="operators listed")
    args = ap.parse_args()

    import torch
    from datasets import Dataset
    from torch.profiler import ProfilerActivity, profile
    from trl import SFTConfig, SFTTrainer

    from prbench import prompts as P
    from prbench.config import with_defaults
    from prbench.io import read_jsonl
    from prbench.seeding import seed_everything
    from prbench.training import policy as pol
    from prbench.validation import load_config

    torch.set_num_threads(1)
    cfg = with_defaults(load_config(str(REPO / "configs/demo.yaml"))["demo_training"]["policy"],
                        "demo_training.policy")
    seed_everything(0)
    pairs = read_jsonl(args.train)
    max_length = int(cfg["max_length"])
    tok = pol.train_tokenizer(pol._tokenizer_texts(pairs), int(cfg["vocab_size"]), model_max_length=max_length)
    examples, _ = pol.build_sft_examples(pairs, tok, max_length, 0)
    full, completion = [], []
    for e in examples:
        prompt = len(tok(P.render_chat(tok, e["prompt"], add_generation_prompt=True), add_special_tokens=False)
                     ["input_ids"])
        n = len(tok(P.render_chat(tok, e["prompt"] + e["completion"]), add_special_tokens=False)["input_ids"])
        full.append(n)
        completion.append(n - prompt)
    model = pol.build_model(tok, cfg, 0, max_positions=max(1024, 4 * max_length))
    with tempfile.TemporaryDirectory() as tmp:
        sft = SFTConfig(output_dir=tmp, max_steps=args.steps, learning_rate=float(cfg["lr"]),
                        per_device_train_batch_size=int(cfg["batch_size"]), max_length=max_length,
                        lr_scheduler_type="cosine", warmup_steps=0.05, save_strategy="no", report_to=[], seed=0,
                        data_seed=0, use_cpu=True, completion_only_loss=True, dataloader_num_workers=0,
                        disable_tqdm=True, train_sampling_strategy="group_by_length", bf16=False, fp16=False,
                        logging_steps=args.steps)
        trainer = SFTTrainer(model=model, args=sft, train_dataset=Dataset.from_list(examples).shuffle(seed=0),
                             processing_class=tok)
        t0 = time.process_time()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            trainer.train()
        cpu = time.process_time() - t0
    steps_per_epoch = -(-len(examples) // int(cfg["batch_size"]))
    print(f"{len(examples)} examples, {steps_per_epoch} steps an epoch, {float(cfg['epochs']):g} epochs")
    print(f"tokens per example: mean {statistics.mean(full):.1f} (max {max(full)}), of them the completion's "
          f"(the only positions the loss reads) mean {statistics.mean(completion):.1f} "
          f"({sum(completion) / sum(full):.0%})")
    print(f"{args.steps} steps: {cpu:.1f} CPU-s with the profiler on ({cpu / args.steps:.3f} s a step)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
