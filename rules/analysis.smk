# Analysis: which benchmark predicts downstream quality? Correlations, figures, report.
#   results/tables/correlations.csv        every coefficient x benchmark score x downstream measure, CI, p
#   results/tables/correlation_summary.md  per downstream measure: best benchmark, separated from the runner-up?
#   results/tables/correlation_inputs.csv  the per-RM values that were correlated (with bootstrap CIs)
#   results/tables/correlation_comparisons.csv  personalized vs each baseline, paired: diff, CI, p, q, verdict
#   results/tables/correlation_power.csv   the verdict rule's power: smallest detectable gap, RMs needed per gap
#   results/tables/verdict.html            the report's landing-page verdict: sentence, table, forest plot
#   results/tables/correlations_by_subset.csv  correlation.per_subset: the coefficients per subset (exploratory)
#   results/figures/forest.{png,pdf}       the confirmatory differences with the verdict test's intervals
#   results/figures/{accuracy,bon_curves,scatter,correlations}.{png,pdf}, {method}_training.{png,pdf}
# The downstream methods come from the registry (prbench.downstream, DOWNSTREAM in common.smk):
# nothing below names one. Each method's measure table is an input of `correlations`; its figure
# signal a param of the scatter/correlation figures; a method with a training log gets a figure.
CORR = config["correlation"]
PAIR_KEYS = [[rm, bench] for rm in ROW_RMS for bench in BENCHMARKS]
# the (policy, rm) runs each method's measure table must cover (ppo.rms / grpo.rms choose a method's RMs)
RUN_KEYS = {
    m: [[policy, rm] for policy in POLICIES for rm in (method_rms(m) if m in TRAINED_METHODS else ROW_DOWNSTREAM_RMS)]
    for m in DOWNSTREAM
}
# the correlations run over the RMs with both benchmark and downstream results
CORR_PAIR_KEYS = [[rm, bench] for rm in ROW_DOWNSTREAM_RMS for bench in BENCHMARKS]
# The signal per method shown in the scatter and comparison figures (the table has all of them).
FIG_SIGNALS = canon(DS.figure_signals(config, DOWNSTREAM))
TRAINING = [m for m in DOWNSTREAM if DS.REGISTRY[m].train_log]


FIGURES = ["accuracy", "bon_curves", "scatter", "correlations"] + [f"{m}_training" for m in TRAINING]
# Outputs of each figure rule: the PNG goes into the HTML report with its caption, the PDF beside it.
FIG_OUT = {
    name: {
        "png": report(f"results/figures/{name}.png", caption=f"../report/fig_{name}.rst", category="Figures"),
        "pdf": f"results/figures/{name}.pdf",
    }
    for name in ["accuracy", "bon_curves", "scatter", "correlations"]
}
FIG_OUT["training"] = {
    "png": report("results/figures/{method}_training.png", caption="../report/fig_training.rst", category="Figures"),
    "pdf": "results/figures/{method}_training.pdf",
}


rule correlations:
    input:
        pairs=[f"results/scores/{rm}/{bench}.pairs.jsonl" for rm, bench in CORR_PAIR_KEYS],
        downstream=[DS.table_path(m) for m in DOWNSTREAM],
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
        comparisons=report(
            "results/tables/correlation_comparisons.csv",
            caption="../report/correlation_comparisons.rst",
            category="Tables",
        ),
        power=report(
            "results/tables/correlation_power.csv",
            caption="../report/correlation_power.rst",
            category="Tables",
        ),
        verdict="results/tables/verdict.html",
        by_subset="results/tables/correlations_by_subset.csv",
        forest_png=report("results/figures/forest.png", caption="../report/fig_forest.rst", category="Figures"),
        forest_pdf="results/figures/forest.pdf",
    log:
        "logs/analysis/correlations.log",
    benchmark:
        "job_times/analysis/correlations.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        rms=ROW_DOWNSTREAM_RMS,
        missing=MISSING,
        pair_keys=CORR_PAIR_KEYS,
        run_keys=RUN_KEYS,
        methods=DOWNSTREAM,
        bench_kinds={b: config["data"]["baselines"][b].get("kind") for b in BASELINES},
        corr=pick(
            CORR,
            [
                "bootstrap",
                "permutations",
                "rbo_p",
                "ci",
                "fdr",
                "min_rms",
                "power_simulations",
                "confirmatory",
                "per_subset",
            ],
        ),
        signals=FIG_SIGNALS,
        seed=SEED,
    script:
        "../workflow_scripts/correlations.py"


rule fig_accuracy:
    input:
        "results/tables/benchmark_accuracy.csv",
    output:
        **FIG_OUT["accuracy"],
    log:
        "logs/analysis/fig_accuracy.log",
    benchmark:
        "job_times/analysis/fig_accuracy.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        figure="accuracy",
        rms=ROW_RMS,
        missing=MISSING,
        benchmarks=BENCHMARKS,
    script:
        "../workflow_scripts/figures.py"


rule fig_bon_curves:
    input:
        "results/tables/bon.csv",
    output:
        **FIG_OUT["bon_curves"],
    log:
        "logs/analysis/fig_bon_curves.log",
    benchmark:
        "job_times/analysis/fig_bon_curves.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        figure="bon_curves",
        rms=ROW_DOWNSTREAM_RMS,
        missing=MISSING,
        estimator=FIG_SIGNALS["bon"]["estimator"],
    script:
        "../workflow_scripts/figures.py"


rule fig_scatter:
    input:
        inputs="results/tables/correlation_inputs.csv",
        table="results/tables/correlations.csv",
    output:
        **FIG_OUT["scatter"],
    log:
        "logs/analysis/fig_scatter.log",
    benchmark:
        "job_times/analysis/fig_scatter.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        figure="scatter",
        signals=FIG_SIGNALS,
        measure="judge_score",
        missing=MISSING,
    script:
        "../workflow_scripts/figures.py"


rule fig_correlations:
    input:
        "results/tables/correlations.csv",
    output:
        **FIG_OUT["correlations"],
    log:
        "logs/analysis/fig_correlations.log",
    benchmark:
        "job_times/analysis/fig_correlations.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        figure="correlations",
        signals=FIG_SIGNALS,
        measure="judge_score",
        missing=MISSING,
    script:
        "../workflow_scripts/figures.py"


rule fig_training:
    input:
        # a per-subset run's log (ppo.per_subset) is the pattern with rm "{rm}/{subset}": one curve per run
        lambda wc: [DS.REGISTRY[wc.method].train_log.format(policy=p, rm=r) for p, r in training_runs(wc.method)],
    output:
        **FIG_OUT["training"],
    log:
        "logs/analysis/fig_{method}_training.log",
    benchmark:
        "job_times/analysis/fig_{method}_training.tsv"
    wildcard_constraints:
        method="|".join(TRAINING) if TRAINING else "__none__",
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        figure="training",
        run_keys=lambda wc: training_runs(wc.method),
        label=lambda wc: DS.label(wc.method),
        smooth=1,
        missing=MISSING,
    script:
        "../workflow_scripts/figures.py"


# correlation.null_world: the verdict rule again on the run's own BoN picks, the judge's ratings replaced
# by judges with a known answer (prbench.analysis.null_world); reads sample set 0 of each policy
NULL_WORLD = CORR["null_world"]
if "bon" in config and (NULL_WORLD["draws"] > 0 or NULL_WORLD["graded"]):

    rule null_world:
        input:
            pairs=[f"results/scores/{rm}/{bench}.pairs.jsonl" for rm, bench in CORR_PAIR_KEYS],
            downstream=[DS.table_path(m) for m in DOWNSTREAM],
            samples=[f"{bon_dir(p)}/samples.jsonl" for p in POLICIES],
            judged=[f"{bon_dir(p)}/judged.jsonl" for p in POLICIES],
            rm_scores=[f"{bon_dir(p)}/rm_scores/{r}.jsonl" for p in POLICIES for r in ROW_DOWNSTREAM_RMS],
            judge_keys=(
                ["results/data/judge_keys/personalized.jsonl"]
                if "other_user" in NULL_WORLD["judges"] or NULL_WORLD["graded"]
                else []
            ),
        output:
            report(
                "results/tables/null_world.csv",
                caption="../report/null_world.rst",
                category="Tables",
            ),
        log:
            "logs/analysis/null_world.log",
        benchmark:
            "job_times/analysis/null_world.tsv"
        conda:
            "../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=15,
        params:
            rms=ROW_DOWNSTREAM_RMS,
            pair_keys=CORR_PAIR_KEYS,
            run_keys=RUN_KEYS,
            methods=DOWNSTREAM,
            policies=POLICIES,
            bench_kinds={b: config["data"]["baselines"][b].get("kind") for b in BASELINES},
            corr=pick(CORR, ["bootstrap", "fdr", "min_rms", "confirmatory", "null_world"]),
            signals=FIG_SIGNALS,
            n=config["bon"]["n"],
            seed=SEED,
        script:
            "../workflow_scripts/null_world.py"

    ALL_TARGETS.append("results/tables/null_world.csv")


ALL_TARGETS.extend(
    [
        "results/tables/correlations.csv",
        "results/tables/correlation_summary.md",
        "results/tables/correlation_inputs.csv",
        "results/tables/correlation_comparisons.csv",
        "results/tables/correlation_power.csv",
    ]
)
ALL_TARGETS.extend(f"results/figures/{name}.{ext}" for name in FIGURES for ext in ("png", "pdf"))


# The leaderboard: every RM ranked by personalized accuracy, with the baselines' official scores and
# the downstream signals of the figures (prbench.analysis.leaderboard). The HTML table is the report's
# Leaderboard entry, its compact summary (no CIs) the table on the report's landing page (report/workflow.rst).
rule leaderboard:
    input:
        accuracy="results/tables/benchmark_accuracy.csv",
        inputs="results/tables/correlation_inputs.csv",
    output:
        csv="results/tables/leaderboard.csv",
        md="results/tables/leaderboard.md",
        html=report(
            "results/tables/leaderboard.html",
            caption="../report/leaderboard.rst",
            category="Leaderboard",
        ),
        summary="results/tables/leaderboard.summary.html",
    log:
        "logs/analysis/leaderboard.log",
    benchmark:
        "job_times/analysis/leaderboard.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        rms=ROW_RMS,
        signals=FIG_SIGNALS,
        measure="judge_score",
    script:
        "../workflow_scripts/leaderboard.py"


ALL_TARGETS.extend(f"results/tables/leaderboard.{ext}" for ext in ("csv", "md", "html", "summary.html"))


# The RMs a partial run leaves out, each failed job with its log (header only in a complete run).
rule missing_rms:
    output:
        report("results/tables/missing_rms.csv", caption="../report/missing_rms.rst", category="Tables"),
    log:
        "logs/analysis/missing_rms.log",
    benchmark:
        "job_times/analysis/missing_rms.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    params:
        missing=MISSING,
    script:
        "../workflow_scripts/missing_rms.py"


ALL_TARGETS.append("results/tables/missing_rms.csv")
