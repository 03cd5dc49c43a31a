"""Snakemake entry point (rules fig_*): one figure, PNG + PDF, chosen by params.figure."""
from prbench.job import start

log = start(snakemake)

from prbench import partial
from prbench.analysis import figures

sm = snakemake
p = sm.params
which = p.figure
figures.FOOTNOTE = partial.describe(dict(p.missing))  # '' unless a partial run
if which == "accuracy":
    figures.plot_accuracy(sm.input[0], sm.output.png, sm.output.pdf, rms=list(p.rms), benchmarks=list(p.benchmarks))
elif which == "bon_curves":
    figures.plot_bon_curves(sm.input[0], sm.output.png, sm.output.pdf, rms=list(p.rms), estimator=p.estimator)
elif which == "scatter":
    figures.plot_scatter(sm.input.inputs, sm.input.table, sm.output.png, sm.output.pdf, signals=dict(p.signals),
                         measure=p.measure)
elif which == "correlations":
    figures.plot_correlations(sm.input[0], sm.output.png, sm.output.pdf, signals=dict(p.signals),
                              measure=p.measure)
elif which == "training":
    figures.plot_training([(pol, rm, path) for (pol, rm), path in zip(p.run_keys, sm.input)],
                          sm.output.png, sm.output.pdf, smooth=p.smooth, label=p.label)
else:
    raise ValueError(f"rule {sm.rule}: unknown figure {which!r}")
log.info("wrote %s and %s", sm.output.png, sm.output.pdf)
