"""Rule replica_model: build one tiny local replica model (config key replica.models.<name>)."""
import logging

from prbench.log import setup_logging
from prbench.replica.build import build_replica

setup_logging(snakemake.log[0])  # noqa: F821
sm = snakemake  # noqa: F821
spec = dict(sm.params.spec)
builder = spec.pop("builder")
hub_id = spec.pop("replicates", None)
logging.getLogger("prbench.replica").info("replica %s (%s) of %s", sm.wildcards.replica, builder, hub_id or "?")
build_replica(builder, sm.output[0], seed=sm.params.seed, **spec)
