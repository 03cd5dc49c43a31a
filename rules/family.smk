# RM families (prbench.rms.family): a reward_models entry with a `grid` is expanded into frozen_head
# members (check_config). One job per family trains every member's head on the shared frozen encoder's
# features and scores each benchmark with each member; one job per (family, policy, BoN sample set)
# scores every BoN sample with every member. Each member keeps its own files (results/models/rm/{member},
# results/scores/{member}/{bench}.*, results/bon/{policy}[/set{r}]/rm_scores/{member}.jsonl), so every
# table, partial run and `make score` sees members as RMs; score_benchmark and score_bon skip them.


def family_sources(family):
    """The train files the family's members draw from: personalized and/or general (their shares)."""
    shares = {rm_entry(m)["personalized_share"] for m in FAMILIES[family]}
    srcs = (["personalized"] if any(s > 0 for s in shares) else []) + (
        ["general"] if any(s < 1 for s in shares) else []
    )
    return {src: f"results/data/train/{src}.jsonl" for src in srcs}


def family_specs(family):
    return canon({m: rm_spec(m) for m in FAMILIES[family]})


for _fam in FAMILIES:

    rule:
        name:
            f"rm_family_{_fam}"
        input:
            **family_sources(_fam),
            **{f"bench_{b}": f"results/data/benchmarks/{b}.jsonl" for b in BENCHMARKS},
        output:
            models=directory([f"results/models/rm/{m}" for m in FAMILIES[_fam]]),
            pairs=[f"results/scores/{m}/{b}.pairs.jsonl" for m in FAMILIES[_fam] for b in BENCHMARKS],
            acc=[f"results/scores/{m}/{b}.accuracy.json" for m in FAMILIES[_fam] for b in BENCHMARKS],
        log:
            f"logs/models/rm_family_{_fam}.log",
        benchmark:
            f"job_times/models/rm_family_{_fam}.tsv"
        priority: 10
        conda:
            "../envs/models.yaml"
        threads: threads_for(2)
        resources:
            mem_mb=CPU_MEM_MB if DEMO else 8000,
            runtime=30 if DEMO else 120,
        params:
            family=_fam,
            specs=family_specs(_fam),
            benches=BENCHMARKS,
            bench_kinds={b: config["data"]["baselines"].get(b, {}).get("kind") for b in BENCHMARKS},
            seed=SEED,
        script:
            "../workflow_scripts/rm_family.py"

    for _fam_set in replicates("bon"):
        for _fam_pol in POLICIES:

            rule:
                name:
                    f"score_bon_family_{_fam}_{_fam_pol}" + (f"_set{_fam_set}" if _fam_set else "")
                input:
                    samples=f"{bon_dir(_fam_pol, _fam_set)}/samples.jsonl",
                    prompts="results/data/prompts/eval.jsonl",
                    models=[f"results/models/rm/{m}" for m in FAMILIES[_fam]],
                output:
                    [f"{bon_dir(_fam_pol, _fam_set)}/rm_scores/{m}.jsonl" for m in FAMILIES[_fam]],
                log:
                    f"logs/bon/{_fam_pol}/score_family_{_fam}" + (f"_set{_fam_set}" if _fam_set else "") + ".log",
                benchmark:
                    f"job_times/bon/{_fam_pol}/score_family_{_fam}" + (f"_set{_fam_set}" if _fam_set else "") + ".tsv"
                priority: 2
                conda:
                    "../envs/downstream.yaml"
                threads: threads_for(2)
                resources:
                    mem_mb=CPU_MEM_MB if DEMO else 8000,
                    runtime=30 if DEMO else 120,
                params:
                    specs=canon({m: DOWNSTREAM_RM_SPEC["bon"][m] for m in FAMILIES[_fam]}),
                script:
                    "../workflow_scripts/score_bon_family.py"
