# The demo policy: a tiny causal LM trained from scratch inside the DAG (policies with `train: true`).
# It is the BoN / PPO policy of the demo and the base of the `policy_judge` generative RM.
TRAINED_POLICIES = [p for p in POLICIES if config["policies"][p].get("train")]
POLICY_TRAIN_CFG = config["demo_training"]["policy"]  # schema defaults filled by validate()


rule train_demo_policy:
    input:
        train="results/data/train/personalized.jsonl",
    output:
        directory("results/models/policy/{policy}"),
    log:
        "logs/models/train_demo_policy_{policy}.log",
    benchmark:
        "job_times/models/train_demo_policy_{policy}.tsv"
    wildcard_constraints:
        policy="|".join(TRAINED_POLICIES) if TRAINED_POLICIES else "__none__",
    priority: 20  # the critical path: BoN, PPO and GRPO wait for the policy
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=CPU_MEM_MB if DEMO else mem_mb_for(0.1, train=True),
        runtime=30,
        gpu=0 if DEMO else 1,
    params:
        prompts=canon(PROMPTS),
        train=canon(POLICY_TRAIN_CFG),
        seed=SEED,
    script:
        "../workflow_scripts/train_demo_policy.py"
