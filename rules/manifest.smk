# The run manifest (prbench.manifest, docs/DESIGN.md "Run manifest"): results/manifest.json records
# the code, config, packages, model and data revisions or digests, seeds and devices behind the tables.
# Its params change with any of those (the git state and local folders are read when the DAG is
# built), so it reruns alone; the tables never carry them and stay byte-identical across commits.
from prbench import manifest as MF  # noqa: E402

MANIFEST_BUILT = {
    **{f"reward_models.{r}": rm_model_dir(r) for r in ROW_RMS if rm_model_dir(r)},
    **{f"policies.{p}": policy_model_dir(p) for p in POLICIES if policy_model_dir(p)},
}
MANIFEST_BUILT_DIRS = sorted(set(MANIFEST_BUILT.values()))


rule manifest:
    input:
        # the final tables (read once every stage file has added its own) and the models the DAG trains
        lambda wc: [t for t in ALL_TARGETS if t.startswith("results/tables/")] + MANIFEST_BUILT_DIRS,
    output:
        report("results/manifest.json", caption="../report/manifest.rst", category="Provenance"),
    log:
        "logs/manifest.log",
    benchmark:
        "job_times/manifest.tsv"
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        git=MF.git_state(workflow.basedir),
        config_sha256=MF.json_sha256(config),
        packages=MF.package_versions(),
        refs=MF.describe_refs(config),
        built=MANIFEST_BUILT,
        seeds=MF.seeds(config),
        # the revision lock (prbench.revisions), read when this job runs: its commits are not params
        revisions_lock=config["revisions"]["lock"],
    script:
        "../workflow_scripts/manifest.py"


ALL_TARGETS.append("results/manifest.json")
