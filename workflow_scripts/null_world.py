"""Snakemake entry point (rule null_world): the verdict rule on the run's own BoN picks under judges
with a known answer (prbench.analysis.null_world)."""
from prbench.job import start

log = start(snakemake)

from prbench.analysis.null_world import run_null_world

sm = snakemake
p = sm.params
n_rms = len(p.rms)
run_null_world(
    rms=list(p.rms),
    pair_files=[(rm, bench, path) for (rm, bench), path in zip(p.pair_keys, sm.input.pairs)],
    downstream_tables=list(zip(p.methods, sm.input.downstream)),
    bon_files={policy: (sm.input.samples[i], sm.input.judged[i],
                        dict(zip(p.rms, sm.input.rm_scores[i * n_rms:(i + 1) * n_rms])))
               for i, policy in enumerate(p.policies)},
    out_csv=sm.output[0],
    n_boot=p.corr["bootstrap"],
    seed=p.seed,
    fdr=p.corr["fdr"],
    min_rms=p.corr["min_rms"],
    confirmatory=p.corr["confirmatory"],
    signals={m: dict(v) for m, v in dict(p.signals).items()},
    bench_kinds=dict(p.bench_kinds),
    runs={m: [tuple(run) for run in runs] for m, runs in dict(p.run_keys).items()},
    spec=dict(p.corr["null_world"]),
    n=p.n,
    judge_keys=sm.input.judge_keys[0] if sm.input.judge_keys else None,
)
