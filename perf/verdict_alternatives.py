"""Why the verdict's RM level is Williams' t: per-cell rejection rate at 0.05 of three RM-level
standard errors of the Spearman difference on the same draws (`prbench.analysis.power.draw_cell`):
Williams' t with the Bonett-Wright factor (`verdict.williams_bw`, the rule's), the leave-one-RM-out
jackknife (`verdict.jackknife_se`) and a bootstrap over RMs (RMs resampled with replacement), each
as t = difference / se on n - 3 df; under equal population coefficients (size) and a gap of 0.3
(power). perf/README.md, "The verdict rule".

    python perf/verdict_alternatives.py [draws, default 2000]
"""
import sys

import numpy as np
from scipy import stats as sps

from prbench.analysis import power as P
from prbench.analysis import verdict as V
from prbench.seeding import stable_seed


def rates(xa, xb, y, rng, n_boot=400):
    n = y.shape[-1]
    ra, rb, rab = V.spearman_triplet(xa, xb, y)
    d = ra - rb
    _, se_w = V.williams_bw(ra, rb, rab, n)
    se_j = V.jackknife_se(xa, xb, y)
    idx = rng.integers(0, n, (len(y), n_boot, n))
    boot = [np.take_along_axis(np.broadcast_to(v[:, None], idx.shape), idx, -1) for v in (xa, xb, y)]
    db = V.spearman_difference(*boot)
    se_b = np.nanstd(db, axis=1, ddof=1)
    out = []
    for se in (se_w, se_j, se_b):
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(se > 0, 2 * sps.t.sf(np.abs(d) / se, n - 3), 1.0)
        out.append(float((p < 0.05).mean()))
    return out


def main(draws: int) -> None:
    print("n\trho\trho_ab\tlevels\tsize: Williams, jackknife, RM bootstrap\tpower at gap 0.3: the same")
    for levels in (None, 3):
        for n in (10, 20, 30):
            for rho in (0.3, 0.6):
                for rab in (0.2, 0.5, 0.9):
                    rng = np.random.default_rng(stable_seed(0, "verdict-alternatives", n, rho, rab, levels or 0))
                    size = rates(*P.draw_cell(rho, 0.0, rab, n, draws, rng, levels), rng)
                    power = rates(*P.draw_cell(rho, 0.3, rab, n, draws, rng, levels), rng)
                    print(f"{n}\t{rho}\t{rab}\t{levels or '-'}\t" + " ".join(f"{x:.3f}" for x in size) + "\t"
                          + " ".join(f"{x:.3f}" for x in power))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
