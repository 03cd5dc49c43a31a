"""Rule bon_table: best-of-k curves per (policy, RM) plus oracle/random, and results/tables/bon.csv."""
from pathlib import Path

from prbench.job import start

start(snakemake)

from prbench.downstream.bon import bon_table

sm = snakemake
sets = sm.params.get("sample_sets") or [0]  # bon.sample_sets: input names of set k > 0 end in _set{k}
policies = {
    p: [
        {
            "samples": sm.input[f"samples_{p}{sfx}"],
            "judged": sm.input[f"judged_{p}{sfx}"],
            "rm_scores": {r: sm.input[f"rm_{p}_{r}{sfx}"] for r in sm.params.rms},
            "curves_dir": str(Path(sm.input[f"samples_{p}{sfx}"]).parent / "curves"),
        }
        for sfx in (f"_set{k}" if k else "" for k in sets)
    ]
    for p in sm.params.policies
}
bon_table(policies, sm.output.table, ks=list(sm.params.ks), n=sm.params.n, seed=sm.params.seed,
          n_boot=sm.params.bootstrap)
