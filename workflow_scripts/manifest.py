"""Snakemake entry point (rule manifest): results/manifest.json (prbench.manifest)."""
from prbench.job import start

log = start(snakemake)

from prbench import manifest

p = snakemake.params
m = manifest.write_manifest(snakemake.output[0], git=dict(p.git), config_sha256=p.config_sha256,
                            packages=dict(p.packages), refs=dict(p.refs), built=dict(p.built), seeds=dict(p.seeds),
                            lock=p.revisions_lock)
log.info("manifest: commit %s (dirty: %s), config sha256 %s, %d models and datasets", m["git"]["commit"],
         m["git"]["dirty"], m["config_sha256"], len(m["models_and_data"]))
