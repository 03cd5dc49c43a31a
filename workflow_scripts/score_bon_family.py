"""Rules score_bon_family_*: every member of an RM family scores every BoN sample
(prbench.rms.family.score_bon_family)."""
from prbench.job import start

start(snakemake, torch_threads=True)

from prbench.downstream.bon.family import score_bon_family

sm = snakemake
specs = {m: dict(s) for m, s in dict(sm.params.specs).items()}
members = list(specs)
score_bon_family(sm.input.samples, sm.input.prompts, specs, dict(zip(members, sm.input.models)),
                 dict(zip(members, sm.output)), encoder=specs[members[0]]["encoder"])
