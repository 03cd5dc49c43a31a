# PPO downstream: one trl PPO run per (policy, RM), judged against the base policy; with ppo.per_subset
# (the authors') one run per (policy, RM, subset), the same files under results/ppo/{policy}/{rm}/{subset}/
# (rule train_ppo_subset), each trained on its subset's prompts and evaluated on its questions.
#   results/ppo/{policy}/{rm}/model/               trained policy (HF folder)
#   results/ppo/{policy}/{rm}/train_log.csv        reward / KL / entropy (+ trl stats) per PPO step
#   results/ppo/{policy}/{rm}[/{subset}]/seed{rep}/  the same files for training seed rep > 0 (ppo.seeds)
#   results/ppo/{policy}/{rm}/checkpoints/         rotating resume checkpoint (not a declared output,
#                                                  so Snakemake keeps it when a job fails or is killed)
#   results/tables/ppo.csv                         mean judge score + bootstrap CI, win/tie/loss rates, paired
#                                                  difference to the base policy + CI, reward rise of the log
# The evaluation (base answers, judged answers, the downstream contract's measure table) is shared
# with GRPO: rules/evaluation.smk.
from prbench.downstream.ppo.memory import generation_chunk_per_run, gpus_per_run

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
        "reward_scale",
        "nan_reward",
        "save_steps",
        "per_device_batch_size",
        "local_rollout_forward_batch_size",
        "rollout_generation_batch_size",
        "rollout_sampler",
        "gradient_checkpointing",
        "max_prompt_tokens",
        "long_prompts",
        "gpus",
        "gae_lambda",
        "cliprange_value",
        "lr_scheduler",
        "weight_decay",
        "adam_eps",
        "vf_coef",
        "max_grad_norm",
        "drop_last",
    ],
)
# GPUs of each train_ppo job (the RMs of ppo.rms: only runs that exist are planned) from the memory plan: ppo.gpus, else the smallest count that fits
# resources.gpu_mem_gb; 0 in the demo (CPU). A plan that does not fit stops here, naming the run and
# the keys; with ppo disabled there is no train_ppo job and nothing is planned. A per-subset run
# (train_ppo_subset, ppo.per_subset) gets its (policy, RM)'s plan: the same batch, prompt and response limits.
PPO_GPUS = gpus_per_run(config, POLICIES, method_rms("ppo")) if PPO_ENABLED else {}
# rows per rollout generate call: ppo.rollout_generation_batch_size, or the plan's largest that fits (None: demo)
PPO_GEN_CHUNK = generation_chunk_per_run(config, POLICIES, method_rms("ppo")) if PPO_ENABLED else {}


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
        # host memory, runtime and GPUs: prbench.plan.resources.ppo_reward (the memory plan, the cost model)
        mem_mb=trained_mem_mb("ppo"),
        runtime=trained_runtime("ppo"),
        # one training process per GPU, the RM on one more when > 1 (prbench.downstream.ppo.launch)
        gpu=lambda wc: PPO_GPUS[(wc.policy, wc.rm)],
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        revision=lambda wc: POLICY_REVISION[wc.policy],
        rm_spec=lambda wc: DOWNSTREAM_RM_SPEC["ppo"][wc.rm],
        ppo=PPO_TRAIN,
        generation_chunk=lambda wc: PPO_GEN_CHUNK[(wc.policy, wc.rm)],
        seed=SEED,
        out_dir=lambda wc: f"results/ppo/{wc.policy}/{wc.rm}",
    script:
        "../workflow_scripts/train_ppo.py"


# ppo.per_subset: the same job on one subset's training prompts (params `subset`), one folder deeper.
use rule train_ppo as train_ppo_subset with:
    output:
        model=directory("results/ppo/{policy}/{rm}/{subset}/model"),
        train_log="results/ppo/{policy}/{rm}/{subset}/train_log.csv",
        summary="results/ppo/{policy}/{rm}/{subset}/train_summary.json",
    log:
        "logs/ppo/{policy}/{rm}/{subset}/train.log",
    benchmark:
        "job_times/ppo/{policy}/{rm}/{subset}/train.tsv"
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        revision=lambda wc: POLICY_REVISION[wc.policy],
        rm_spec=lambda wc: DOWNSTREAM_RM_SPEC["ppo"][wc.rm],
        ppo=PPO_TRAIN,
        seed=SEED,
        out_dir=lambda wc: f"results/ppo/{wc.policy}/{wc.rm}/{wc.subset}",
        subset=lambda wc: wc.subset,


# ppo.seeds: training seed rep > 0 of a run, in its seed{rep}/ subfolder, trained with
# stable_seed(seed, "ppo-seed", rep) (replicate_seed); seed 0 is the run above, with `seed`.
use rule train_ppo as train_ppo_seed with:
    output:
        model=directory("results/ppo/{policy}/{rm}/seed{rep}/model"),
        train_log="results/ppo/{policy}/{rm}/seed{rep}/train_log.csv",
        summary="results/ppo/{policy}/{rm}/seed{rep}/train_summary.json",
    log:
        "logs/ppo/{policy}/{rm}/seed{rep}/train.log",
    benchmark:
        "job_times/ppo/{policy}/{rm}/seed{rep}/train.tsv"
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        revision=lambda wc: POLICY_REVISION[wc.policy],
        rm_spec=lambda wc: DOWNSTREAM_RM_SPEC["ppo"][wc.rm],
        ppo=PPO_TRAIN,
        generation_chunk=lambda wc: PPO_GEN_CHUNK[(wc.policy, wc.rm)],
        seed=lambda wc: replicate_seed("ppo", wc.rep),
        out_dir=lambda wc: f"results/ppo/{wc.policy}/{wc.rm}/seed{wc.rep}",


use rule train_ppo_subset as train_ppo_subset_seed with:
    output:
        model=directory("results/ppo/{policy}/{rm}/{subset}/seed{rep}/model"),
        train_log="results/ppo/{policy}/{rm}/{subset}/seed{rep}/train_log.csv",
        summary="results/ppo/{policy}/{rm}/{subset}/seed{rep}/train_summary.json",
    log:
        "logs/ppo/{policy}/{rm}/{subset}/seed{rep}/train.log",
    benchmark:
        "job_times/ppo/{policy}/{rm}/{subset}/seed{rep}/train.tsv"
    params:
        prompts=canon(PROMPTS),
        policy_path=lambda wc: POLICY_PATH[wc.policy],
        trust_remote_code=lambda wc: POLICY_TRUST[wc.policy],
        revision=lambda wc: POLICY_REVISION[wc.policy],
        rm_spec=lambda wc: DOWNSTREAM_RM_SPEC["ppo"][wc.rm],
        ppo=PPO_TRAIN,
        seed=lambda wc: replicate_seed("ppo", wc.rep),
        out_dir=lambda wc: f"results/ppo/{wc.policy}/{wc.rm}/{wc.subset}/seed{wc.rep}",
        subset=lambda wc: wc.subset,


# (policy, rm, subset, replicate) of every PPO training ("" = pooled; replicate: ppo.seeds) and its folder
PPO_RUNS = method_replicate_runs("ppo")


rule ppo_table:
    input:
        judged=[f"{run_dir('ppo', *run)}/eval_judged.jsonl" for run in PPO_RUNS],
        train_logs=[f"{run_dir('ppo', *run)}/train_log.csv" for run in PPO_RUNS],  # the reward rise
    output:
        report("results/tables/ppo.csv", caption="../report/policy_table.rst", category="Tables"),
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
        runs=[list(run) for run in PPO_RUNS],  # policy, rm, subset, replicate
        bootstrap=PPO["bootstrap"],
        seed=SEED,
    script:
        "../workflow_scripts/policy_table.py"


if PPO_ENABLED:
    ALL_TARGETS.append("results/tables/ppo.csv")
    ALL_TARGETS.extend(f"{run_dir('ppo', *run)}/train_log.csv" for run in PPO_RUNS)
