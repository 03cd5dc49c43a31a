"""Rule judged_measures: a trained-policy method's eval_judged.jsonl files (rule eval_policy)
-> results/downstream/{method}.csv."""
from prbench.job import start

log = start(snakemake)

from prbench.downstream import write_judged_measures

sm = snakemake
runs = {}  # (policy, rm, replicate) -> its runs' files: one, or one per subset (ppo.per_subset)
for (p, r, _subset, rep), path in zip(sm.params.runs, sm.input.judged):
    runs.setdefault((p, r, rep), []).append(path)
df = write_judged_measures(sm.wildcards.method, runs, sm.output[0])
log.info("%s measures: %d rows, %d runs", sm.wildcards.method, len(df), len(runs))
