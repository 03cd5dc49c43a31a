"""Rule judged_measures: a trained-policy method's eval_judged.jsonl files (rule eval_policy)
-> results/downstream/{method}.csv."""
from prbench.job import start

log = start(snakemake)

from prbench.downstream import write_judged_measures

sm = snakemake
runs = {(p, r): path for (p, r), path in zip(sm.params.runs, sm.input.judged)}
df = write_judged_measures(sm.wildcards.method, runs, sm.output[0])
log.info("%s measures: %d rows, %d runs", sm.wildcards.method, len(df), len(runs))
