# Replica world: tiny local stand-ins for the paper's hub artefacts, built inside the DAG when the
# config has a `replica:` section (configs/replica.yaml).
#   results/replica/models/{replica}/    one HF folder per replica.models entry (prbench.replica.build)
#   results/replica/data/...             the three benchmarks in their hub schemas (prbench.replica.data)
# Model-consuming rules depend on these folders through common.smk's replica_input(); the data
# files are the local sources of data.*, so the data rules pull them in by path.
from pathlib import Path

from prbench.replica.data import data_files

REPLICA_DATA_DIR = "results/replica/data"
REPLICA_DATA_FILES = data_files(REPLICA_DATA_DIR)


rule replica_data:
    output:
        [f for files in REPLICA_DATA_FILES.values() for f in files],
    log:
        "logs/replica/data.log",
    benchmark:
        "job_times/replica/data.tsv"
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        # the data folder: first output is {out_dir}/personalized/{subset}/{split}.jsonl
        out_dir=lambda wildcards, output: str(Path(output[0]).parents[2]),
        data=REPLICA.get("data", {}),
        seed=REPLICA.get("seed", 0),
    script:
        "../workflow_scripts/replica_data.py"


rule replica_model:
    output:
        directory(f"{REPLICA_MODEL_DIR}/{{replica}}"),
    log:
        "logs/replica/model_{replica}.log",
    benchmark:
        "job_times/replica/model_{replica}.tsv"
    wildcard_constraints:
        replica="|".join(REPLICA_MODELS) if REPLICA_MODELS else "__none__",
    priority: 20
    conda:
        "../envs/models.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        spec=lambda wildcards: REPLICA_MODELS[wildcards.replica],
        seed=REPLICA.get("seed", 0),
        # a judge replica (spec option judge_training) is trained on the judge's prompt as the
        # judging jobs render it: the template set and the judge's prompt-format keys
        prompts=lambda wildcards: canon(PROMPTS) if judge_replica(wildcards.replica) else {},
        judge_protocol=lambda wildcards: (
            pick(config["judge"], REPLICA_JUDGE_KEYS) if judge_replica(wildcards.replica) else {}
        ),
    script:
        "../workflow_scripts/replica_model.py"


# Every replica is built by `rule all`, also those no stage of this config loads, so the run checks
# that each one builds.
ALL_TARGETS.extend(f"{REPLICA_MODEL_DIR}/{name}" for name in REPLICA_MODELS)
