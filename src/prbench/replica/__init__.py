"""Replicas: tiny randomly initialised local stand-ins for the paper configuration's hub artefacts.

They carry the real architecture family, the family's special tokens and chat-template
structure, the generation config, and, for reward models with their own code, the same
remote-code interface (written by this project, not copied from the hub). They prove offline
that every entry of config.yaml loads and scores as its model card intends, and
`configs/replica.yaml` runs the whole paper DAG on them (rules/replica.smk builds them).

- `build`: non-RM models (Qwen2.5-Instruct policy / generative RMs / judge, Contriever retriever)
  and the dispatcher `build_replica(builder, out_dir, seed, **options)` used by the Snakemake rule;
- `data`: the three benchmarks' small hand-made data in their hub schemas, as local folders;
- `rms`: reward-model replicas (Llama-3 / Tulu / Qwen2 / Qwen3 sequence classifiers, InternLM2-reward,
  ArmoRM) and their `remote_code/`;
- `families`: the study's other families (configs/study.yaml): Gemma and Gemma 2 sequence
  classifiers, the DeBERTa-v3 text-pair classifier, Llama-3.x Instruct chat models as generative RMs.
  `configs/replica_study.yaml` maps every study model to a replica of its family.
"""
