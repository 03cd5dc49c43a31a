"""Rules rm_family_<family>: train every member of an RM family and score each benchmark with each
(prbench.scoring.family.train_and_score_family). Each output is matched to its member by the member
name in its path (prbench.rms.family.member_paths), never by position."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.rms.family import member_paths
from prbench.scoring.family import train_and_score_family

sm = snakemake
p = sm.params
specs = {m: dict(s) for m, s in dict(p.specs).items()}
members = list(specs)


def outputs(files, bench):
    """One benchmark's output files (results/scores/{member}/{bench}.<suffix>) by member."""
    mine = [f for f in files if f.rsplit("/", 1)[-1].split(".", 1)[0] == bench]
    return member_paths(mine, members, lambda path: path.parent.name)


train_and_score_family(
    specs=specs,
    train_paths={src: sm.input[src] for src in ("personalized", "general") if src in sm.input.keys()},
    model_dirs=member_paths(list(sm.output.models), members, lambda path: path.name),
    benches={
        b: {
            "path": sm.input[f"bench_{b}"],
            "kind": p.bench_kinds.get(b),
            "pairs_out": outputs(list(sm.output.pairs), b),
            "acc_out": outputs(list(sm.output.acc), b),
        }
        for b in p.benches
    },
    seed=p.seed,
    scoring={},  # the schema's defaults: a frozen head reads no scoring key; the table recomputes the CIs
    encoder=specs[members[0]]["encoder"],
)
