"""Rule leaderboard: results/tables/leaderboard.{csv,md,html} and leaderboard.summary.html
(prbench.analysis.leaderboard)."""
from prbench.job import start

log = start(snakemake)

from prbench.analysis.leaderboard import leaderboard

sm = snakemake
board = leaderboard(sm.input.accuracy, sm.input.inputs, sm.output.csv, sm.output.md, sm.output.html, sm.output.summary,
                    rms=list(sm.params.rms), signals=dict(sm.params.signals), measure=sm.params.measure)
log.info("wrote %s (%d RMs), %s and %s", sm.output.csv, len(board), sm.output.md, sm.output.html)
