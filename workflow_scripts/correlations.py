"""Snakemake entry point (rule correlations): benchmark scores vs downstream measures across RMs."""
from prbench.job import start

log = start(snakemake)

from prbench import partial
from prbench.analysis.correlation import run_correlations

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
    n_boot=p.corr["bootstrap"],
    n_perm=p.corr["permutations"],
    rbo_p=p.corr["rbo_p"],
    ci=p.corr["ci"],
    fdr=p.corr["fdr"],
    min_rms=p.corr["min_rms"],
    power_sims=p.corr["power_simulations"],
    signals={m: dict(v) for m, v in dict(p.signals).items()},
    seed=p.seed,
    bench_kinds=dict(p.bench_kinds),
    runs=[tuple(run) for run in p.run_keys],
)
# The summary states its n, the replicates per method and, in a partial run, the RMs left out with
# their failed rules and logs
n_line = " ".join(x for x in (partial.n_line(list(p.rms), dict(p.missing)), res.replicates) if x)
summary = f"{n_line}\n\n{res.summary}"
with open(sm.output.summary, "w", encoding="utf-8") as fh:
    fh.write(summary if summary.endswith("\n") else summary + "\n")
log.info("summary:\n%s", summary)
