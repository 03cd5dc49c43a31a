"""Paired comparison of the personalized benchmark with each baseline on the same downstream
measures (`correlation_comparisons.csv`), their verdicts, and the power table
(`correlation_power.csv`). The descriptive statistics are `prbench.analysis.inference`'s and the
verdict rule is `prbench.analysis.verdict`'s; this module picks the headline scores and cells, runs
them over every (baseline, downstream measure, coefficient), splits the rows into the declared
confirmatory family (`correlation.confirmatory`, decided by the rule) and the exploratory rest
(their own BH, no verdict). Called by `prbench.analysis.correlation.correlate` with its
evaluated scores (objects with `.score.key`, `.point` (R,) and `.boot` (B, R))."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..downstream import SCORED_MEASURE
from ..seeding import stable_seed
from . import inference, power, rankmetrics, verdict

PERSONALIZED = "personalized"
COMPARISON_COLUMNS = [
    "benchmark_a", "level_a", "benchmark_b", "level_b", "policy", "downstream", "estimator", "measure", "k",
    "coefficient", "n_rms", "value_a", "value_b", "diff", "rho_ab", "family", "family_size", "test", "p", "q",
    "se_rm", "se_meas", "ci_low", "ci_high", "ci_level", "ci_method", "boot_low", "boot_high", "n_boot", "p_perm",
    "p_williams", "loo_min", "loo_max", "headline", "verdict", "reason",
]
POWER_COLUMNS = ["policy", "downstream", "estimator", "measure", "k", "benchmark_a", "benchmark_b", "quantity",
                 "gap_in", "gap", "n_rms", "power", "possible", "rho_ab", "center", "fdr", "family_size",
                 "target_power", "n_sims"]
CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
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


def confirmatory_mask(table: pd.DataFrame, confirmatory: list | None) -> np.ndarray:
    """The rows of the declared family: Spearman, the headline cell of each (policy, method),
    personalized vs each baseline, narrowed to the entries of `correlation.confirmatory` when given
    (each {downstream, baseline[, policy]}). An entry that matches no row is an error naming it."""
    base = (table["coefficient"] == "spearman").to_numpy() & table["headline"].to_numpy(dtype=bool)
    if confirmatory is None:
        return base
    mask = np.zeros(len(table), dtype=bool)
    for i, entry in enumerate(confirmatory):
        hit = base & (table["downstream"] == entry["downstream"]).to_numpy()
        hit &= (table["benchmark_b"] == entry["baseline"]).to_numpy()
        if entry.get("policy") is not None:
            hit &= (table["policy"] == entry["policy"]).to_numpy()
        if not hit.any():
            raise ValueError(f"correlation.confirmatory[{i}] = {dict(entry)} matches no headline cell of this run "
                             f"(methods {sorted(set(table['downstream']))}, baselines "
                             f"{sorted(set(table['benchmark_b']))}, policies {sorted(set(table['policy']))})")
        mask |= hit
    return mask


def family_cells(bench: list, down: list, signals: dict | None, confirmatory: list | None,
                 cache: dict | None = None) -> tuple[pd.DataFrame, list]:
    """The declared family in table order: its rows' keys (benchmark_b, policy, downstream, ...) and
    one `verdict.Cell` per row, the RM-level values with their measurement variance from the run's
    question bootstrap (`Evaluated.boot`: questions, pairs, sample sets and seeds redrawn, the RMs
    fixed). The run (`compare_benchmarks`) and the null-world check on a run's own picks
    (`prbench.analysis.null_world`) both decide these cells with `verdict.decide_family`. cache:
    cells by their three score objects (a caller that replaces only some of them between calls): a
    dict is looked up and filled, a read-only mapping only looked up; an entry holds the objects
    themselves, so it is used only for those very objects (an id can be reused once an object is gone)."""
    heads = headline_benchmarks(bench)
    pers = [e for e in heads if e.score.key["benchmark"] == PERSONALIZED]
    others = [e for e in heads if e.score.key["benchmark"] != PERSONALIZED]
    headline = _headline_cells(down, signals)
    keys, triples = [], []
    for a in pers:
        for b in others:
            for d in down:
                keys.append({"benchmark_a": a.score.key["benchmark"], "benchmark_b": b.score.key["benchmark"],
                             **d.score.key, "coefficient": "spearman", "headline": dkey(d.score.key) in headline})
                triples.append((a, b, d))
    table = pd.DataFrame(keys)
    if table.empty:
        return table, []
    mask = confirmatory_mask(table, confirmatory)
    cells = []
    for i in np.flatnonzero(mask):
        a, b, d = triples[i]
        key = (id(a), id(b), id(d))
        hit = cache.get(key) if cache is not None else None
        if hit is not None and hit[0] is a and hit[1] is b and hit[2] is d:
            cells.append(hit[3])
            continue
        keep = np.isfinite(a.point) & np.isfinite(b.point) & np.isfinite(d.point)
        cells.append(verdict.Cell.from_replicates(a.point[keep], b.point[keep], d.point[keep], a.boot[:, keep],
                                                  b.boot[:, keep], d.boot[:, keep]))
        if isinstance(cache, dict):
            cache[key] = (a, b, d, cells[-1])
    return table[mask].reset_index(drop=True), cells


def compare_benchmarks(bench: list, down: list, coefs: dict, n_boot: int, n_perm: int, ci: float, seed: int,
                       fdr: float, min_rms: int | None, signals: dict | None,
                       confirmatory: list | None = None) -> pd.DataFrame:
    """The personalized benchmark's headline score against each baseline's, on every downstream
    measure and coefficient (`inference.compare`: bootstrap CI, swap p, Williams p, leave-one-RM-out).
    The confirmatory family (`confirmatory_mask`, `family_cells`) is decided by
    `verdict.decide_family` from the RM-level values and their measurement variance, BH over that
    family only; every other row is exploratory: its swap permutation p under a BH of its own, no
    verdict."""
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
                cell = (a.point[keep], b.point[keep], d.point[keep])
                for name in ["spearman", "pearson"] + [c for c in coefs if c != "spearman"]:
                    base = {"benchmark_a": a.score.key["benchmark"], "level_a": a.score.key["level"],
                            "benchmark_b": b.score.key["benchmark"], "level_b": b.score.key["level"],
                            **d.score.key, "coefficient": name, "n_rms": n,
                            "headline": dkey(d.score.key) in headline}
                    if n < 3:
                        rows.append({**base, "diff": float("nan"), "n_boot": 0})
                        continue
                    out = inference.compare(*cell, a.boot[:, keep],
                                            b.boot[:, keep], d.boot[:, keep], rm_idx, fns[name], name, ci, n_perm,
                                            stable_seed(seed, "correlation-swap", n))
                    out["boot_low"], out["boot_high"] = out.pop("ci_low"), out.pop("ci_high")
                    rows.append({**base, **out})
    table = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    table["k"] = table["k"].astype("Int64")
    table["headline"] = table["headline"].astype(bool)
    for col in ("family", "test", "ci_method", "verdict", "reason"):
        table[col] = table[col].astype(object)
    conf = confirmatory_mask(table, confirmatory) if len(table) else np.zeros(0, dtype=bool)
    table["family"] = np.where(conf, CONFIRMATORY, EXPLORATORY)
    _exploratory(table, ~conf, ci)
    idx = np.flatnonzero(conf)
    if len(idx):
        _, cells = family_cells(bench, down, signals, confirmatory)
        if len(cells) != len(idx):  # both walk (personalized, baseline, downstream) in the same order
            raise AssertionError(f"the declared family has {len(idx)} rows but {len(cells)} cells")
        fam = verdict.decide_family(cells, fdr, min_rms)
        for col, v in (("rho_ab", fam.r_ab), ("p", fam.p), ("q", fam.q), ("se_rm", fam.se_rm),
                       ("se_meas", fam.se_meas), ("ci_low", fam.ci_low), ("ci_high", fam.ci_high),
                       ("ci_level", fam.ci_level), ("verdict", fam.verdict), ("reason", fam.reason)):
            table.loc[idx, col] = v
        table.loc[idx, "family_size"] = len(idx)
        table.loc[idx, "test"] = verdict.TEST
        table.loc[idx, "ci_method"] = "test, family FCR level"
    table["family_size"] = table["family_size"].astype("Int64")
    return table


def _exploratory(table: pd.DataFrame, mask: np.ndarray, ci: float) -> None:
    """Exploratory rows: the swap permutation p (an approximate test), BH over the exploratory rows
    with a finite p, the bootstrap CI shown unadjusted, no verdict."""
    ex = np.flatnonzero(mask)
    p = table.loc[ex, "p_perm"].to_numpy(dtype=float)
    table.loc[ex, "test"] = "swap_permutation"
    table.loc[ex, "p"] = p
    table.loc[ex, "q"] = inference.bh_qvalues(p)
    table.loc[ex, "family_size"] = int(np.isfinite(p).sum())
    table.loc[ex, "ci_low"] = table.loc[ex, "boot_low"]
    table.loc[ex, "ci_high"] = table.loc[ex, "boot_high"]
    table.loc[ex, "ci_level"] = ci
    table.loc[ex, "ci_method"] = "bootstrap, unadjusted"
    table.loc[ex, "verdict"] = EXPLORATORY
    table.loc[ex, "reason"] = "not in the confirmatory family: no verdict"


def power_table(comparisons: pd.DataFrame, n_sims: int, fdr: float, seed: int,
                min_rms: int | None = None) -> pd.DataFrame:
    """Per confirmatory cell, the power of the verdict rule itself (`power.power_rows`), centred on
    the cell's mean Spearman coefficient and its benchmarks' inter-correlation, with its measurement
    variance (`se_meas`^2), at the family's size."""
    conf = comparisons[comparisons["family"] == CONFIRMATORY] if len(comparisons) else comparisons
    if n_sims <= 0 or conf.empty:
        return pd.DataFrame(columns=POWER_COLUMNS)
    cells = [{"center": (r["value_a"] + r["value_b"]) / 2, "rho_ab": r["rho_ab"], "n": r["n_rms"],
              "diff": r["diff"], "var_meas": _var_meas(r)} for _, r in conf.iterrows()]
    out = power.power_rows(cells, n_sims, fdr, seed, min_rms)
    per_cell = len(out) // len(cells)
    keys = ["policy", "downstream", "estimator", "measure", "k", "benchmark_a", "benchmark_b"]
    rows = [{**{k: r[k] for k in keys}, **p} for j, (_, r) in enumerate(conf.iterrows())
            for p in out[j * per_cell:(j + 1) * per_cell]]
    table = pd.DataFrame(rows, columns=POWER_COLUMNS)
    table["k"] = table["k"].astype("Int64")
    return table


def _var_meas(row) -> float:
    """A confirmatory row's measurement variance (se_meas^2; 0 where absent)."""
    se = float(row["se_meas"])
    return se * se if np.isfinite(se) else 0.0


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
