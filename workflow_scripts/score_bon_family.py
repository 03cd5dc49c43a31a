"""Rules score_bon_family_*: every member of an RM family scores every BoN sample
(prbench.downstream.bon.family.score_bon_family). Model folders and score files are matched to their
member by the member name in their paths (prbench.rms.family.member_paths), never by position."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.downstream.bon.family import score_bon_family
from prbench.rms.family import member_paths

sm = snakemake
specs = {m: dict(s) for m, s in dict(sm.params.specs).items()}
members = list(specs)
score_bon_family(sm.input.samples, sm.input.prompts, specs,
                 member_paths(list(sm.input.models), members, lambda path: path.name),
                 member_paths(list(sm.output), members, lambda path: path.stem),
                 encoder=specs[members[0]]["encoder"])
