# PPO downstream (issue 5): one trl PPO run per (policy, RM), judged against the base policy.
#   results/ppo/{policy}/base_answers.jsonl        untrained policy, eval questions (shared by all RMs)
#   results/ppo/{policy}/{rm}/model/               trained policy (HF folder)
#   results/ppo/{policy}/{rm}/train_log.csv        reward / KL / entropy (+ trl stats) per PPO step
#   results/ppo/{policy}/{rm}/checkpoints/         rotating resume checkpoint (not a declared output,
#                                                  so Snakemake keeps it when a job fails or is killed)
#   results/ppo/{policy}/{rm}/eval_judged.jsonl    judged answers, win/tie/loss vs the base policy
#   results/tables/ppo.csv                         mean judge score + bootstrap CI, win/tie/loss rates
#   results/downstream/ppo.csv                     the downstream contract's measure table (prbench.downstream)
# eval_ppo and judged_measures serve every trained-policy method of the registry (TRAINED_METHODS:
# PPO, GRPO): same eval questions, settings (ppo.eval_*), base answers and cached judge.
from prbench.downstream.ppo.memory import gpus_per_run

PPO = config["ppo"]  # validated: the schema filled its defaults
PPO_ENABLED = PPO["enabled"]
JUDGE = config["judge"]
PPO_JUDGE_CACHE = "results/cache/judge"  # shard folder shared with BoN (see rules/bon.smk)
PPO_JUDGE_CALIBRATION = "results/bon/judge_calibration.json"  # rule calibrate_judge (minilm judge)


# Per-run settings precomputed as dicts (no functions here: snakemake --lint wants them in common.smk).
PPO_POLICY_PATH = {p: policy_spec(p)["path"] for p in POLICIES}
PPO_POLICY_TRUST = {p: bool(config["policies"][p]["trust_remote_code"]) for p in POLICIES}
PPO_POLICY_B = {p: _params_b(config["policies"][p], 0.5) for p in POLICIES}
PPO_RM_B = {r: _params_b(rm_entry(r), 0.5) if kind_info(rm_entry(r)["kind"]).uses_gpu else 0.0 for r in RMS}
# RM spec + the runtime keys the scoring stage also passes (seed, lengths, no progress bars)
PPO_RM_SPEC = {
    r: {
        "max_length": config["scoring"]["max_length"],
        "max_tokens_per_batch": config["scoring"]["max_tokens_per_batch"],
        **rm_spec(r),
        "seed": SEED,
        "progress": False,
    }
    for r in RMS
}
PPO_RM_SPEC = canon(PPO_RM_SPEC)
PPO_JUDGE_CFG = without_resource_keys(
    dict(JUDGE, **({"calibration": PPO_JUDGE_CALIBRATION} if JUDGE["backend"] == "minilm" else {}))
)
# Each job gets the ppo keys it reads (PPO_TRAIN / PPO_EVAL below): editing an
# evaluation or table setting does not retrain, editing ppo.bootstrap reruns only the table.
PPO_TRAIN = pick(
    PPO,
    [
        "actor_lr",
        "critic_lr",
        "batch_size",
        "mini_batch_size",
        "ppo_epochs",
        "total_episodes",
        "response_length",
        "temperature",
        "kl_coef",
        "nan_reward",
        "save_steps",
        "per_device_batch_size",
        "local_rollout_forward_batch_size",
        "gradient_checkpointing",
        "max_prompt_tokens",
        "gpus",
    ],
)
# GPUs of each train_ppo job from the memory plan: ppo.gpus, else the smallest count that fits
# resources.gpu_mem_gb; 0 in the demo (CPU). A plan that does not fit stops here, naming the run and
# the keys; with ppo disabled nothing is planned (outside the demo).
PPO_GPUS = gpus_per_run(config, POLICIES, RMS) if PPO_ENABLED or DEMO else {}
PPO_EVAL = pick(PPO, ["temperature", "eval_greedy", "eval_max_new_tokens", "eval_questions_per_subset"])
PPO_JUDGE_INPUT = [PPO_JUDGE_CALIBRATION] if JUDGE["backend"] == "minilm" else []
PPO_JUDGE_B = _params_b(JUDGE, 1.0)


rule ppo_base_answers:
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
        mem_mb=lambda wc: mem_mb_for(PPO_POLICY_B[wc.policy]),
        runtime=30 if DEMO else 240,
        gpu=lambda wc: gpus_for(PPO_POLICY_B[wc.policy]),
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: PPO_POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: PPO_POLICY_TRUST[wc.policy],
        ppo=PPO_EVAL,
        seed=SEED,
    script:
        "../workflow_scripts/ppo_base_answers.py"


rule train_ppo:
    input:
        prompts="results/data/prompts/train.jsonl",
        policy=policy_model_input,
        rm=rm_model_input,
    output:
        model=directory("results/ppo/{policy}/{rm}/model"),
        train_log="results/ppo/{policy}/{rm}/train_log.csv",
        summary="results/ppo/{policy}/{rm}/train_summary.json",
    log:
        "logs/ppo/{policy}/{rm}/train.log",
    benchmark:
        "job_times/ppo/{policy}/{rm}/train.tsv"
    priority: 3  # longest jobs first after the policy: the short ones fill the cores at the end
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(8)
    resources:
        # host memory: policy + critic trained, reference policy and RM loaded
        mem_mb=lambda wc: mem_mb_for(2 * PPO_POLICY_B[wc.policy] + PPO_RM_B[wc.rm], train=True),
        runtime=30 if DEMO else 24 * 60,
        # one training process per GPU, the RM on one more when > 1 (prbench.downstream.ppo.launch)
        gpu=lambda wc: PPO_GPUS[(wc.policy, wc.rm)],
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: PPO_POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: PPO_POLICY_TRUST[wc.policy],
        rm_spec=lambda wc: PPO_RM_SPEC[wc.rm],
        ppo=PPO_TRAIN,
        seed=SEED,
        out_dir=lambda wc: f"results/ppo/{wc.policy}/{wc.rm}",
    script:
        "../workflow_scripts/train_ppo.py"


rule eval_ppo:
    input:
        model="results/{method}/{policy}/{rm}/model",
        base="results/ppo/{policy}/base_answers.jsonl",
        prompts="results/data/prompts/eval.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=PPO_JUDGE_INPUT,
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
        mem_mb=lambda wc: mem_mb_for(PPO_JUDGE_B + PPO_POLICY_B[wc.policy]),
        runtime=30 if DEMO else 12 * 60,
        gpu=lambda wc: gpus_for(PPO_JUDGE_B + PPO_POLICY_B[wc.policy]),
    params:
        prompts=canon(PROMPTS),
        trust_remote_code=lambda wc: PPO_POLICY_TRUST[wc.policy],
        judge=PPO_JUDGE_CFG,
        cache=PPO_JUDGE_CACHE,
        ppo=PPO_EVAL,
        seed=SEED,
    script:
        "../workflow_scripts/eval_ppo.py"


rule ppo_table:
    input:
        judged=expand("results/ppo/{policy}/{rm}/eval_judged.jsonl", policy=POLICIES, rm=RMS),
    output:
        "results/tables/ppo.csv",
    log:
        "logs/ppo/ppo_table.log",
    benchmark:
        "job_times/ppo/ppo_table.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=[[p, r] for p in POLICIES for r in RMS],
        bootstrap=PPO["bootstrap"],
        seed=SEED,
    script:
        "../workflow_scripts/ppo_table.py"


rule judged_measures:
    input:
        judged=expand("results/{{method}}/{policy}/{rm}/eval_judged.jsonl", policy=POLICIES, rm=RMS),
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
        runs=[[p, r] for p in POLICIES for r in RMS],
    script:
        "../workflow_scripts/judged_measures.py"


if PPO_ENABLED:
    ALL_TARGETS.append("results/tables/ppo.csv")
    ALL_TARGETS.extend(expand("results/ppo/{policy}/{rm}/train_log.csv", policy=POLICIES, rm=RMS))
