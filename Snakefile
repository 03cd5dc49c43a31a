# Personalized RewardBench pipeline (arXiv 2604.07343), reproduced and extended.
#   snakemake --cores all                          # paper config (config.yaml), GPU box
#   snakemake --cores all --profile profiles/demo  # offline demo on CPU
#   snakemake --profile profiles/slurm             # SLURM cluster
from snakemake.utils import min_version

min_version("9.0")


report: "report/workflow.rst"


# A --configfile given on the command line or in a profile replaces config.yaml entirely
# (Snakemake would otherwise merge the two and mix the paper's RMs into the demo).
if not config:

    configfile: "config.yaml"


include: "rules/common.smk"


if REPLICA:

    include: "rules/replica.smk"


include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/policy.smk"
include: "rules/scoring.smk"
include: "rules/judge.smk"
include: "rules/bon.smk"
include: "rules/family.smk"
include: "rules/ppo.smk"
include: "rules/grpo.smk"
include: "rules/evaluation.smk"
include: "rules/analysis.smk"
include: "rules/manifest.smk"


# Seconds-long table and figure jobs run on the submitting machine, not through a cluster queue.
localrules:
    all,
    merge_samples,
    merge_samples_set,
    accuracy_table,
    benchmark_reports,
    bon_table,
    bon_measures,
    ppo_table,
    judged_measures,
    grpo_table,
    correlations,
    fig_accuracy,
    fig_bon_curves,
    fig_scatter,
    fig_correlations,
    fig_training,
    missing_rms,
    manifest,
    leaderboard,


rule all:
    default_target: True
    input:
        ALL_TARGETS,


# With --keep-going, a run where only some RMs' jobs failed still analyses the other RMs, in a
# second Snakemake run, and exits non-zero (prbench.partial, docs/DESIGN.md "Partial runs").
onerror:
    PARTIAL.after_failure(workflow, config, MISSING)
