# Demo RM zoo: MiniLM cross-encoders fine-tuned inside the DAG (entries of reward_models with `train:`).
# The demo policy (rule train_demo_policy) lives in rules/policy.smk.
TRAINED_RMS = [r for r in RMS if "train" in rm_entry(r)]
RM_TRAIN_CFG = config["demo_training"]["rm"]  # schema defaults filled by validate()


rule train_demo_rm:
    input:
        # the train files of the sources the entry's mix actually draws from
        unpack(
            lambda wildcards: {
                src: f"results/data/train/{src}.jsonl"
                for src, frac in sorted(rm_entry(wildcards.rm)["train"]["mix"].items())
                if frac > 0
            }
        ),
    output:
        directory("results/models/rm/{rm}"),
    log:
        "logs/models/train_demo_rm_{rm}.log",
    benchmark:
        "job_times/models/train_demo_rm_{rm}.tsv"
    wildcard_constraints:
        rm="|".join(TRAINED_RMS) if TRAINED_RMS else "__none__",
    priority: 10  # after the policy (the critical path), before the benchmark scoring
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=CPU_MEM_MB if DEMO else mem_mb_for(0.1, train=True),
        runtime=30,
        gpu=0 if DEMO else 1,
    params:
        # the entry's keys prbench.training.rm.train_demo_rm reads: an edit of a scoring-only key
        # (both_orders, prefix_cache, ...) rescores, it does not retrain
        spec=lambda wildcards: pick(rm_spec(wildcards.rm), ["name", "kind", "train", "use_profile", "top_k"]),
        train=canon(RM_TRAIN_CFG),
        seed=SEED,
    script:
        "../workflow_scripts/train_demo_rm.py"
