# Benchmark scoring: one job per (RM, benchmark), then one tidy accuracy table over all of them.
# Each job's params hold only its own RM's spec, so adding or editing an RM entry reruns only
# that RM's jobs (tests/test_new_rm_dag.py). A job that would outlast the partition's time limit
# (resources.max_runtime_min, or the entry's benchmark_parts) is split: score_benchmark_part scores
# contiguous parts of the benchmark's rows, and score_benchmark joins them into the same two files
# (prbench.scoring.parts).


rule score_benchmark:
    input:
        bench="results/data/benchmarks/{bench}.jsonl",
        model=benchmark_model_input,
        parts=benchmark_part_files("pairs"),  # a split job: its parts (none: one job scores it all)
        part_info=benchmark_part_files("info"),
    output:
        pairs="results/scores/{rm}/{bench}.pairs.jsonl",
        accuracy="results/scores/{rm}/{bench}.accuracy.json",
    log:
        "logs/scoring/{rm}/{bench}.log",
    benchmark:
        "job_times/scoring/{rm}/{bench}.tsv"
    wildcard_constraints:
        rm="|".join(SINGLE_RMS) if SINGLE_RMS else "__none__",  # RM family members: rules/family.smk
    conda:
        "../envs/models.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=rm_mem_mb("benchmark"),
        runtime=rm_runtime("benchmark"),
        gpu=rm_gpus("benchmark"),
    params:
        prompts=canon(PROMPTS),
        spec=lambda wildcards: rm_spec(wildcards.rm),
        scoring=lambda wildcards: scoring_params(wildcards.rm),
        seed=SEED,
        bench_kind=lambda wildcards: config["data"].get("baselines", {}).get(wildcards.bench, {}).get("kind"),
    script:
        "../workflow_scripts/score_benchmark.py"


rule score_benchmark_part:
    input:
        bench="results/data/benchmarks/{bench}.jsonl",
        model=rm_model_input,
    output:
        pairs="results/scores/{rm}/parts/{bench}.{part}.pairs.jsonl",
        info="results/scores/{rm}/parts/{bench}.{part}.json",
    log:
        "logs/scoring/{rm}/{bench}.part{part}.log",
    benchmark:
        "job_times/scoring/{rm}/{bench}.part{part}.tsv"
    wildcard_constraints:
        rm="|".join(SINGLE_RMS) if SINGLE_RMS else "__none__",
        part="[0-9]+",
    conda:
        "../envs/models.yaml"
    threads: threads_for(2)
    resources:
        mem_mb=rm_mem_mb("benchmark_part"),
        runtime=rm_runtime("benchmark_part"),
        gpu=rm_gpus("benchmark_part"),
    params:
        prompts=canon(PROMPTS),
        spec=lambda wildcards: rm_spec(wildcards.rm),
        scoring=lambda wildcards: scoring_params(wildcards.rm),
        seed=SEED,
        parts=lambda wildcards: benchmark_parts(wildcards.rm, wildcards.bench),
    script:
        "../workflow_scripts/score_benchmark_part.py"


rule accuracy_table:
    input:
        acc=expand("results/scores/{rm}/{bench}.accuracy.json", rm=ROW_RMS, bench=BENCHMARKS),
        pairs=expand("results/scores/{rm}/{bench}.pairs.jsonl", rm=ROW_RMS, bench=BENCHMARKS),
    output:
        "results/tables/benchmark_accuracy.csv",
    log:
        "logs/scoring/accuracy_table.log",
    benchmark:
        "job_times/scoring/accuracy_table.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        # the table recomputes the CIs from the pairs, so scoring.bootstrap reruns only this job
        bootstrap=config["scoring"]["bootstrap"],
        seed=SEED,
    script:
        "../workflow_scripts/accuracy_table.py"


ALL_TARGETS.append("results/tables/benchmark_accuracy.csv")


# The authors' two extra reports beside the accuracy table (prbench.scoring.benchmark.benchmark_reports):
# accuracy by answer position for pairwise RMs, the chosen-minus-rejected score margin for pointwise ones.
rule benchmark_reports:
    input:
        acc=expand("results/scores/{rm}/{bench}.accuracy.json", rm=ROW_RMS, bench=BENCHMARKS),
        pairs=expand("results/scores/{rm}/{bench}.pairs.jsonl", rm=ROW_RMS, bench=BENCHMARKS),
    output:
        position=report(
            "results/tables/benchmark_position.csv",
            caption="../report/benchmark_position.rst",
            category="Tables",
        ),
        margin=report(
            "results/tables/benchmark_margin.csv",
            caption="../report/benchmark_margin.rst",
            category="Tables",
        ),
    log:
        "logs/scoring/benchmark_reports.log",
    benchmark:
        "job_times/scoring/benchmark_reports.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        bootstrap=config["scoring"]["bootstrap"],
        seed=SEED,
    script:
        "../workflow_scripts/benchmark_reports.py"


ALL_TARGETS.extend(["results/tables/benchmark_position.csv", "results/tables/benchmark_margin.csv"])
