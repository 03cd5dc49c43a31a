"""Paired comparison of the personalized benchmark with each baseline on the same downstream
measures (`correlation_comparisons.csv`), their verdicts, and the power table
(`correlation_power.csv`). The statistics are `prbench.analysis.inference`'s; this module picks the
headline scores and cells, runs them over every (baseline, downstream measure, coefficient) and
applies FDR control and the verdict rule. Called by `prbench.analysis.correlation.correlate` with its
evaluated scores (objects with `.score.key`, `.point` (R,) and `.boot` (B, R))."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..downstream import SCORED_MEASURE
from ..seeding import stable_seed
from . import inference, rankmetrics

PERSONALIZED = "personalized"
COMPARISON_COLUMNS = [
    "benchmark_a", "level_a", "benchmark_b", "level_b", "policy", "downstream", "estimator", "measure", "k",
    "coefficient", "n_rms", "value_a", "value_b", "diff", "ci_low", "ci_high", "n_boot", "p_perm", "p_williams",
    "q_perm", "loo_min", "loo_max", "headline", "verdict", "reason",
]
POWER_COLUMNS = ["benchmark_a", "benchmark_b", "quantity", "gap", "n_rms", "power", "rho_ab", "center", "alpha",
                 "target_power", "n_sims"]
# the coefficients compared: Spearman, Pearson beside it, then every other rank coefficient
COMPARED = ("spearman", "pearson") + tuple(c for c in rankmetrics.COEFFICIENTS if c != "spearman")


def dkey(key: dict) -> tuple:
    """A downstream measure's identity: (policy, downstream, estimator, measure, k)."""
    return (key["policy"], key["downstream"], key["estimator"], key["measure"], key["k"])


def headline_benchmarks(bench: list) -> list:
    """Each benchmark's headline score: level `official` where present, else `overall`; personalized first."""
    official = {e.score.key["benchmark"] for e in bench if e.score.key["level"] == "official"}
    return [e for e in bench if e.score.key["level"] == "official"
            or (e.score.key["level"] == "overall" and e.score.key["benchmark"] not in official)]


def _headline_cells(down: list, signals: dict | None) -> set:
    """The downstream key of each (policy, method)'s headline cell: its judge score at the method's
    signal (estimator, k); without a signal, the first judge-score cell in table order."""
    cells = {}
    for e in down:
        k = e.score.key
        if k["measure"] != SCORED_MEASURE:
            continue
        sig = (signals or {}).get(k["downstream"])
        if sig is not None:
            if str(sig.get("estimator") or "") == str(k["estimator"] or "") and \
                    (None if sig.get("k") is None else int(sig["k"])) == k["k"]:
                cells[(k["policy"], k["downstream"])] = dkey(k)
        else:
            cells.setdefault((k["policy"], k["downstream"]), dkey(k))
    return set(cells.values())


def decide(row: dict, fdr: float, min_rms: int) -> tuple[str, str]:
    """("personalized" | "baseline" | "undecided", why): a side wins only when the difference
    survives FDR control (q_perm <= fdr), its bootstrap CI excludes 0 on that side, no single
    left-out RM flips its sign, and at least min_rms RMs are compared."""
    diff = row["diff"]
    if not np.isfinite(diff):
        return "undecided", "the difference is undefined"
    fails = []
    if row["n_rms"] < min_rms:
        fails.append(f"only {row['n_rms']} RMs (correlation.min_rms = {min_rms})")
    if diff == 0:
        fails.append("the two coefficients are equal")
    q = row["q_perm"]
    if not (np.isfinite(q) and q <= fdr):
        fails.append(f"the permutation test does not survive FDR at {fdr:g}")
    lo, hi = row["ci_low"], row["ci_high"]
    if not (np.isfinite(lo) and ((diff > 0 and lo > 0) or (diff < 0 and hi < 0))):
        fails.append("the bootstrap CI of the difference includes 0")
    lmin, lmax = row["loo_min"], row["loo_max"]
    if not (np.isfinite(lmin) and ((diff > 0 and lmin > 0) or (diff < 0 and lmax < 0))):
        fails.append("leaving one RM out can flip or zero the sign")
    if fails:
        return "undecided", "; ".join(fails)
    return ("personalized" if diff > 0 else "baseline"), "all criteria hold"


def compare_benchmarks(bench: list, down: list, coefs: dict, n_boot: int, n_perm: int,
                       ci: float, seed: int, fdr: float, min_rms: int, signals: dict | None) -> pd.DataFrame:
    """The personalized benchmark's headline score against each baseline's, on every downstream
    measure and coefficient (`inference.compare`), BH q-values over all rows, verdicts."""
    heads = headline_benchmarks(bench)
    pers = [e for e in heads if e.score.key["benchmark"] == PERSONALIZED]
    others = [e for e in heads if e.score.key["benchmark"] != PERSONALIZED]
    headline = _headline_cells(down, signals)
    fns = {"pearson": inference.pearson, **coefs}
    rows = []
    for a in pers:
        for b in others:
            for d in down:
                keep = np.isfinite(a.point) & np.isfinite(b.point) & np.isfinite(d.point)
                n = int(keep.sum())
                rm_idx = inference.rm_resamples(n, n_boot, seed) if n >= 2 else np.empty((0, n), dtype=int)
                for name in ["spearman", "pearson"] + [c for c in coefs if c != "spearman"]:
                    base = {"benchmark_a": a.score.key["benchmark"], "level_a": a.score.key["level"],
                            "benchmark_b": b.score.key["benchmark"], "level_b": b.score.key["level"],
                            **d.score.key, "coefficient": name, "n_rms": n,
                            "headline": dkey(d.score.key) in headline}
                    if n < 3:
                        rows.append({**base, "diff": float("nan"), "n_boot": 0})
                        continue
                    fn = fns[name]
                    rows.append({**base, **inference.compare(
                        a.point[keep], b.point[keep], d.point[keep], a.boot[:, keep], b.boot[:, keep],
                        d.boot[:, keep], rm_idx, fn, name, ci, n_perm,
                        stable_seed(seed, "correlation-swap", n))})
    table = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    table["k"] = table["k"].astype("Int64")
    table["headline"] = table["headline"].astype(bool)
    table["q_perm"] = inference.bh_qvalues(table["p_perm"].to_numpy(dtype=float))
    verdicts = [decide(r, fdr, min_rms) for r in table.to_dict("records")]
    table["verdict"] = [v for v, _ in verdicts]
    table["reason"] = [w for _, w in verdicts]
    return table


def power_table(bench: list, n_sims: int, alpha: float, seed: int) -> pd.DataFrame:
    """Per (personalized, baseline) headline pair: `inference.power_rows` at the run's n RMs, with
    the two benchmarks' observed Spearman correlation across RMs as their correlation."""
    heads = headline_benchmarks(bench)
    pers = [e for e in heads if e.score.key["benchmark"] == PERSONALIZED]
    rows = []
    if n_sims > 0:
        for a in pers:
            for b in heads:
                if b.score.key["benchmark"] == PERSONALIZED:
                    continue
                keep = np.isfinite(a.point) & np.isfinite(b.point)
                rho_ab = float(rankmetrics.spearman(a.point[keep], b.point[keep])) if keep.sum() >= 2 else np.nan
                for r in inference.power_rows(int(keep.sum()), rho_ab, n_sims, alpha, seed):
                    rows.append({"benchmark_a": a.score.key["benchmark"], "benchmark_b": b.score.key["benchmark"],
                                 **r})
    return pd.DataFrame(rows, columns=POWER_COLUMNS)


def best_without_one_rm(rms: list[str], bench: list, down: list, coefs: dict) -> dict:
    """{(downstream key, coefficient): {left-out RM: the best headline benchmark without it}} for
    Spearman and Kendall (ties between benchmarks: their names joined by '='; none defined: '-')."""
    heads = headline_benchmarks(bench)
    out = {}
    if len(heads) < 2:
        return out
    for d in down:
        keep = np.isfinite(d.point)
        for h in heads:
            keep &= np.isfinite(h.point)
        idx = np.flatnonzero(keep)
        if len(idx) < 3:
            continue
        for name in ("spearman", "kendall_tau_b"):
            loo = np.array([inference.leave_one_out(h.point[idx], d.point[idx], coefs[name]) for h in heads])
            best = {}
            for j, r in enumerate(idx):
                col_vals = loo[:, j]
                if not np.isfinite(col_vals).any():
                    best[rms[r]] = "-"
                    continue
                top = np.nanmax(col_vals)
                best[rms[r]] = "=".join(h.score.key["benchmark"] for h, v in zip(heads, col_vals) if v == top)
            out[(dkey(d.score.key), name)] = best
    return out
