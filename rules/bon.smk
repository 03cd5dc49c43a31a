# Best-of-N downstream: sample once per policy (sharded), judge every unique sample once (rubric
# aspects, sharded cache shared with the trained-policy evaluation, rules/judge.smk), score the samples
# with each RM, then exact best-of-k curves (first_k and expected estimators, oracle and random
# references) and one table.
#   results/bon/{policy}/shards/{i}.jsonl   -> samples.jsonl (question_id, subset, sample_idx, answer)
#   results/bon/{policy}/judged.jsonl       question_id, sample_idx, score, ratings, failures
#   results/bon/{policy}/rm_scores/{rm}.jsonl
#   results/bon/{policy}/curves/{rm|_oracle|_random}.csv, results/tables/bon.csv
#   results/downstream/bon.csv              the downstream contract's measure table (prbench.downstream)
# bon.sample_sets > 1: sample set r > 0 repeats the per-policy files above under results/bon/{policy}/set{r}/
# (rules *_set: samples drawn with stable_seed(seed, "bon-sample-set", r), judged, scored by every RM);
# bon_table and bon_measures read every set (the table: the mean over the sets; the measures: replicate r).
BON = config["bon"]
BON_SHARDS = list(range(BON["shards"]))
BON_SETS = replicates("bon")
BON_POLICY_SPEC = {p: policy_spec(p) for p in POLICIES}


# sample set 0 keeps the single-set input names (samples_{p}, ...), set r > 0 adds _set{r}
BON_TABLE_INPUTS = {}
for _k in BON_SETS:
    _sfx = f"_set{_k}" if _k else ""
    BON_TABLE_INPUTS.update(
        {f"rm_{p}_{r}{_sfx}": f"{bon_dir(p, _k)}/rm_scores/{r}.jsonl" for p in POLICIES for r in ROW_DOWNSTREAM_RMS}
    )
    BON_TABLE_INPUTS.update({f"samples_{p}{_sfx}": f"{bon_dir(p, _k)}/samples.jsonl" for p in POLICIES})
    BON_TABLE_INPUTS.update({f"judged_{p}{_sfx}": f"{bon_dir(p, _k)}/judged.jsonl" for p in POLICIES})


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
        mem_mb=shared_mem_mb("sample_bon"),
        runtime=shared_runtime("sample_bon"),
        gpu=shared_gpus("sample_bon"),
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
        mem_mb=shared_mem_mb("judge_bon"),
        runtime=shared_runtime("judge_bon"),
        gpu=shared_gpus("judge_bon"),
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
    wildcard_constraints:
        rm="|".join(SINGLE_RMS) if SINGLE_RMS else "__none__",  # RM family members: rules/family.smk
    priority: 2  # after PPO training, before the short GRPO and evaluation jobs
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=rm_mem_mb("bon"),
        runtime=rm_runtime("bon"),
        gpu=rm_gpus("bon"),
    params:
        prompts=canon(PROMPTS),
        spec=lambda wildcards: DOWNSTREAM_RM_SPEC["bon"][wildcards.rm],
    script:
        "../workflow_scripts/score_bon.py"


# bon.sample_sets: sample set rep > 0, the same jobs in results/bon/{policy}/set{rep}/; its samples are drawn
# with stable_seed(seed, "bon-sample-set", rep) (replicate_seed), the judge keeps `seed`.
use rule sample_bon as sample_bon_set with:
    output:
        "results/bon/{policy}/set{rep}/shards/{shard}.jsonl",
    log:
        "logs/bon/{policy}/set{rep}/sample_{shard}.log",
    benchmark:
        "job_times/bon/{policy}/set{rep}/sample_{shard}.tsv"
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
        seed=lambda wildcards: replicate_seed("bon", wildcards.rep),


use rule merge_samples as merge_samples_set with:
    input:
        expand("results/bon/{{policy}}/set{{rep}}/shards/{shard}.jsonl", shard=BON_SHARDS),
    output:
        "results/bon/{policy}/set{rep}/samples.jsonl",
    log:
        "logs/bon/{policy}/set{rep}/merge_samples.log",
    benchmark:
        "job_times/bon/{policy}/set{rep}/merge_samples.tsv"


use rule judge_bon as judge_bon_set with:
    input:
        samples="results/bon/{policy}/set{rep}/samples.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=JUDGE_INPUT,
        judge_model=replica_input(JUDGE["model"]),
    output:
        "results/bon/{policy}/set{rep}/judged.jsonl",
    log:
        "logs/bon/{policy}/set{rep}/judge.log",
    benchmark:
        "job_times/bon/{policy}/set{rep}/judge.tsv"


use rule score_bon as score_bon_set with:
    input:
        samples="results/bon/{policy}/set{rep}/samples.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        model=rm_model_input,
    output:
        "results/bon/{policy}/set{rep}/rm_scores/{rm}.jsonl",
    log:
        "logs/bon/{policy}/set{rep}/score_{rm}.log",
    benchmark:
        "job_times/bon/{policy}/set{rep}/score_{rm}.tsv"


rule bon_table:
    input:
        **BON_TABLE_INPUTS,
    output:
        table="results/tables/bon.csv",
        curves=[
            f"{bon_dir(p, k)}/curves/{r}.csv"
            for k in BON_SETS
            for p in POLICIES
            for r in ROW_DOWNSTREAM_RMS + ["_oracle", "_random"]
        ],
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
        rms=ROW_DOWNSTREAM_RMS,
        sample_sets=BON_SETS,
        ks=BON["ks"],
        n=BON["n"],
        seed=SEED,
        bootstrap=BON["bootstrap"],
    script:
        "../workflow_scripts/bon_table.py"


rule bon_measures:
    input:
        curves=[f"{bon_dir(p, k)}/curves/{r}.csv" for p in POLICIES for r in ROW_DOWNSTREAM_RMS for k in BON_SETS],
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
        runs=[[p, r, k] for p in POLICIES for r in ROW_DOWNSTREAM_RMS for k in BON_SETS],  # policy, rm, sample set
    script:
        "../workflow_scripts/bon_measures.py"


ALL_TARGETS.append("results/tables/bon.csv")
