"""Rules rm_family_<family>: train every member of an RM family and score each benchmark with each
(prbench.rms.family.train_and_score_family)."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.scoring.family import train_and_score_family

sm = snakemake
p = sm.params
members = list(p.specs)
n_b = len(p.benches)
train_and_score_family(
    specs={m: dict(s) for m, s in dict(p.specs).items()},
    train_paths={src: sm.input[src] for src in ("personalized", "general") if src in sm.input.keys()},
    model_dirs=dict(zip(members, sm.output.models)),
    benches={
        b: {
            "path": sm.input[f"bench_{b}"],
            "kind": p.bench_kinds.get(b),
            "pairs_out": {m: sm.output.pairs[i * n_b + j] for i, m in enumerate(members)},
            "acc_out": {m: sm.output.acc[i * n_b + j] for i, m in enumerate(members)},
        }
        for j, b in enumerate(p.benches)
    },
    seed=p.seed,
    scoring=dict(p.scoring),
    encoder=next(iter(p.specs.values()))["encoder"],
)
