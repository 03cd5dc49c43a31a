"""Markdown summary of the correlation table (`tables/correlation_summary.md`): per downstream
measure and coefficient, the benchmark (headline level) that correlates best, its runner-up, and
whether the lead holds under the question bootstrap. Written by `prbench.analysis.correlation`."""
from __future__ import annotations

import base64
import html as html_mod

import numpy as np
import pandas as pd

from .. import downstream
from ..stats import percentile_interval
from . import inference, verdict
from .power import POWER_N_GRID, POWER_TARGET

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
        "- **The verdict** (personalized vs each baseline, same downstream scores): the cells declared in "
        "`correlation.confirmatory` (default: each method's headline measure, Spearman, against each baseline) "
        f"form one family. Each is decided by {verdict.TEST_LABEL} (an approximation: Williams' t assumes normal "
        "scores, the correction is a large-sample one for ranks): the variance of the difference over the RMs "
        "(`se_rm`) plus its variance over the questions, samples, judge ratings and pairs that every RM shares "
        "(`se_meas`, the question bootstrap with the RMs fixed); Benjamini-Hochberg over that family only at "
        f"q <= {settings['fdr']:g}; a cell with fewer than {verdict.MIN_RMS} RMs is `cannot decide`. The interval "
        "beside a verdict is the test's own at the family's false-coverage level.",
        "- **Exploratory comparisons** (every other measure, estimator, k, coefficient): no verdict; the swap "
        "permutation p (swapping the two benchmarks' ranks within each RM: approximate, swapped rank vectors are "
        f"no longer rankings; exact enumeration when n <= {inference.EXACT_SWAP_MAX_N}) under a BH of their own; "
        "their interval is the joint RM+question bootstrap (RMs resampled with replacement, a repeated RM is a "
        "tie), unadjusted. Williams' p (uncorrected) is shown for Spearman and Pearson.",
        "- **Leave-one-RM-out**: the range of a coefficient (or difference) over the n runs without one RM, "
        "descriptive only; `best without any one RM` says whether the best benchmark stays best without each RM "
        "in turn. **Null tests**: Benjamini-Hochberg q-values over all of them. **Power** (`correlation_power.csv`): "
        f"the verdict rule itself simulated ({settings.get('power_sims')} draws of normal scores per point, common "
        "random numbers) at each confirmatory cell's mean coefficient, inter-correlation and measurement "
        "variance, every cell of the family carrying the same gap (`gap_in` all cells) or the cell alone "
        "(this cell).",
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


def _pv(v) -> str:
    """A p or q value: 3 decimals, or 2 significant digits below 0.001."""
    return "nan" if not np.isfinite(v) else f"{v:.3f}" if v >= 0.001 else f"{v:.1e}"


def _confirmatory(comparisons: pd.DataFrame | None) -> pd.DataFrame:
    if comparisons is None or comparisons.empty:
        return pd.DataFrame(columns=list(comparisons.columns) if comparisons is not None else [])
    return comparisons[comparisons["family"] == "confirmatory"]


def _method(row, many_policies: bool) -> str:
    text = downstream.label(row["downstream"])
    return f"{text} ({row['policy']})" if many_policies else text


def _power_rows(power: pd.DataFrame | None, row, quantity: str, gap=None, gap_in: str = "all cells"
                ) -> pd.DataFrame:
    if power is None or power.empty:
        return pd.DataFrame()
    sel = power[(power["quantity"] == quantity) & (power["gap_in"] == gap_in)
                & (power["downstream"] == row["downstream"])
                & (power["policy"] == row["policy"]) & (power["benchmark_b"] == row["benchmark_b"])]
    if gap is not None:
        sel = sel[np.isclose(sel["gap"].astype(float), gap)]
    return sel


def _needed(sel: pd.DataFrame) -> str:
    """'25', 'more than 500' or 'impossible' (no correlation matrix has that gap), '-' without a row
    or without a gap (an undefined difference)."""
    if sel.empty:
        return "-"
    r = sel.iloc[0]
    if not np.isfinite(float(r["gap"])):
        return "-"
    if not bool(r["possible"]):
        return "impossible"
    return str(int(r["n_rms"])) if np.isfinite(r["n_rms"]) else f"more than {POWER_N_GRID[-1]}"


def verdict_sentence(comparisons: pd.DataFrame | None, power: pd.DataFrame | None, fdr: float) -> str:
    """The answer in one plain sentence, from the saved comparison and power tables only: which
    confirmatory cells were decided and for whom, why the others were not, and how many RMs a
    Spearman gap of 0.5 in every cell would need."""
    conf = _confirmatory(comparisons)
    if conf.empty:
        return ("No verdict: this run has no confirmatory cell (no baseline, no personalized benchmark or no "
                "downstream method), so it cannot say which benchmark predicts downstream quality better.")
    many = conf["policy"].nunique() > 1
    wins, rest = [], []
    for _, r in conf.iterrows():
        m = _method(r, many)
        if r["verdict"] in ("personalized", "baseline"):
            win, lose = ("personalized", r["benchmark_b"]) if r["verdict"] == "personalized" else (
                r["benchmark_b"], "personalized")
            wins.append(f"{win} predicts {m} better than {lose} (Spearman {_fmt(r['value_a'])} vs "
                        f"{_fmt(r['value_b'])}, q = {_pv(r['q'])})")
        else:
            rest.append((m, r))
    parts = []
    if wins:
        parts.append("; ".join(wins)[0].upper() + "; ".join(wins)[1:])
    if rest:
        names = list(dict.fromkeys(m for m, _ in rest))
        whys = []
        cannot = [r for _, r in rest if r["verdict"] == "cannot decide"]
        if cannot:
            ns = "/".join(str(int(n)) for n in sorted({int(r["n_rms"]) for r in cannot}))
            few = [r for r in cannot if int(r["n_rms"]) < verdict.MIN_RMS]
            whys.append(f"at {ns} RMs the rule cannot decide" + (
                f" (it decides from {verdict.MIN_RMS} RMs on)" if few else " (correlation.min_rms)"))
        undecided = [r for _, r in rest if r["verdict"] == "undecided"]
        if undecided:
            qmin = min(float(r["q"]) for r in undecided)
            whys.append(f"no q reaches {fdr:g} (smallest q {qmin:.3f})")
        undefined = [int(r["n_rms"]) for _, r in rest if r["verdict"] == "undefined"]
        few = sorted({n for n in undefined if n < 2})
        if few:
            whys.append(f"at {'/'.join(map(str, few))} RM no rank correlation is defined")
        if any(n >= 2 for n in undefined):
            whys.append("some coefficients are undefined (a side constant across the RMs)")
        parts.append(f"{'no' if wins else 'No'} decision on {_join(names)}: {'; '.join(whys)}")
    need = [_needed(_power_rows(power, r, "rms_needed", 0.5)) for _, r in conf.iterrows()]
    if need and "-" not in need:
        if "impossible" in need:
            tail = "a Spearman gap of 0.5 is impossible at some cells' correlations"
        elif any(x.startswith("more") for x in need):
            tail = f"a Spearman gap of 0.5 in every cell would need more than {POWER_N_GRID[-1]} RMs"
        else:
            tail = (f"a Spearman gap of 0.5 in every cell would need {max(int(x) for x in need)} RMs for "
                    f"{int(round(POWER_TARGET * 100))}% power")
        parts.append(tail)
    return "; ".join(parts) + "."


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


# the answer first (verdict, difference, q): the landing page shows the table in a narrow column
VERDICT_HEAD = ["downstream", "baseline", "verdict", "difference [interval]", "q", "p", "Spearman personalized",
                "Spearman baseline", "n RMs", "RMs needed for this gap"]
# the landing page's table (verdict.html): the report's text column is about 500 px wide at a 1400 px
# window, so p, the interval's level (in the note below it) and the RMs needed stay in the summary's
# table and the CSVs
VERDICT_HTML_HEAD = ["downstream", "baseline", "verdict", "difference [interval]", "q", "Spearman pers. / base.",
                     "RMs"]
MISSING = "\u2014"  # a value that does not exist (no test below MIN_RMS, an undefined coefficient)


def _or_dash(v, fmt) -> str:
    return fmt(v) if np.isfinite(v) else MISSING


def verdict_rows(comparisons: pd.DataFrame | None, power: pd.DataFrame | None) -> list[list[str]]:
    """One row per confirmatory cell (VERDICT_HEAD): the coefficients, their difference with the
    test's own interval at the family's level, p, q, the verdict, and the RMs the rule would need
    for 80% power at the observed gap."""
    conf = _confirmatory(comparisons)
    many = conf["policy"].nunique() > 1 if not conf.empty else False
    out = []
    for _, r in conf.iterrows():
        interval = "" if not np.isfinite(r["ci_low"]) else (
            f" [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] ({100 * float(r['ci_level']):.1f}%)")
        out.append([downstream.measure_label(r["downstream"], r["estimator"], r["measure"],
                                             None if pd.isna(r["k"]) else int(r["k"])) + (
                        f" ({r['policy']})" if many else ""),
                    str(r["benchmark_b"]), str(r["verdict"]), _or_dash(r["diff"], _fmt) + interval,
                    _or_dash(r["q"], _pv), _or_dash(r["p"], _pv), _or_dash(r["value_a"], _fmt),
                    _or_dash(r["value_b"], _fmt), str(int(r["n_rms"])),
                    _needed(_power_rows(power, r, "rms_needed_observed"))])
    return out


def verdict_html_rows(rows: list[list[str]]) -> list[list[str]]:
    """The landing page's columns (VERDICT_HTML_HEAD) of verdict_rows: the interval without its level,
    the two coefficients in one cell."""
    out = []
    for down, base, verdict_, diff, q, _p, va, vb, n, _need in rows:
        out.append([down, base, verdict_, diff.rsplit(" (", 1)[0], q, f"{va} / {vb}", n])
    return out


def verdict_block(comparisons: pd.DataFrame | None, power: pd.DataFrame | None, fdr: float) -> str:
    """The summary's opening: the sentence and the verdict table (markdown)."""
    lines = [verdict_sentence(comparisons, power, fdr)]
    rows = verdict_rows(comparisons, power)
    if rows:
        lines += ["", "| " + " | ".join(VERDICT_HEAD) + " |", "|" + "---|" * len(VERDICT_HEAD)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines += ["", f"Decided by {verdict.TEST_LABEL} (an approximation), Benjamini-Hochberg over the "
                  f"{len(rows)} confirmatory cells at q <= {fdr:g}; the interval is the test's own at the family's "
                  "false-coverage level, so it excludes 0 exactly when a cell is decided."]
    return "\n".join(lines)


def verdict_html(comparisons: pd.DataFrame | None, power: pd.DataFrame | None, fdr: float,
                 forest_png: bytes | None = None) -> str:
    """The report's landing-page fragment: the sentence, the verdict table and the forest plot of
    the confirmatory differences (embedded PNG)."""
    esc = html_mod.escape
    parts = [f'<p class="prbench-verdict-sentence"><strong>Verdict.</strong> '
             f'{esc(verdict_sentence(comparisons, power, fdr))}</p>']
    rows = verdict_rows(comparisons, power)
    if rows:
        # the report's 1em right padding would not fit the column; q (1.5e-05) is not broken at its "-"
        pad = ["padding:0.4em 0.6em 0.4em 0" + (";white-space:nowrap" if h == "q" else "") for h in VERDICT_HTML_HEAD]
        head = "".join(f'<th style="{p}">{esc(h)}</th>' for p, h in zip(pad, VERDICT_HTML_HEAD))
        body = "".join("<tr>" + "".join(f'<td style="{p}">{esc(c)}</td>' for p, c in zip(pad, r)) + "</tr>"
                       for r in verdict_html_rows(rows))
        # a scrolling box in the landing page's text column (beside the rule graph), as the leaderboard's
        parts.append(f'<div style="overflow-x:auto;max-width:100%"><table class="prbench-verdict" '
                     f'style="font-size:0.8em"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>')
        levels = sorted({f"{100 * float(v):.1f}%" for v in _confirmatory(comparisons)["ci_level"] if np.isfinite(v)})
        level = f" ({', '.join(levels)})" if levels else ""
        parts.append(f"<p>Decided by {esc(verdict.TEST_LABEL)} (an approximation), Benjamini-Hochberg over the "
                     f"{len(rows)} confirmatory cells at q &lt;= {fdr:g}; intervals are the test's own at the "
                     f"family's false-coverage level{level}; {MISSING}: no such value (no test, an undefined "
                     "coefficient). p, the RMs the "
                     "rule would need and every other cell (exploratory): <code>correlation_comparisons.csv</code>, "
                     "<code>correlation_power.csv</code>.</p>")
    if forest_png:
        data = base64.b64encode(forest_png).decode("ascii")
        parts.append(f'<img class="prbench-forest" alt="forest plot of the confirmatory differences" '
                     f'style="max-width: 720px; width: 100%" src="data:image/png;base64,{data}">')
    return "\n".join(parts) + "\n"


def _comparison_section(comparisons: pd.DataFrame, ci: float) -> list[str]:
    if comparisons is None or comparisons.empty:
        return []
    pct = int(round(ci * 100))
    lines = ["## Personalized vs each baseline, paired (headline measures)", "",
             "Confirmatory rows carry the verdict (their interval: the test's own at the family's level); "
             f"exploratory rows are descriptive (their interval: the joint RM+question bootstrap, {pct}%, "
             "unadjusted; q: BH over the exploratory rows).", "",
             "| downstream | baseline | coefficient | family | n RMs | personalized | baseline | diff [interval] "
             f"| bootstrap {pct}% (unadjusted) | test | p | q | p swap | p Williams | leave-one-RM-out diff "
             "| verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in comparisons[comparisons["headline"].astype(bool)].iterrows():
        label = downstream.measure_label(r["downstream"], r["estimator"], r["measure"],
                                         None if pd.isna(r["k"]) else int(r["k"]))
        lines.append(f"| {label} | {r['benchmark_b']} | {r['coefficient']} | {r['family']} | {r['n_rms']} "
                     f"| {_fmt(r['value_a'])} | {_fmt(r['value_b'])} | {_fmt(r['diff'])} [{_fmt(r['ci_low'])}, "
                     f"{_fmt(r['ci_high'])}] | [{_fmt(r['boot_low'])}, {_fmt(r['boot_high'])}] | {r['test']} "
                     f"| {_p(r['p'])} | {_p(r['q'])} | {_p(r['p_perm'])} | {_p(r['p_williams'])} "
                     f"| {_fmt(r['loo_min'])} to {_fmt(r['loo_max'])} | {r['verdict']} |")
    lines += ["", "Every measure, estimator, k and coefficient: `correlation_comparisons.csv`.", ""]
    return lines


def _fdr_section(table: pd.DataFrame, comparisons: pd.DataFrame, fdr: float, limit: int = 30) -> list[str]:
    """The findings that survive Benjamini-Hochberg FDR control: paired comparisons and coefficients
    beyond a random RM ranking (at most `limit` of each, smallest q first)."""
    lines = [f"## Findings that survive FDR at {fdr:g}", ""]
    comp = comparisons if comparisons is not None else pd.DataFrame(columns=["q", "family"])
    groups = (("confirmatory paired comparisons (BH over the declared family)",
               comp[comp["family"] == "confirmatory"], "q"),
              ("exploratory paired comparisons (BH over the exploratory rows)", comp[comp["family"] == "exploratory"],
               "q"),
              ("coefficients beyond a random RM ranking", table, "q_null"))
    for what, df, qcol in groups:
        tested = df[np.isfinite(df[qcol].astype(float))]
        surv = tested[tested[qcol] <= fdr].sort_values(qcol, kind="stable")
        lines.append(f"- {what}: {len(surv)} of {len(tested)} survive.")
        for _, r in surv.head(limit).iterrows():
            label = downstream.measure_label(r["downstream"], r["estimator"], r["measure"],
                                             None if pd.isna(r["k"]) else int(r["k"]))
            if qcol == "q":
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
    """Markdown: the verdict sentence and table, how to read the rest, the paired comparisons, the
    nulls, and per downstream measure the benchmark (headline level) that correlates best."""
    undefined = settings.get("undefined") or {}
    comparisons = settings.get("comparisons")
    fdr = settings["fdr"]
    lines = _preamble(ci, settings)
    opening = verdict_block(comparisons, settings.get("power"), fdr)
    lines[1:1] = ["", VERDICT_START, opening, VERDICT_END, "", "## How to read this summary", ""]
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
