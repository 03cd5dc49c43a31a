# Best-of-N downstream: sample once per policy (sharded), judge every unique sample once (rubric
# aspects, sharded cache shared with the trained-policy evaluation, rules/judge.smk), score the samples
# with each RM, then exact best-of-k curves (first_k and expected estimators, oracle and random
# references) and one table.
#   results/bon/{policy}/shards/{i}.jsonl   -> samples.jsonl (question_id, subset, sample_idx, answer)
#   results/bon/{policy}/judged.jsonl       question_id, sample_idx, score, ratings, failures
#   results/bon/{policy}/rm_scores/{rm}.jsonl
#   results/bon/{policy}/curves/{rm|_oracle|_random}.csv, results/tables/bon.csv
#   results/downstream/bon.csv              the downstream contract's measure table (prbench.downstream)
BON = config["bon"]
BON_SHARDS = list(range(BON["shards"]))
BON_POLICY_SPEC = {p: policy_spec(p) for p in POLICIES}
BON_TABLE_INPUTS = {f"rm_{p}_{r}": f"results/bon/{p}/rm_scores/{r}.jsonl" for p in POLICIES for r in ROW_RMS}
BON_TABLE_INPUTS.update({f"samples_{p}": f"results/bon/{p}/samples.jsonl" for p in POLICIES})
BON_TABLE_INPUTS.update({f"judged_{p}": f"results/bon/{p}/judged.jsonl" for p in POLICIES})


rule sample_bon:
    input:
        prompts="results/data/prompts/eval.jsonl",
        policy=policy_model_input,
    output:
        "results/bon/{policy}/shards/{shard}.jsonl",
    log:
        "logs/bon/{policy}/sample_{shard}.log",
    benchmark:
        "job_times/bon/{policy}/sample_{shard}.tsv"
    wildcard_constraints:
        shard="[0-9]+",
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(4)
    resources:
        mem_mb=lambda wildcards: mem_mb_for(POLICY_B[wildcards.policy]),
        runtime=30 if DEMO else 480,
        gpu=lambda wildcards: gpus_for(POLICY_B[wildcards.policy]),
    params:
        prompts=canon(PROMPTS),
        policy=lambda wildcards: BON_POLICY_SPEC[wildcards.policy],
        bon=pick(
            BON,
            [
                "n",
                "temperature",
                "top_p",
                "top_k",
                "repetition_penalty",
                "max_new_tokens",
                "backend",
                "shards",
                "batch_size",
                "questions_per_subset",
            ],
        ),
        seed=SEED,
    script:
        "../workflow_scripts/sample_bon.py"


rule merge_samples:
    input:
        expand("results/bon/{{policy}}/shards/{shard}.jsonl", shard=BON_SHARDS),
    output:
        "results/bon/{policy}/samples.jsonl",
    log:
        "logs/bon/{policy}/merge_samples.log",
    benchmark:
        "job_times/bon/{policy}/merge_samples.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        n=BON["n"],
    script:
        "../workflow_scripts/merge_samples.py"


rule judge_bon:
    input:
        samples="results/bon/{policy}/samples.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=JUDGE_INPUT,
        judge_model=replica_input(JUDGE["model"]),
    output:
        "results/bon/{policy}/judged.jsonl",
    log:
        "logs/bon/{policy}/judge.log",
    benchmark:
        "job_times/bon/{policy}/judge.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=mem_mb_for(JUDGE_B),
        runtime=30 if DEMO else 720,
        gpu=gpus_for(JUDGE_B),
    params:
        prompts=canon(PROMPTS),
        judge=JUDGE_CFG,
        seed=SEED,
        cache=JUDGE_CACHE,
    script:
        "../workflow_scripts/judge_bon.py"


rule score_bon:
    input:
        samples="results/bon/{policy}/samples.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        model=rm_model_input,
    output:
        "results/bon/{policy}/rm_scores/{rm}.jsonl",
    log:
        "logs/bon/{policy}/score_{rm}.log",
    benchmark:
        "job_times/bon/{policy}/score_{rm}.tsv"
    priority: 2  # after PPO training, before the short GRPO and evaluation jobs
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=rm_mem_mb,
        runtime=30 if DEMO else 480,
        gpu=rm_gpus,
    params:
        prompts=canon(PROMPTS),
        spec=lambda wildcards: DOWNSTREAM_RM_SPEC[wildcards.rm],
    script:
        "../workflow_scripts/score_bon.py"


rule bon_table:
    input:
        **BON_TABLE_INPUTS,
    output:
        table="results/tables/bon.csv",
        curves=[f"results/bon/{p}/curves/{r}.csv" for p in POLICIES for r in ROW_RMS + ["_oracle", "_random"]],
    log:
        "logs/bon/bon_table.log",
    benchmark:
        "job_times/bon/bon_table.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        policies=POLICIES,
        rms=ROW_RMS,
        ks=BON["ks"],
        n=BON["n"],
        seed=SEED,
        bootstrap=BON["bootstrap"],
    script:
        "../workflow_scripts/bon_table.py"


rule bon_measures:
    input:
        curves=[f"results/bon/{p}/curves/{r}.csv" for p in POLICIES for r in ROW_RMS],
    output:
        DS.table_path("bon"),
    log:
        "logs/bon/bon_measures.log",
    benchmark:
        "job_times/bon/bon_measures.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=[[p, r] for p in POLICIES for r in ROW_RMS],
    script:
        "../workflow_scripts/bon_measures.py"


ALL_TARGETS.append("results/tables/bon.csv")
