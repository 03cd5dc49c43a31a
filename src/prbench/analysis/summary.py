"""Markdown summary of the correlation table (`tables/correlation_summary.md`): per downstream
measure and coefficient, the benchmark (headline level) that correlates best, its runner-up, and
whether the lead holds under the question bootstrap. Written by `prbench.analysis.correlation`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import downstream
from ..stats import percentile_interval
from . import inference

DOWNSTREAM_KEY = ["policy", "downstream", "estimator", "measure", "k"]


def _fmt(v: float) -> str:
    return "nan" if not np.isfinite(v) else f"{v:+.2f}"


def _measure_label(row) -> str:
    return downstream.measure_label(row["downstream"], row["estimator"], row["measure"], row["k"])


def _headline(table: pd.DataFrame) -> pd.DataFrame:
    """Each benchmark's headline rows: level `official` where present, else `overall`."""
    has_official = set(table.loc[table["level"] == "official", "benchmark"])
    pick = (table["level"] == "official") | ((table["level"] == "overall") & ~table["benchmark"].isin(has_official))
    return table[pick]


def _preamble(ci: float, settings: dict) -> list[str]:
    pct = int(round(ci * 100))
    replicated = settings.get("replicated") or []
    cover = "question sampling only."
    if replicated:
        cover = (f"question sampling and, for {', '.join(replicated)}, the variation between replicates (sample "
                 "sets, training seeds): each draw also resamples a run's replicates with replacement (a method's "
                 "shared sample sets once for all RMs, training seeds per RM) and averages the drawn ones.")
    return [
        "# Which benchmark predicts downstream quality?",
        "",
        "Rank correlation across RMs between each benchmark's headline score (the personalized "
        "benchmark's overall accuracy; a baseline's official score when it has one, else its overall "
        "accuracy) and each downstream measure.",
        "",
        f"- **What the {pct}% CIs cover**: {cover} Each of the {settings.get('n_boot')} "
        "bootstrap replicates resamples the benchmark prompts and downstream questions (within subsets; "
        "personalized questions jointly with the downstream scores, each baseline independently) and "
        "recomputes every coefficient on the same RMs. The set of RMs is fixed: the CIs say nothing about "
        "how the ranking would change with other reward models.",
        f"- **What `p` asks**: the permutation p-value ({settings.get('n_perm')} permutations, exact when "
        "n! is smaller) tests whether the RM ranking by the benchmark agrees with the RM ranking by the "
        "downstream measure beyond chance, shuffling the downstream values across the `n RMs` listed. "
        "It is about these n RMs only and is independent of the CIs: a lead whose diff CI excludes 0 can "
        "come with a large p, and vice versa.",
        "- **CIs disjoint / diff CI**: whether the best benchmark's CI lies above the runner-up's, and the "
        "bootstrap CI of their difference; both are about question sampling only (see above), not "
        "evidence that the benchmark predicts downstream quality for other RMs.",
        "- Values equal to 12 significant digits are ties. When one side is constant across the RMs, "
        "every coefficient is undefined (nan) and no benchmark is named best.",
        f"- RBO: extrapolated, p={settings.get('rbo_p')}, ties='{settings.get('rbo_ties')}'.",
        "- **Null of every coefficient**: what a random RM ranking of the benchmark scores (mean and 95% "
        f"quantile, exact over all n! rankings when n <= {inference.EXACT_MAX_N}, else the permutations above); "
        "`p` = P(null >= value), one-sided. NDCG and RBO are also given normalised, "
        "(value - null mean) / (1 - null mean), since both are high even for a random ranking. "
        "About these n RMs, like `p`.",
        "- **Paired comparison** (personalized vs each baseline, same downstream scores): the difference of "
        "the two coefficients; its CI from a bootstrap that resamples RMs with replacement (a repeated RM is a "
        "tie) jointly with the questions, so it covers which RMs were chosen as well as question sampling; a "
        "permutation test swapping the two benchmarks' ranks within each RM (exact over all 2^n swaps when "
        f"n <= {inference.EXACT_SWAP_MAX_N}); for Spearman and Pearson the Williams t-test for dependent "
        "overlapping correlations.",
        "- **Leave-one-RM-out**: the range of a coefficient (or difference) over the n runs without one RM; "
        "`best without any one RM` says whether the best benchmark stays best without each RM in turn. "
        f"**FDR**: Benjamini-Hochberg q-values over all paired comparisons and over all null tests, at "
        f"{settings['fdr']:g}. **Power**: simulated (trivariate normal, {settings.get('power_sims')} "
        "draws), for the Williams test on Spearman's rho.",
        "",
    ]


def _bench_key(row) -> tuple:
    return (row["benchmark"], row["level"], row["group"])


def _runner_up_cells(best, second, dk: tuple, coef: str, boots: dict, ci: float, undefined: dict) -> str:
    """The runner-up's columns: name, value [CI], CIs disjoint, diff CI."""
    name2 = second["benchmark"]
    if not np.isfinite(second["value"]):
        why = undefined.get((_bench_key(second), dk), "undefined")
        name2 = f"{second['benchmark']} (undefined: {why})"
    elif second["value"] == best["value"]:
        name2 = f"{second['benchmark']} (tied)"
    cell2 = f"{_fmt(second['value'])} [{_fmt(second['ci_low'])}, {_fmt(second['ci_high'])}]"
    separated = bool(best["ci_low"] > second["ci_high"]) if np.isfinite(best["ci_low"]) and np.isfinite(
        second["ci_high"]) else False
    b1 = boots.get((_bench_key(best), dk, coef))
    b2 = boots.get((_bench_key(second), dk, coef))
    diff = "-"
    if b1 is not None and b2 is not None and len(b1):
        lo, hi, _ = percentile_interval(b1 - b2, ci)
        diff = f"[{_fmt(lo)}, {_fmt(hi)}]" + (" excl. 0" if lo > 0 or hi < 0 else "")
    return f"{name2} | {cell2} | {'yes' if separated else 'no'} | {diff}"


def _loo_cell(best_name: str, without: dict | None) -> str:
    """Whether the best benchmark stays best when any one RM is left out."""
    if not without:
        return "-"
    changed = {rm: b for rm, b in without.items() if b != best_name}
    if not changed:
        return "holds"
    return "does not hold: " + ", ".join(f"{b} without {rm}" for rm, b in changed.items())


def _measure_row(grp: pd.DataFrame, coef: str, boots: dict, ci: float, undefined: dict,
                 best_loo: dict | None = None) -> str:
    """One table row: the best benchmark for one downstream measure, and its runner-up."""
    grp = grp.sort_values("value", ascending=False, na_position="last")
    best = grp.iloc[0]
    label = _measure_label(best)
    dk = (best["policy"], best["downstream"], best["estimator"], best["measure"],
          None if pd.isna(best["k"]) else int(best["k"]))
    if not np.isfinite(best["value"]):
        reasons = sorted({undefined.get((_bench_key(r), dk), "undefined") for _, r in grp.iterrows()})
        return (f"| {label} | {best['n_rms']} | none: undefined ({'; '.join(reasons)}) "
                "| nan | nan | - | - | - | - | - |")
    cell = f"{_fmt(best['value'])} [{_fmt(best['ci_low'])}, {_fmt(best['ci_high'])}]"
    p = "nan" if pd.isna(best["p_perm"]) else f"{best['p_perm']:.3f}"
    if len(grp) < 2:
        return f"| {label} | {best['n_rms']} | {best['benchmark']} | {cell} | {p} | - | - | - | - | - |"
    runner_up = _runner_up_cells(best, grp.iloc[1], dk, coef, boots, ci, undefined)
    best_name = best["benchmark"] if grp.iloc[1]["value"] != best["value"] else "="
    loo = _loo_cell(best_name, (best_loo or {}).get((dk, coef)))
    return f"| {label} | {best['n_rms']} | {best['benchmark']} | {cell} | {p} | {runner_up} | {loo} |"


VERDICT_START = "<!-- verdict -->"
VERDICT_END = "<!-- /verdict -->"


def _p(v) -> str:
    return "nan" if not np.isfinite(v) else f"{v:.3f}"


def _verdict_words(row) -> str:
    if row["verdict"] == "personalized":
        return f"personalized predicts better than {row['benchmark_b']}"
    if row["verdict"] == "baseline":
        return f"{row['benchmark_b']} predicts better than personalized"
    return f"undecided ({row['reason']})"


def verdict_paragraph(table: pd.DataFrame, comparisons: pd.DataFrame, power: pd.DataFrame, ci: float,
                      fdr: float) -> str:
    """One paragraph answering the paper's question for this run, from the saved tables only:
    every number is a value of correlations.csv, correlation_comparisons.csv or
    correlation_power.csv (rounded), or a count of their rows. Plain text that is also valid
    reStructuredText (the HTML report includes it)."""
    pct = int(round(ci * 100))
    if comparisons is None or comparisons.empty:
        return ("**Verdict.** No baseline benchmark to compare the personalized benchmark with "
                "(or no personalized benchmark): this run cannot answer which benchmark predicts downstream "
                "quality better.")
    head = comparisons[comparisons["headline"].astype(bool) & (comparisons["coefficient"] == "spearman")]
    baselines = list(dict.fromkeys(comparisons["benchmark_b"]))
    n_rms = sorted(set(int(n) for n in comparisons["n_rms"]))
    parts = [f"**Verdict.** Does the personalized benchmark predict downstream quality better than "
             f"{', '.join(baselines)} across this run's {'/'.join(map(str, n_rms))} RMs?"]
    for _, r in head.iterrows():
        label = downstream.measure_label(r["downstream"], r["estimator"], r["measure"],
                                         None if pd.isna(r["k"]) else int(r["k"]))
        parts.append(
            f"{label} ({r['policy']}): Spearman {_fmt(r['value_a'])} for personalized vs {_fmt(r['value_b'])} for "
            f"{r['benchmark_b']}, difference {_fmt(r['diff'])}, {pct}% CI [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] "
            f"(bootstrap over RMs and questions), swap-permutation p = {_p(r['p_perm'])}, BH q = {_p(r['q_perm'])}, "
            f"Williams p = {_p(r['p_williams'])}, leave-one-RM-out difference {_fmt(r['loo_min'])} to "
            f"{_fmt(r['loo_max'])}: {_verdict_words(r)}.")
    tested = comparisons[np.isfinite(comparisons["q_perm"].astype(float))]
    surv = tested[tested["q_perm"] <= fdr]
    nulls = table[np.isfinite(table["q_null"].astype(float))]
    parts.append(
        f"Across all {len(tested)} paired comparisons (every method, estimator, k, coefficient and baseline), "
        f"{len(surv)} survive Benjamini-Hochberg FDR at {fdr:g} ({int((surv['diff'] > 0).sum())} favour personalized, "
        f"{int((surv['diff'] < 0).sum())} a baseline); {int((nulls['q_null'] <= fdr).sum())} of the {len(nulls)} "
        "coefficients tested against a random RM ranking survive.")
    if power is not None and not power.empty:
        for b, grp in power.groupby("benchmark_b", sort=False):
            g = grp[grp["quantity"] == "min_gap"].iloc[0]
            need = grp[grp["quantity"] == "rms_needed"]
            first = (f"the smallest Spearman gap to {b} detectable with {int(round(g['target_power'] * 100))}% power "
                     f"at {int(g['n_rms'])} RMs is {g['gap']:.2f}" if np.isfinite(g["gap"])
                     else f"no Spearman gap to {b} up to 1.00 is detectable with "
                          f"{int(round(g['target_power'] * 100))}% power at {int(g['n_rms'])} RMs")
            needs = ", ".join(f"{r['gap']:.1f} needs {int(r['n_rms'])} RMs" if np.isfinite(r["n_rms"])
                              else f"{r['gap']:.1f} needs more than 500 RMs" for _, r in need.iterrows())
            parts.append(f"What would change the verdict: {first} (Williams test at alpha {g['alpha']:.2f}, "
                         f"{int(g['n_sims'])} simulations); a gap of {needs}.")
    parts.append(f"A side wins only when its lead survives FDR (q <= {fdr:g}), its CI excludes 0 and no single "
                 "left-out RM flips it.")
    return " ".join(parts)


def _comparison_section(comparisons: pd.DataFrame, ci: float) -> list[str]:
    if comparisons is None or comparisons.empty:
        return []
    pct = int(round(ci * 100))
    lines = ["## Personalized vs each baseline, paired (headline measures)", "",
             f"| downstream | baseline | coefficient | n RMs | personalized | baseline | diff [{pct}% CI] | p perm "
             "| p Williams | q (BH) | leave-one-RM-out diff | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in comparisons[comparisons["headline"].astype(bool)].iterrows():
        label = downstream.measure_label(r["downstream"], r["estimator"], r["measure"],
                                         None if pd.isna(r["k"]) else int(r["k"]))
        lines.append(f"| {label} | {r['benchmark_b']} | {r['coefficient']} | {r['n_rms']} | {_fmt(r['value_a'])} "
                     f"| {_fmt(r['value_b'])} | {_fmt(r['diff'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] "
                     f"| {_p(r['p_perm'])} | {_p(r['p_williams'])} | {_p(r['q_perm'])} "
                     f"| {_fmt(r['loo_min'])} to {_fmt(r['loo_max'])} | {r['verdict']} |")
    lines += ["", "Every measure, estimator, k and coefficient: `correlation_comparisons.csv`.", ""]
    return lines


def _fdr_section(table: pd.DataFrame, comparisons: pd.DataFrame, fdr: float, limit: int = 30) -> list[str]:
    """The findings that survive Benjamini-Hochberg FDR control: paired comparisons and coefficients
    beyond a random RM ranking (at most `limit` of each, smallest q first)."""
    lines = [f"## Findings that survive FDR at {fdr:g}", ""]
    comp = comparisons if comparisons is not None else pd.DataFrame(columns=["q_perm"])
    groups = (("paired comparisons", comp, "q_perm"), ("coefficients beyond a random RM ranking", table, "q_null"))
    for what, df, qcol in groups:
        tested = df[np.isfinite(df[qcol].astype(float))]
        surv = tested[tested[qcol] <= fdr].sort_values(qcol, kind="stable")
        lines.append(f"- {what}: {len(surv)} of {len(tested)} survive.")
        for _, r in surv.head(limit).iterrows():
            label = downstream.measure_label(r["downstream"], r["estimator"], r["measure"],
                                             None if pd.isna(r["k"]) else int(r["k"]))
            if qcol == "q_perm":
                lines.append(f"  - {label}, {r['coefficient']}: personalized {_fmt(r['value_a'])} vs "
                             f"{r['benchmark_b']} {_fmt(r['value_b'])} (diff {_fmt(r['diff'])}, q {_p(r[qcol])}, "
                             f"verdict {r['verdict']})")
            else:
                lines.append(f"  - {label}, {r['benchmark']} {r['level']} {r['group']}, {r['coefficient']}: "
                             f"{_fmt(r['value'])} (null mean {_fmt(r['null_mean'])}, q {_p(r[qcol])})")
        if len(surv) > limit:
            lines.append(f"  - and {len(surv) - limit} more (the tables have them all)")
    return lines + [""]


def _null_section(table: pd.DataFrame, comparisons: pd.DataFrame) -> list[str]:
    if comparisons is None or comparisons.empty:
        return []
    cells = comparisons.loc[comparisons["headline"].astype(bool), DOWNSTREAM_KEY].drop_duplicates()
    head = _headline(table).merge(cells, on=DOWNSTREAM_KEY)
    if head.empty:
        return []
    lines = ["## Each coefficient against a random RM ranking (headline measures)", "",
             "| downstream | benchmark | coefficient | value | null mean | null 95% | normalised | p | q (BH) "
             "| leave-one-RM-out |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in head.iterrows():
        lines.append(f"| {_measure_label(r)} | {r['benchmark']} | {r['coefficient']} | {_fmt(r['value'])} "
                     f"| {_fmt(r['null_mean'])} | {_fmt(r['null_q95'])} | {_fmt(r['value_norm'])} | {_p(r['p_null'])} "
                     f"| {_p(r['q_null'])} | {_fmt(r['loo_min'])} to {_fmt(r['loo_max'])} |")
    lines.append("")
    return lines


def summarize(table: pd.DataFrame, boots: dict, ci: float, notes=(), **settings) -> str:
    """Markdown: the verdict paragraph, the paired comparisons, the nulls, and per downstream
    measure the benchmark (headline level) that correlates best."""
    undefined = settings.get("undefined") or {}
    comparisons = settings.get("comparisons")
    fdr = settings["fdr"]
    lines = _preamble(ci, settings)
    verdict = verdict_paragraph(table, comparisons, settings.get("power"), ci, fdr)
    lines[1:1] = ["", VERDICT_START, verdict, VERDICT_END]
    lines += _comparison_section(comparisons, ci) + _fdr_section(table, comparisons, fdr)
    lines += _null_section(table, comparisons)
    head = _headline(table)
    benches = list(dict.fromkeys(head["benchmark"]))
    if len(benches) < 2:
        lines.append(f"Only one benchmark ({', '.join(benches) or 'none'}) is configured; nothing to compare.")
        lines.append("")
    for coef in ("spearman", "kendall_tau_b"):
        lines += [f"## {coef}", "",
                  "| downstream | n RMs | best | value [CI] | p | runner-up | value [CI] | CIs disjoint | diff CI "
                  "| best without any one RM |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        sub = head[head["coefficient"] == coef]
        for _, grp in sub.groupby(DOWNSTREAM_KEY, sort=False, dropna=False):
            lines.append(_measure_row(grp, coef, boots, ci, undefined, settings.get("best_loo")))
        lines.append("")
    if notes:
        lines += ["## Data notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)
