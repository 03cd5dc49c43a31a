# The judge, shared by BoN (rule judge_bon) and the trained-policy evaluation (rule eval_policy): its
# config as the judging jobs load it, the calibration of the minilm judge, the shared cache folder,
# and the judge's own rules.
#   results/bon/judge_calibration.json      (minilm judge) thresholds fitted on the train split
#   results/bon/judge_validity.json         judge scores chosen above rejected on the test pairs?
import os

from prbench.data.sources import is_local

JUDGE = config["judge"]
# Judge cache: a folder of JSONL shards, one per judging job, named after its output
# (prbench.judge.shard_name). Each job reads every shard and appends only to its own: one writer per
# file, no locks (shared cluster filesystems). Not declared outputs: a failed or rerun job keeps
# what it judged, and no rule depends on another job's shard (a missing shard only costs time).
JUDGE_CACHE = "results/cache/judge"  # prbench.judge.DEFAULT_CACHE_DIR
JUDGE_CALIBRATION = "results/bon/judge_calibration.json"  # prbench.judge.DEFAULT_CALIBRATION
JUDGE_MINILM = JUDGE["backend"] == "minilm"
JUDGE_DATA = config["data"]["personalized"]  # the minilm judge is calibrated on its train split
if JUDGE_MINILM and not (JUDGE_DATA.get("train_split") and is_local(JUDGE_DATA["source"])):
    raise ValueError(
        "config key judge.backend: the minilm judge is calibrated on a local train split "
        "(set data.personalized.train_split and a local data.personalized.source), or use transformers/vllm"
    )
JUDGE_DATA_DIR = os.path.normpath(JUDGE_DATA["source"])
# judge.general_reference (the demo's mirror world): the judge rates general quality, calibrated on
# that baseline's train split (prbench.judge.reference; checked in prbench.validation)
JUDGE_REFERENCE = JUDGE.get("general_reference")
if JUDGE_REFERENCE:
    _ref = config["data"]["baselines"][JUDGE_REFERENCE]
    if not is_local(_ref["source"]):
        raise ValueError(
            f"config key judge.general_reference: the baseline {JUDGE_REFERENCE!r} must have a local "
            f"source (data.baselines.{JUDGE_REFERENCE}.source) to calibrate the general-quality judge"
        )
    JUDGE_CALIBRATION_FILES = [f"{os.path.normpath(_ref['source'])}/{_ref['train_split']}.jsonl"]
else:
    JUDGE_CALIBRATION_FILES = (
        [f"{JUDGE_DATA_DIR}/{s}/{JUDGE_DATA['train_split']}.jsonl" for s in SUBSETS] if JUDGE_MINILM else []
    )
# what a judging job's input adds to its own: the calibration the minilm judge loads
JUDGE_INPUT = [JUDGE_CALIBRATION] if JUDGE_MINILM else []
# what loading the judge reads (params_b is a resource hint: resources only). The minilm judge reads
# its model, batch size and general_reference only: the LLM judges' settings (max_new_tokens, retries, system_turn,
# aspect_format, aggregate, failure) never reach its jobs; the vLLM engine keys
# (prbench.models.vllm_engine_kwargs) reach the judging jobs under backend vllm only.
JUDGE_MINILM_KEYS = ["backend", "model", "revision", "batch_size", "general_reference"]
JUDGE_VLLM_KEYS = ("tensor_parallel_size", "max_model_len", "gpu_memory_utilization")
JUDGE_CFG = (
    canon(dict(pick(JUDGE, JUDGE_MINILM_KEYS), calibration=JUDGE_CALIBRATION))
    if JUDGE_MINILM
    else without_resource_keys(
        {
            k: v
            for k, v in JUDGE.items()
            if (JUDGE["backend"] == "vllm" or k not in JUDGE_VLLM_KEYS) and k != "general_reference"
        }
    )
)
# judge.tensor_parallel_size (vllm) above the GPUs of the judging jobs, or too few to hold the judge:
# refused here, naming the key (prbench.plan.resources.check_judge_engine)
if not DEMO:
    RES.check_judge_engine(config)


if JUDGE_MINILM:

    rule calibrate_judge:
        input:
            JUDGE_CALIBRATION_FILES,
        output:
            JUDGE_CALIBRATION,
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
            judge=pick(JUDGE, JUDGE_MINILM_KEYS),
            seed=SEED,
            max_pairs=600,
        script:
            "../workflow_scripts/calibrate_judge.py"


rule judge_validity:
    input:
        bench="results/data/benchmarks/personalized.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        calibration=JUDGE_INPUT,
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
        mem_mb=shared_mem_mb("judge_validity"),
        runtime=shared_runtime("judge_validity"),
        gpu=shared_gpus("judge_validity"),
    params:
        prompts=canon(PROMPTS),
        judge=JUDGE_CFG,
        seed=SEED,
        cache=JUDGE_CACHE,
        bootstrap=JUDGE["validity_bootstrap"],  # judge.validity_bootstrap: this job only
    script:
        "../workflow_scripts/judge_validity.py"


ALL_TARGETS.append("results/bon/judge_validity.json")
