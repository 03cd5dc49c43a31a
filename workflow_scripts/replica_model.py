"""Rule replica_model: build one tiny local replica model (config key replica.models.<name>)."""
import logging

from prbench.job import start

start(snakemake)

from prbench.replica.build import build_replica

sm = snakemake
spec = dict(sm.params.spec)
builder = spec.pop("builder")
hub_id = spec.pop("replicates", None)
logging.getLogger("prbench.replica").info("replica %s (%s) of %s", sm.wildcards.replica, builder, hub_id or "?")
if "judge_training" in spec:  # the judge replica: trained on the judge's prompt format
    spec["judge_protocol"] = dict(sm.params.judge_protocol)
build_replica(builder, sm.output[0], seed=sm.params.seed, **spec)
