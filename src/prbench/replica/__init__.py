"""Tiny local replicas of the paper configuration's hub artefacts (issue 11, item 8).

Every model and dataset that `config.yaml` names on the hub gets a small stand-in that the
project builds itself, offline and deterministically from a seed: the same architecture family,
tokenizer type with the real special tokens, chat template, remote-code interface and generation
config, with random weights; and small hand-made data in each benchmark's real hub schema.
`configs/replica.yaml` points the paper DAG at them (rules/replica.smk builds them).

- `build`: non-RM models (Qwen2.5-Instruct policy / generative RMs / judge, Contriever retriever)
  and the dispatcher `build_replica(kind, out_dir, seed, **options)` used by the Snakemake rule;
- `data`: the three benchmarks' hub schemas, written as local folders;
- `rms`: reward-model replicas (sequence classifiers, InternLM2-reward, ArmoRM).
"""
