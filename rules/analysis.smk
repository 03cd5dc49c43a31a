# Analysis (issue 6): which benchmark predicts downstream quality? Correlations, figures, report.
#   results/tables/correlations.csv        every coefficient x benchmark score x downstream measure, CI, p
#   results/tables/correlation_summary.md  per downstream measure: best benchmark, separated from the runner-up?
#   results/tables/correlation_inputs.csv  the per-RM values that were correlated (with bootstrap CIs)
#   results/figures/{accuracy,bon_curves,scatter,correlations,ppo_training}.{png,pdf}
CORR = config["correlation"]
ANALYSIS_PPO = config.get("ppo", {}).get("enabled", True)
BON_KS = config["bon"]["ks"]
# The BoN signal shown in the scatter and comparison figures (the table has every k and estimator).
FIG_BON = {"estimator": "expected", "k": max(BON_KS), "measure": "judge_score"}
PAIR_KEYS = [[rm, bench] for rm in RMS for bench in BENCHMARKS]
RUN_KEYS = [[policy, rm] for policy in POLICIES for rm in RMS]
PPO_KEYS = RUN_KEYS if ANALYSIS_PPO else []
FIGURES = ["accuracy", "bon_curves", "scatter", "correlations"] + (["ppo_training"] if ANALYSIS_PPO else [])
# Outputs of each figure rule: the PNG goes into the HTML report with its caption, the PDF beside it.
FIG_OUT = {
    name: {
        "png": report(f"results/figures/{name}.png", caption=f"../report/fig_{name}.rst", category="Figures"),
        "pdf": f"results/figures/{name}.pdf",
    }
    for name in ["accuracy", "bon_curves", "scatter", "correlations", "ppo_training"]
}


rule correlations:
    input:
        pairs=[f"results/scores/{rm}/{bench}.pairs.jsonl" for rm, bench in PAIR_KEYS],
        bon=[f"results/bon/{policy}/curves/{rm}.csv" for policy, rm in RUN_KEYS],
        ppo=[f"results/ppo/{policy}/{rm}/eval_judged.jsonl" for policy, rm in PPO_KEYS],
    output:
        table=report(
            "results/tables/correlations.csv",
            caption="../report/correlations.rst",
            category="Tables",
        ),
        summary=report(
            "results/tables/correlation_summary.md",
            caption="../report/correlation_summary.rst",
            category="Tables",
        ),
        inputs=report(
            "results/tables/correlation_inputs.csv",
            caption="../report/correlation_inputs.rst",
            category="Tables",
        ),
    params:
        rms=RMS,
        pair_keys=PAIR_KEYS,
        run_keys=RUN_KEYS,
        ppo_keys=PPO_KEYS,
        bench_kinds={b: config["data"]["baselines"][b].get("kind") for b in BASELINES},
        bootstrap=CORR["bootstrap"],
        permutations=CORR["permutations"],
        rbo_p=CORR["rbo_p"],
        ci=CORR["ci"],
        seed=SEED,
    log:
        "logs/analysis/correlations.log",
    benchmark:
        "benchmarks_out/analysis/correlations.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/correlations.py"


rule fig_accuracy:
    input:
        "results/tables/benchmark_accuracy.csv",
    output:
        **FIG_OUT["accuracy"],
    params:
        figure="accuracy",
        rms=RMS,
        benchmarks=BENCHMARKS,
    log:
        "logs/analysis/fig_accuracy.log",
    benchmark:
        "benchmarks_out/analysis/fig_accuracy.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/figures.py"


rule fig_bon_curves:
    input:
        "results/tables/bon.csv",
    output:
        **FIG_OUT["bon_curves"],
    params:
        figure="bon_curves",
        rms=RMS,
        estimator=FIG_BON["estimator"],
    log:
        "logs/analysis/fig_bon_curves.log",
    benchmark:
        "benchmarks_out/analysis/fig_bon_curves.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/figures.py"


rule fig_scatter:
    input:
        inputs="results/tables/correlation_inputs.csv",
        table="results/tables/correlations.csv",
    output:
        **FIG_OUT["scatter"],
    params:
        figure="scatter",
        **FIG_BON,
    log:
        "logs/analysis/fig_scatter.log",
    benchmark:
        "benchmarks_out/analysis/fig_scatter.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/figures.py"


rule fig_correlations:
    input:
        "results/tables/correlations.csv",
    output:
        **FIG_OUT["correlations"],
    params:
        figure="correlations",
        **FIG_BON,
    log:
        "logs/analysis/fig_correlations.log",
    benchmark:
        "benchmarks_out/analysis/fig_correlations.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/figures.py"


rule fig_ppo_training:
    input:
        [f"results/ppo/{policy}/{rm}/train_log.csv" for policy, rm in PPO_KEYS],
    output:
        **FIG_OUT["ppo_training"],
    params:
        figure="ppo_training",
        run_keys=PPO_KEYS,
        smooth=1,
    log:
        "logs/analysis/fig_ppo_training.log",
    benchmark:
        "benchmarks_out/analysis/fig_ppo_training.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/figures.py"


ALL_TARGETS.extend(
    [
        "results/tables/correlations.csv",
        "results/tables/correlation_summary.md",
        "results/tables/correlation_inputs.csv",
    ]
)
ALL_TARGETS.extend(f"results/figures/{name}.{ext}" for name in FIGURES for ext in ("png", "pdf"))
