"""Snakemake entry point (rule correlations): benchmark scores vs downstream measures across RMs."""
from prbench.job import start

log = start(snakemake)

from prbench import partial
from prbench.analysis.correlation import run_correlations
from prbench.analysis.summary import VERDICT_END

sm = snakemake
p = sm.params
res = run_correlations(
    rms=list(p.rms),
    pair_files=[(rm, bench, path) for (rm, bench), path in zip(p.pair_keys, sm.input.pairs)],
    downstream_tables=list(zip(p.methods, sm.input.downstream)),
    out_table=sm.output.table,
    out_summary=sm.output.summary,
    out_inputs=sm.output.inputs,
    out_comparisons=sm.output.comparisons,
    out_power=sm.output.power,
    out_verdict=sm.output.verdict,
    out_forest=(sm.output.forest_png, sm.output.forest_pdf),
    per_subset=p.corr["per_subset"],
    out_by_subset=sm.output.by_subset,
    n_boot=p.corr["bootstrap"],
    n_perm=p.corr["permutations"],
    rbo_p=p.corr["rbo_p"],
    ci=p.corr["ci"],
    fdr=p.corr["fdr"],
    min_rms=p.corr["min_rms"],
    power_sims=p.corr["power_simulations"],
    confirmatory=p.corr["confirmatory"],
    signals={m: dict(v) for m, v in dict(p.signals).items()},
    seed=p.seed,
    bench_kinds=dict(p.bench_kinds),
    runs={m: [tuple(run) for run in runs] for m, runs in dict(p.run_keys).items()},
)
# The summary states its n, the replicates per method and, in a partial run, the RMs left out with
# their failed rules and logs: right after the verdict, which opens it
n_line = " ".join(x for x in (partial.n_line(list(p.rms), dict(p.missing)), res.replicates) if x)
summary = res.summary.replace(VERDICT_END, f"{VERDICT_END}\n\n{n_line}", 1) if n_line else res.summary
with open(sm.output.summary, "w", encoding="utf-8") as fh:
    fh.write(summary if summary.endswith("\n") else summary + "\n")
log.info("summary:\n%s", summary)
