# Evaluation of the trained policies, shared by every trained-policy method of the registry
# (TRAINED_METHODS: PPO, GRPO): the same eval questions and settings (config keys ppo.eval_*), the
# untrained policy's answers and the cached judge (rules/judge.smk).
#   results/ppo/{policy}/base_answers.jsonl         untrained policy, eval questions (shared by all RMs and methods)
#   results/{method}/{policy}/{rm}/eval_judged.jsonl judged answers, win/tie/loss vs the base policy
#   results/{method}/{policy}/{rm}[/{subset}]/seed{rep}/eval_judged.jsonl  training seed rep > 0
#                                                   (ppo.seeds, grpo.seeds; rules eval_policy_seed, _subset_seed)
#   results/downstream/{method}.csv                 the downstream contract's measure table (prbench.downstream)
# Each method's own table (results/tables/{method}.csv) is a rule of its stage file.
# The keys of config section ppo the evaluation reads, passed as params `ppo`: editing a ppo.eval_* key
# reruns the evaluation, not a training.
POLICY_EVAL = pick(
    config["ppo"],
    [
        "temperature",
        "eval_greedy",
        "eval_samples",
        "eval_top_p",
        "eval_max_new_tokens",
        "eval_batch_size",
        "eval_questions_per_subset",
        "eval_posts",
    ],
)


rule base_answers:
    input:
        prompts="results/data/prompts/eval.jsonl",
        policy=policy_model_input,
    output:
        "results/ppo/{policy}/base_answers.jsonl",
    log:
        "logs/ppo/{policy}/base_answers.log",
    benchmark:
        "job_times/ppo/{policy}/base_answers.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(4)
    resources:
        mem_mb=shared_mem_mb("base_answers"),
        runtime=shared_runtime("base_answers"),
        gpu=shared_gpus("base_answers"),
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        revision=lambda wc: POLICY_REVISION[wc.policy],
        ppo=POLICY_EVAL,
        seed=SEED,
    script:
        "../workflow_scripts/base_answers.py"


rule eval_policy:
    input:
        model="results/{method}/{policy}/{rm}/model",
        base="results/ppo/{policy}/base_answers.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=JUDGE_INPUT,
        judge_model=replica_input(JUDGE["model"]),
    output:
        "results/{method}/{policy}/{rm}/eval_judged.jsonl",
    log:
        "logs/{method}/{policy}/{rm}/eval.log",
    benchmark:
        "job_times/{method}/{policy}/{rm}/eval.tsv"
    wildcard_constraints:
        method="|".join(TRAINED_METHODS) if TRAINED_METHODS else "__none__",
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(4)
    resources:
        mem_mb=shared_mem_mb("eval_policy"),
        runtime=shared_runtime("eval_policy"),
        gpu=shared_gpus("eval_policy"),
    params:
        prompts=canon(PROMPTS),
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        judge=JUDGE_CFG,
        cache=JUDGE_CACHE,
        ppo=POLICY_EVAL,
        seed=SEED,
    script:
        "../workflow_scripts/eval_policy.py"


# ppo.per_subset: a per-subset PPO run answers its subset's evaluation questions only (params `subset`).
use rule eval_policy as eval_policy_subset with:
    input:
        model="results/{method}/{policy}/{rm}/{subset}/model",
        base="results/ppo/{policy}/base_answers.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=JUDGE_INPUT,
        judge_model=replica_input(JUDGE["model"]),
    output:
        "results/{method}/{policy}/{rm}/{subset}/eval_judged.jsonl",
    log:
        "logs/{method}/{policy}/{rm}/{subset}/eval.log",
    benchmark:
        "job_times/{method}/{policy}/{rm}/{subset}/eval.tsv"
    wildcard_constraints:
        method="ppo" if PPO_PER_SUBSET else "__none__",
    params:
        prompts=canon(PROMPTS),
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        judge=JUDGE_CFG,
        cache=JUDGE_CACHE,
        ppo=POLICY_EVAL,
        seed=SEED,
        subset=lambda wc: wc.subset,


# Training seed rep > 0 (ppo.seeds, grpo.seeds): the same evaluation (same questions, generation and judge
# seed: only the training seed differs) of the policy in the run's seed{rep}/ subfolder.
use rule eval_policy as eval_policy_seed with:
    input:
        model="results/{method}/{policy}/{rm}/seed{rep}/model",
        base="results/ppo/{policy}/base_answers.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=JUDGE_INPUT,
        judge_model=replica_input(JUDGE["model"]),
    output:
        "results/{method}/{policy}/{rm}/seed{rep}/eval_judged.jsonl",
    log:
        "logs/{method}/{policy}/{rm}/seed{rep}/eval.log",
    benchmark:
        "job_times/{method}/{policy}/{rm}/seed{rep}/eval.tsv"


use rule eval_policy_subset as eval_policy_subset_seed with:
    input:
        model="results/{method}/{policy}/{rm}/{subset}/seed{rep}/model",
        base="results/ppo/{policy}/base_answers.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=JUDGE_INPUT,
        judge_model=replica_input(JUDGE["model"]),
    output:
        "results/{method}/{policy}/{rm}/{subset}/seed{rep}/eval_judged.jsonl",
    log:
        "logs/{method}/{policy}/{rm}/{subset}/seed{rep}/eval.log",
    benchmark:
        "job_times/{method}/{policy}/{rm}/{subset}/seed{rep}/eval.tsv"


rule judged_measures:
    input:
        judged=judged_files,
    output:
        "results/downstream/{method}.csv",
    log:
        "logs/{method}/measures.log",
    benchmark:
        "job_times/{method}/measures.tsv"
    wildcard_constraints:
        method="|".join(TRAINED_METHODS) if TRAINED_METHODS else "__none__",
    conda:
        "../envs/downstream.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=lambda wc: [list(run) for run in method_replicate_runs(wc.method)],  # policy, rm, subset, replicate
    script:
        "../workflow_scripts/judged_measures.py"


# The learning claim fixed in the config before the run (ppo.claim, grpo.claim; prbench.downstream.claim):
# each training seed of the claim's RM and the pooled row the criterion is decided on.
rule claim_table:
    input:
        judged=lambda wc: claim_files(wc.method, "eval_judged.jsonl"),
        train_logs=lambda wc: claim_files(wc.method, "train_log.csv"),
    output:
        report("results/tables/{method}_claim.csv", caption="../report/claim_table.rst", category="Tables"),
    log:
        "logs/{method}/claim_table.log",
    benchmark:
        "job_times/{method}/claim_table.tsv"
    wildcard_constraints:
        method="|".join(m for m in TRAINED_METHODS if claim_rm(m)) or "__none__",
    conda:
        "../envs/downstream.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=lambda wc: [list(run) for run in claim_runs(wc.method)],  # policy, rm, subset, replicate
        training_seeds=lambda wc: {k: replicate_seed(wc.method, k) for k in replicates(wc.method, claim_rm(wc.method))},
    script:
        "../workflow_scripts/claim_table.py"


ALL_TARGETS.extend(f"results/tables/{m}_claim.csv" for m in TRAINED_METHODS if claim_rm(m))
