# Best-of-N downstream (issue 4): sample once per policy (sharded), judge every unique sample once
# (rubric aspects, sharded cache shared with PPO), score the samples with each RM, then exact
# best-of-k curves (first_k and expected estimators, oracle and random references) and one table.
#   results/bon/{policy}/shards/{i}.jsonl   -> samples.jsonl (question_id, subset, sample_idx, answer)
#   results/bon/{policy}/judged.jsonl       question_id, sample_idx, score, ratings, failures
#   results/bon/{policy}/rm_scores/{rm}.jsonl
#   results/bon/{policy}/curves/{rm|_oracle|_random}.csv, results/tables/bon.csv
#   results/downstream/bon.csv              the downstream contract's measure table (prbench.downstream)
#   results/bon/judge_calibration.json      (minilm judge) thresholds fitted on the train split
#   results/bon/judge_validity.json         judge scores chosen above rejected on the test pairs?
import os

from prbench.data.sources import is_local

BON = config["bon"]
JUDGE = config["judge"]
BON_SHARDS = list(range(BON["shards"]))
# Judge cache: a folder of JSONL shards, one per judging job, named after its output
# (prbench.judge.shard_name). Each job reads every shard and appends only to its own: one writer per
# file, no locks (shared cluster filesystems). Not declared outputs: a failed or rerun job keeps
# what it judged, and no rule depends on another job's shard (a missing shard only costs time).
BON_JUDGE_CACHE = "results/cache/judge"  # prbench.judge.DEFAULT_CACHE_DIR
BON_JUDGE_CALIBRATION = "results/bon/judge_calibration.json"  # prbench.judge.DEFAULT_CALIBRATION
BON_MINILM = JUDGE["backend"] == "minilm"
BON_PERS = config["data"]["personalized"]
if BON_MINILM and not (BON_PERS.get("train_split") and is_local(BON_PERS["source"])):
    raise ValueError(
        "config key judge.backend: the minilm judge is calibrated on a local train split "
        "(set data.personalized.train_split and a local data.personalized.source), or use transformers/vllm"
    )
BON_PERS_DIR = os.path.normpath(BON_PERS["source"])
BON_CALIBRATION_FILES = [f"{BON_PERS_DIR}/{s}/{BON_PERS['train_split']}.jsonl" for s in SUBSETS] if BON_MINILM else []
BON_JUDGE_INPUT = [BON_JUDGE_CALIBRATION] if BON_MINILM else []
# what loading the judge reads (params_b is a resource hint: resources only)
BON_JUDGE_CFG = without_resource_keys(dict(JUDGE, **({"calibration": BON_JUDGE_CALIBRATION} if BON_MINILM else {})))
BON_JUDGE_B = _params_b(JUDGE, 1.0)
BON_POLICY_SPEC = {p: policy_spec(p) for p in POLICIES}
BON_POLICY_B = {p: _params_b(config["policies"][p], 0.5) for p in POLICIES}
# RM spec plus the runtime keys the benchmark scoring stage passes too (lengths, seed, no progress bars)
BON_RM_SPEC = {
    r: {
        "max_length": config["scoring"]["max_length"],
        "max_tokens_per_batch": config["scoring"]["max_tokens_per_batch"],
        **rm_spec(r),
        "seed": SEED,
        "progress": False,
    }
    for r in RMS
}
BON_RM_SPEC = canon(BON_RM_SPEC)
BON_TABLE_INPUTS = {f"rm_{p}_{r}": f"results/bon/{p}/rm_scores/{r}.jsonl" for p in POLICIES for r in RMS}
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
        mem_mb=lambda wildcards: mem_mb_for(BON_POLICY_B[wildcards.policy]),
        runtime=30 if DEMO else 480,
        gpu=lambda wildcards: gpus_for(BON_POLICY_B[wildcards.policy]),
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


if BON_MINILM:

    rule calibrate_judge:
        input:
            BON_CALIBRATION_FILES,
        output:
            BON_JUDGE_CALIBRATION,
        log:
            "logs/bon/calibrate_judge.log",
        benchmark:
            "job_times/bon/calibrate_judge.tsv"
        conda:
            "../envs/downstream.yaml"
        threads: threads_for(2)
        resources:
            mem_mb=CPU_MEM_MB,
            runtime=30,
        params:
            prompts=canon(PROMPTS),
            judge=without_resource_keys(JUDGE),
            seed=SEED,
            max_pairs=600,
        script:
            "../workflow_scripts/calibrate_judge.py"


rule judge_validity:
    input:
        bench="results/data/benchmarks/personalized.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=BON_JUDGE_INPUT,
        judge_model=replica_input(JUDGE["model"]),
    output:
        "results/bon/judge_validity.json",
    log:
        "logs/bon/judge_validity.log",
    benchmark:
        "job_times/bon/judge_validity.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=mem_mb_for(BON_JUDGE_B),
        runtime=30 if DEMO else 480,
        gpu=gpus_for(BON_JUDGE_B),
    params:
        prompts=canon(PROMPTS),
        judge=BON_JUDGE_CFG,
        seed=SEED,
        cache=BON_JUDGE_CACHE,
        bootstrap=JUDGE["validity_bootstrap"],  # judge.validity_bootstrap: this job only
    script:
        "../workflow_scripts/judge_validity.py"


rule judge_bon:
    input:
        samples="results/bon/{policy}/samples.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=BON_JUDGE_INPUT,
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
        mem_mb=mem_mb_for(BON_JUDGE_B),
        runtime=30 if DEMO else 720,
        gpu=gpus_for(BON_JUDGE_B),
    params:
        prompts=canon(PROMPTS),
        judge=BON_JUDGE_CFG,
        seed=SEED,
        cache=BON_JUDGE_CACHE,
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
        spec=lambda wildcards: BON_RM_SPEC[wildcards.rm],
    script:
        "../workflow_scripts/score_bon.py"


rule bon_table:
    input:
        **BON_TABLE_INPUTS,
    output:
        table="results/tables/bon.csv",
        curves=[f"results/bon/{p}/curves/{r}.csv" for p in POLICIES for r in RMS + ["_oracle", "_random"]],
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
        rms=RMS,
        ks=BON["ks"],
        n=BON["n"],
        seed=SEED,
        bootstrap=BON["bootstrap"],
    script:
        "../workflow_scripts/bon_table.py"


rule bon_measures:
    input:
        curves=[f"results/bon/{p}/curves/{r}.csv" for p in POLICIES for r in RMS],
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
        runs=[[p, r] for p in POLICIES for r in RMS],
    script:
        "../workflow_scripts/bon_measures.py"


ALL_TARGETS.extend(["results/tables/bon.csv", "results/bon/judge_validity.json"])
