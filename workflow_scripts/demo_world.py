"""Rule demo_world: write the synthetic personalized benchmark and general baseline (hub schemas)."""
from prbench.job import start

start(snakemake)

from prbench.data.demo_world import generate

sm = snakemake
cfg = {"seed": sm.params.seed, "demo": dict(sm.params.demo), "data": dict(sm.params.data)}
generate(cfg, sm.params.personalized_dir, dict(sm.params.general_dirs))
