"""Markdown summary of the correlation table (`tables/correlation_summary.md`): per downstream
measure and coefficient, the benchmark (headline level) that correlates best, its runner-up, and
whether the lead holds under the question bootstrap. Written by `prbench.analysis.correlation`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import downstream
from ..stats import percentile_interval

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
    return [
        "# Which benchmark predicts downstream quality?",
        "",
        "Rank correlation across RMs between each benchmark's headline score (the personalized "
        "benchmark's overall accuracy; a baseline's official score when it has one, else its overall "
        "accuracy) and each downstream measure.",
        "",
        f"- **What the {pct}% CIs cover**: question sampling only. Each of the {settings.get('n_boot')} "
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


def _measure_row(grp: pd.DataFrame, coef: str, boots: dict, ci: float, undefined: dict) -> str:
    """One table row: the best benchmark for one downstream measure, and its runner-up."""
    grp = grp.sort_values("value", ascending=False, na_position="last")
    best = grp.iloc[0]
    label = _measure_label(best)
    dk = (best["policy"], best["downstream"], best["estimator"], best["measure"],
          None if pd.isna(best["k"]) else int(best["k"]))
    if not np.isfinite(best["value"]):
        reasons = sorted({undefined.get((_bench_key(r), dk), "undefined") for _, r in grp.iterrows()})
        return (f"| {label} | {best['n_rms']} | none: undefined ({'; '.join(reasons)}) "
                "| nan | nan | - | - | - | - |")
    cell = f"{_fmt(best['value'])} [{_fmt(best['ci_low'])}, {_fmt(best['ci_high'])}]"
    p = "nan" if pd.isna(best["p_perm"]) else f"{best['p_perm']:.3f}"
    if len(grp) < 2:
        return f"| {label} | {best['n_rms']} | {best['benchmark']} | {cell} | {p} | - | - | - | - |"
    runner_up = _runner_up_cells(best, grp.iloc[1], dk, coef, boots, ci, undefined)
    return f"| {label} | {best['n_rms']} | {best['benchmark']} | {cell} | {p} | {runner_up} |"


def summarize(table: pd.DataFrame, boots: dict, ci: float, notes=(), **settings) -> str:
    """Markdown: per downstream measure, the benchmark (headline level) that correlates best."""
    undefined = settings.get("undefined") or {}
    lines = _preamble(ci, settings)
    head = _headline(table)
    benches = list(dict.fromkeys(head["benchmark"]))
    if len(benches) < 2:
        lines.append(f"Only one benchmark ({', '.join(benches) or 'none'}) is configured; nothing to compare.")
        lines.append("")
    for coef in ("spearman", "kendall_tau_b"):
        lines += [f"## {coef}", "",
                  "| downstream | n RMs | best | value [CI] | p | runner-up | value [CI] | CIs disjoint | diff CI |",
                  "|---|---|---|---|---|---|---|---|---|"]
        sub = head[head["coefficient"] == coef]
        for _, grp in sub.groupby(DOWNSTREAM_KEY, sort=False, dropna=False):
            lines.append(_measure_row(grp, coef, boots, ci, undefined))
        lines.append("")
    if notes:
        lines += ["## Data notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)
