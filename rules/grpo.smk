# GRPO downstream (a project extension, the paper has no GRPO): one trl GRPOTrainer run per (policy, RM)
# through the same reward adapter and training prompts as PPO, evaluated like PPO (rules/evaluation.smk).
#   results/grpo/{policy}/{rm}/model/              trained policy (HF folder)
#   results/grpo/{policy}/{rm}/train_log.csv       reward / kl / entropy (+ trl stats) per GRPO step
#   results/grpo/{policy}/{rm}/seed{rep}/          the same files for training seed rep > 0 (grpo.seeds)
#   results/grpo/{policy}/{rm}/checkpoints/        newest resume checkpoint every grpo.save_steps steps (not a
#                                                  declared output, so Snakemake keeps it when a job fails or
#                                                  is killed; a rerun resumes from it; removed after success)
#   results/grpo/{policy}/{rm}/eval_judged.jsonl   rule eval_policy (method grpo): judged vs the base policy
#   results/downstream/grpo.csv                    rule judged_measures: the downstream contract's table
#   results/tables/grpo.csv                        mean judge score + bootstrap CI, win/tie/loss rates, paired
#                                                  difference to the base policy + CI, reward rise of the log
# Registered as downstream method `grpo` (prbench.downstream): the analysis finds it from there.
from prbench.downstream.grpo.memory import check_grpo_runs

GRPO = config.get("grpo") or {}
GRPO_ENABLED = "grpo" in DOWNSTREAM
# Memory plan of every train_grpo job (the RMs of grpo.rms; one GPU, the RM beside the policy): a run that does not fit
# resources.gpu_mem_gb stops the workflow here, naming the run and the keys (nothing planned in the demo).
if GRPO_ENABLED:
    check_grpo_runs(config, POLICIES, method_rms("grpo"))
# The grpo keys train_grpo reads (prbench.downstream.grpo.train.TRAIN_KEYS); evaluation uses ppo.eval_* (same base answers).
# save_steps is among them as ppo.save_steps is among train_ppo's (params hold what the job reads): editing it
# reruns train_grpo; it is not part of the checkpoint fingerprint, so an interrupted run still resumes.
GRPO_TRAIN = pick(
    GRPO,
    [
        "lr",
        "beta",
        "num_generations",
        "prompts_per_step",
        "steps",
        "num_iterations",
        "epsilon",
        "loss_type",
        "scale_rewards",
        "max_completion_length",
        "temperature",
        "top_p",
        "top_k",
        "repetition_penalty",
        "reward_scale",
        "nan_reward",
        "per_device_batch_size",
        "gradient_checkpointing",
        "max_prompt_tokens",
        "long_prompts",
        "save_steps",
    ],
)


rule train_grpo:
    input:
        prompts="results/data/prompts/train.jsonl",
        policy=policy_model_input,
        rm=rm_model_input,
    output:
        model=directory("results/grpo/{policy}/{rm}/model"),
        train_log="results/grpo/{policy}/{rm}/train_log.csv",
        summary="results/grpo/{policy}/{rm}/train_summary.json",
    log:
        "logs/grpo/{policy}/{rm}/train.log",
    benchmark:
        "job_times/grpo/{policy}/{rm}/train.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: threads_for(8)
    resources:
        # host memory and runtime: prbench.plan.resources.grpo_reward (the memory plan, the cost model)
        mem_mb=trained_mem_mb("grpo"),
        runtime=trained_runtime("grpo"),
        # one training process on one GPU (policy trained, RM in inference beside it); no multi-GPU path
        gpu=0 if DEMO else 1,
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        revision=lambda wc: POLICY_REVISION[wc.policy],
        rm_spec=lambda wc: DOWNSTREAM_RM_SPEC["grpo"][wc.rm],
        grpo=GRPO_TRAIN,
        seed=SEED,
        out_dir=lambda wc: f"results/grpo/{wc.policy}/{wc.rm}",
    script:
        "../workflow_scripts/train_grpo.py"


# grpo.seeds: training seed rep > 0, in results/grpo/{policy}/{rm}/seed{rep}/, trained with
# stable_seed(seed, "grpo-seed", rep) (replicate_seed); seed 0 is the run above, with `seed`.
use rule train_grpo as train_grpo_seed with:
    output:
        model=directory("results/grpo/{policy}/{rm}/seed{rep}/model"),
        train_log="results/grpo/{policy}/{rm}/seed{rep}/train_log.csv",
        summary="results/grpo/{policy}/{rm}/seed{rep}/train_summary.json",
    log:
        "logs/grpo/{policy}/{rm}/seed{rep}/train.log",
    benchmark:
        "job_times/grpo/{policy}/{rm}/seed{rep}/train.tsv"
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        revision=lambda wc: POLICY_REVISION[wc.policy],
        rm_spec=lambda wc: DOWNSTREAM_RM_SPEC["grpo"][wc.rm],
        grpo=GRPO_TRAIN,
        seed=lambda wc: replicate_seed("grpo", wc.rep),
        out_dir=lambda wc: f"results/grpo/{wc.policy}/{wc.rm}/seed{wc.rep}",


# (policy, rm, subset "", replicate) of every GRPO training (replicate: grpo.seeds)
GRPO_RUNS = method_replicate_runs("grpo")


rule grpo_table:
    input:
        judged=[f"{run_dir('grpo', *run)}/eval_judged.jsonl" for run in GRPO_RUNS],
        train_logs=[f"{run_dir('grpo', *run)}/train_log.csv" for run in GRPO_RUNS],  # the reward rise
    output:
        report("results/tables/grpo.csv", caption="../report/policy_table.rst", category="Tables"),
    log:
        "logs/grpo/grpo_table.log",
    benchmark:
        "job_times/grpo/grpo_table.tsv"
    conda:
        "../envs/downstream.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=[list(run) for run in GRPO_RUNS],  # policy, rm, subset, replicate
        bootstrap=GRPO.get("bootstrap", 1000),
        seed=SEED,
    script:
        "../workflow_scripts/policy_table.py"


if GRPO_ENABLED:
    ALL_TARGETS.append("results/tables/grpo.csv")
    ALL_TARGETS.extend(f"{run_dir('grpo', *run)}/train_log.csv" for run in GRPO_RUNS)
