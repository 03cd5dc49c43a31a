# Data stage: (demo) synthetic world -> canonical benchmark pairs, judge keys, train pairs,
# prompt rows and bad-data reports. Logic lives in prbench.data; scripts are thin.
from pathlib import Path

from prbench.data.demo_world import demo_general_dirs, demo_outputs
from prbench.data.sources import baseline_input_files, personalized_input_files

DEMO_FILES = demo_outputs(config) if DEMO else {}


if DEMO:

    rule demo_world:
        output:
            [f for files in DEMO_FILES.values() for f in files],
        log:
            "logs/data/demo_world.log",
        benchmark:
            "job_times/data/demo_world.tsv"
        conda:
            "../envs/data.yaml"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=10,
        params:
            seed=SEED,
            demo=canon(config["demo"]),
            data=canon(config["data"]),
            # the folder of the first output (`{source}/{subset}/{split}.jsonl`)
            personalized_dir=lambda w, output: str(Path(output[0]).parent.parent),
            general_dirs=demo_general_dirs(config),
        script:
            "../workflow_scripts/demo_world.py"


rule prepare_personalized:
    input:
        personalized_input_files(config),
        retriever=replica_input(config["retriever"]["model"]),
    output:
        benchmark="results/data/benchmarks/personalized.jsonl",
        judge_keys="results/data/judge_keys/personalized.jsonl",
        train="results/data/train/personalized.jsonl",
        prompts_train="results/data/prompts/train.jsonl",
        prompts_eval="results/data/prompts/eval.jsonl",
        report="results/data/reports/personalized.json",
    log:
        "logs/data/prepare_personalized.log",
    benchmark:
        "job_times/data/prepare_personalized.tsv"
    conda:
        "../envs/data.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=CPU_MEM_MB if DEMO else max(CPU_MEM_MB, 32000),
        runtime=10 if DEMO else 240,
        gpu=gpus_for(0.2),
    params:
        data=canon(config["data"]["personalized"]),
        retriever=canon(config["retriever"]),
        seed=SEED,
    script:
        "../workflow_scripts/prepare_personalized.py"


rule prepare_baseline:
    input:
        lambda w: baseline_input_files(config, w.baseline),
    output:
        benchmark="results/data/benchmarks/{baseline}.jsonl",
        train="results/data/train/{baseline}.jsonl",
        report="results/data/reports/{baseline}.json",
    log:
        "logs/data/prepare_baseline_{baseline}.log",
    benchmark:
        "job_times/data/prepare_baseline_{baseline}.tsv"
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=2000 if DEMO else 8000,
        runtime=10 if DEMO else 60,
    params:
        cfg=lambda w: canon(config["data"]["baselines"][w.baseline]),
    script:
        "../workflow_scripts/prepare_baseline.py"


# The data reports are cheap and always useful; later stages pull the data files themselves.
ALL_TARGETS.extend(f"results/data/reports/{b}.json" for b in BENCHMARKS)
