# PPO downstream: one trl PPO run per (policy, RM), judged against the base policy.
#   results/ppo/{policy}/{rm}/model/               trained policy (HF folder)
#   results/ppo/{policy}/{rm}/train_log.csv        reward / KL / entropy (+ trl stats) per PPO step
#   results/ppo/{policy}/{rm}/checkpoints/         rotating resume checkpoint (not a declared output,
#                                                  so Snakemake keeps it when a job fails or is killed)
#   results/tables/ppo.csv                         mean judge score + bootstrap CI, win/tie/loss rates
# The evaluation (base answers, judged answers, the downstream contract's measure table) is shared
# with GRPO: rules/evaluation.smk.
from prbench.downstream.ppo.memory import gpus_per_run

PPO = config["ppo"]  # validated: the schema filled its defaults
PPO_ENABLED = PPO["enabled"]
# Each job gets the ppo keys it reads (PPO_TRAIN here, the evaluation's in rules/evaluation.smk):
# editing an evaluation or table setting does not retrain, editing ppo.bootstrap reruns only the table.
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
# the keys; with ppo disabled there is no train_ppo job and nothing is planned.
PPO_GPUS = gpus_per_run(config, POLICIES, RMS) if PPO_ENABLED else {}


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
        mem_mb=lambda wc: mem_mb_for(2 * POLICY_B[wc.policy] + RM_B[wc.rm], train=True),
        runtime=30 if DEMO else 24 * 60,
        # one training process per GPU, the RM on one more when > 1 (prbench.downstream.ppo.launch)
        gpu=lambda wc: PPO_GPUS[(wc.policy, wc.rm)],
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        rm_spec=lambda wc: DOWNSTREAM_RM_SPEC[wc.rm],
        ppo=PPO_TRAIN,
        seed=SEED,
        out_dir=lambda wc: f"results/ppo/{wc.policy}/{wc.rm}",
    script:
        "../workflow_scripts/train_ppo.py"


rule ppo_table:
    input:
        judged=expand("results/ppo/{policy}/{rm}/eval_judged.jsonl", policy=POLICIES, rm=ROW_RMS),
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
        runs=[[p, r] for p in POLICIES for r in ROW_RMS],
        bootstrap=PPO["bootstrap"],
        seed=SEED,
    script:
        "../workflow_scripts/policy_table.py"


if PPO_ENABLED:
    ALL_TARGETS.append("results/tables/ppo.csv")
    ALL_TARGETS.extend(expand("results/ppo/{policy}/{rm}/train_log.csv", policy=POLICIES, rm=ROW_RMS))
