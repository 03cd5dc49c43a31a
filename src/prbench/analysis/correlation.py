"""Which benchmark predicts downstream quality? Rank correlations across RMs, with a question bootstrap.

Benchmark scores (per RM): accuracy (mean pair credit, as in the scoring stage: strict
chosen > rejected for pointwise RMs, the judge's preference for pairwise ones) on the
personalized benchmark overall and per subset, and on each baseline overall
and per section, read from ``results/scores/{rm}/{bench}.pairs.jsonl``.

Downstream measures (per RM and policy): every (method, estimator, measure, k) of the tidy
per-question measure tables ``results/downstream/{method}.csv`` (`prbench.downstream`: the
contract and the registry of methods; which methods exist comes from the tables and the registry,
nothing here names one). Today: BoN mean judge score and win rate against a random sample at each
k and estimator and the area under each curve; PPO and GRPO mean judge score and win rate against
the base policy (ties count half in both win rates).

Uncertainty. Every per-RM score is a weighted mean of per-unit sums (a unit = one question), so a
bootstrap replicate is one weight vector over units (multinomial counts, stratified by subset)
and all replicates are evaluated with one matrix product. Personalized questions are resampled
jointly: the same resampled question ids drive the personalized accuracies and every downstream
mean, so their dependence is kept. Each baseline's questions are resampled independently (their
replicates are paired with the personalized ones by index only). A downstream measure whose runs
have several replicates (`downstream.Method.shared_replicates`: BoN's sample sets, shared by all RMs,
are resampled once per draw for all RMs; PPO's and GRPO's training seeds per RM) is a
`ReplicatedScore`: each draw also resamples the run's replicates (R of R, with replacement) and the
measure is the mean over the drawn replicates of their question means, so the between-seed spread
enters every CI (`correlation_inputs.csv`: `n_replicates`, `replicate_sd`); with one replicate the
computation is the question bootstrap alone. With `correlation.per_subset` the same coefficients are
also computed per subset of the personalized benchmark (`correlate_by_subset`,
`correlations_by_subset.csv`): exploratory rows beside the pooled headline, never in the verdict.
All coefficients
(`prbench.analysis.rankmetrics`) are recomputed on every replicate; percentile CIs at `ci`; permutation
p-values for Spearman and Kendall shuffle the downstream values across RMs. Every coefficient also
gets its null under a random RM ranking and its leave-one-RM-out range (`prbench.analysis.inference`);
`prbench.analysis.comparison` compares the personalized benchmark with each baseline (paired, RMs and
questions resampled jointly) and writes the verdicts and the power table. The markdown summary
(verdict paragraph first) is written by `prbench.analysis.summary`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .. import downstream
from ..downstream import read_measures
from ..io import write_csv
from ..seeding import stable_seed
from ..stats import percentile_interval
from . import inference, rankmetrics
from .comparison import (  # noqa: F401  (the comparison table's contract, re-exported)
    COMPARED,
    COMPARISON_COLUMNS,
    PERSONALIZED,
    POWER_COLUMNS,
    best_without_one_rm,
    compare_benchmarks,
    dkey,
    headline_benchmarks,
    power_table,
)
from .inputs import PAIR_FIELDS, Collected, collect  # noqa: F401  (re-exported: the stage's reader)
from .scores import (  # noqa: F401  (re-exported: the stage's score types)
    Evaluated,
    OfficialScore,
    ReplicatedScore,
    Score,
    Units,
    _add,
    _materialise,
    evaluate_scores,
    mean_over_replicates,
    replicate_sd,
)
from .summary import summarize, verdict_html

log = logging.getLogger("prbench.analysis.correlation")

TABLE_COLUMNS = [
    "benchmark", "level", "group", "policy", "downstream", "estimator", "measure", "k",
    "coefficient", "value", "ci_low", "ci_high", "p_perm", "n_rms", "n_boot",
    "null_mean", "null_q95", "p_null", "q_null", "value_norm", "loo_min", "loo_max",
]

# correlations_by_subset.csv: the downstream measures over one subset's questions (`subset`), against that
# subset's personalized accuracy and each baseline's headline score; exploratory (no verdict)
SUBSET_COLUMNS = ["subset", *TABLE_COLUMNS]

INPUT_COLUMNS = ["rm", "kind", "benchmark", "level", "group", "policy", "downstream", "estimator", "measure", "k",
                 "value", "ci_low", "ci_high", "n_replicates", "replicate_sd"]

PERMUTED = ("spearman", "kendall_tau_b")


# ---- analysis ----------------------------------------------------------------------------------


@dataclass
class Result:
    table: pd.DataFrame
    inputs: pd.DataFrame
    boots: dict  # (bench key tuple, down key tuple, coefficient) -> (B,) replicate values
    summary: str
    comparisons: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COMPARISON_COLUMNS))
    power: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=POWER_COLUMNS))
    replicates: str = ""  # the summary's n line on replicates (`replicate_line`)


def replicate_counts(col: Collected) -> dict[str, list[int]]:
    """{method: sorted distinct numbers of replicates of its runs}, in table order."""
    out: dict[str, set] = {}
    for (method, _policy), per_rm in col.replicates.items():
        out.setdefault(method, set()).update(len(v) for v in per_rm.values())
    return {m: sorted(out[m]) for m in downstream.ordered(list(out))}


def replicate_line(col: Collected) -> str:
    """'Replicates per run: BoN 2 sample sets (shared by all RMs), PPO 1 training seed.' (empty
    without downstream tables)."""
    parts = []
    for method, counts in replicate_counts(col).items():
        spec = downstream.REGISTRY.get(method)
        noun = spec.replicate_noun if spec else "replicate"
        n = f"{counts[0]}-{counts[-1]}" if len(counts) > 1 else str(counts[0])
        many = counts[-1] > 1
        text = f"{downstream.label(method)} {n} {noun}{'s' if many else ''}"
        if many:
            text += " (shared by all RMs, resampled once per bootstrap draw)" if spec and spec.shared_replicates \
                else " (per RM, resampled per RM in each bootstrap draw)"
        parts.append(text)
    return f"Replicates per run: {', '.join(parts)}." if parts else ""


def _bkey(key: dict) -> tuple:
    return (key["benchmark"], key["level"], key["group"])


_dkey = dkey


def _undefined_reason(x0: np.ndarray, y0: np.ndarray) -> str | None:
    """Why every coefficient of this pair is NaN, or None."""
    n_rms = len(x0)
    if n_rms < 2:
        return f"only {n_rms} RM(s) with both values"
    why = [side for side, v in (("the benchmark score", x0), ("the downstream measure", y0)) if np.all(v == v[0])]
    if why:
        return f"{' and '.join(why)} {'is' if len(why) == 1 else 'are'} equal across the {n_rms} RMs"
    return None


def _coefficient_row(name, fn, x0, y0, xb, yb, n_boot: int, n_perm: int, ci: float, seed: int,
                     null_cache: dict) -> tuple[dict, np.ndarray]:
    """One coefficient of one (benchmark, downstream) pair: value, bootstrap CI, permutation p, null,
    leave-one-RM-out range; and its bootstrap replicates."""
    n_rms = len(x0)
    if n_rms >= 2:
        value = float(fn(x0, y0))
        reps = fn(xb, yb, snapped=True) if n_boot > 0 else np.empty(0)  # xb, yb snapped once by the caller
    else:
        value, reps = float("nan"), np.full(n_boot, np.nan)
    lo, hi, n_ok = percentile_interval(reps, ci)
    null = inference.null_values(x0, y0, fn, n_perm, seed, name, null_cache) if np.isfinite(value) else None
    null_mean, null_q95, p_null = inference.null_summary(value, null, q=0.95)
    # two-sided, from the same null: the benchmark scores shuffled across RMs (exact for n <= 7)
    p = inference.two_sided_p(value, null) if name in PERMUTED and n_rms >= 3 and n_perm > 0 else float("nan")
    loo_min, loo_max = inference.loo_range(inference.leave_one_out(x0, y0, fn))
    norm = inference.normalised(value, null_mean) if name in inference.NORMALISED else float("nan")
    return {"coefficient": name, "value": value, "ci_low": lo, "ci_high": hi, "p_perm": p, "n_rms": n_rms,
            "n_boot": n_ok, "null_mean": null_mean, "null_q95": null_q95, "p_null": p_null, "value_norm": norm,
            "loo_min": loo_min, "loo_max": loo_max}, reps


def _inputs_table(col: Collected, bench: list[Evaluated], down: list[Evaluated], ci: float) -> pd.DataFrame:
    """The per-RM values that were correlated, with their bootstrap CIs (questions, and replicates
    where a method has several)."""
    inputs = []
    for kind, group in (("benchmark", bench), ("downstream", down)):
        for e in group:
            n_rep = e.score.n_rep
            for r, rm in enumerate(col.rms):
                lo, hi, _ = percentile_interval(e.boot[:, r], ci)
                inputs.append({"rm": rm, "kind": kind, **e.score.key, "value": e.point[r],
                               "ci_low": lo, "ci_high": hi,
                               "n_replicates": None if n_rep is None else int(n_rep[r]),
                               "replicate_sd": np.nan if e.replicate_sd is None else e.replicate_sd[r]})
    inputs = pd.DataFrame(inputs, columns=INPUT_COLUMNS)
    inputs["k"] = inputs["k"].astype("Int64")
    inputs["n_replicates"] = inputs["n_replicates"].astype("Int64")
    return inputs


def _coefficients(rbo_p: float, rbo_ties: str) -> dict:
    coefs = dict(rankmetrics.COEFFICIENTS)
    coefs["rbo"] = lambda x, y, snapped=False: rankmetrics.rbo_scores(x, y, p=rbo_p, ties=rbo_ties, snapped=snapped)
    return coefs


def _coefficient_table(bench: list[Evaluated], down: list[Evaluated], coefs: dict, n_boot: int, n_perm: int,
                       ci: float, seed: int) -> tuple[pd.DataFrame, dict, dict]:
    """Every coefficient of every (benchmark score, downstream measure) pair (TABLE_COLUMNS, q_null by
    BH over the table's p_null), their bootstrap replicates and the undefined pairs' reasons."""
    rows, boots, undefined = [], {}, {}
    null_cache: dict = {}
    snapped = {id(e): rankmetrics.snap(e.boot) for e in (*bench, *down)}  # each bootstrap matrix rounded once
    for b in bench:
        for d in down:
            keep = np.isfinite(b.point) & np.isfinite(d.point)
            x0, y0 = b.point[keep], d.point[keep]
            xb, yb = snapped[id(b)][:, keep], snapped[id(d)][:, keep]
            why = _undefined_reason(x0, y0)
            if why:
                undefined[(_bkey(b.score.key), _dkey(d.score.key))] = why
            for name, fn in coefs.items():
                row, reps = _coefficient_row(name, fn, x0, y0, xb, yb, n_boot, n_perm, ci, seed, null_cache)
                boots[(_bkey(b.score.key), _dkey(d.score.key), name)] = reps
                rows.append({**b.score.key, **d.score.key, **row})
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    table["k"] = table["k"].astype("Int64")
    table["q_null"] = inference.bh_qvalues(table["p_null"].to_numpy())
    return table, boots, undefined


def measure_subsets(measure_tables: Sequence[tuple[str, str]]) -> list[str]:
    """The personalized subsets the downstream measure tables' questions come from, sorted."""
    found: set[str] = set()
    for method, path in measure_tables:
        found |= set(read_measures(path, method)["subset"].astype(str))
    return sorted(found)


def correlate_by_subset(
    rms: list[str],
    pair_files,
    measure_tables: Sequence[tuple[str, str]],
    bench_kinds: dict | None = None,
    n_boot: int = 1000,
    n_perm: int = 1000,
    rbo_p: float = 0.9,
    ci: float = 0.95,
    seed: int = 0,
    rbo_ties: str = "w",
) -> pd.DataFrame:
    """`correlation.per_subset`: per subset S of the downstream questions, every coefficient of S's
    personalized accuracy (level subset, group S) and of each baseline's headline score (official,
    else overall) against every downstream measure over S's questions only (SUBSET_COLUMNS). Each
    subset has its own question bootstrap (seeded by the config seed and S) and q_null is BH over
    this table. Exploratory: the pooled table (`correlate`) stays the headline and the verdict's
    cells; fewer questions per RM make these coefficients noisier, and the same RMs in each subset
    make the subsets' rows dependent."""
    coefs = _coefficients(rbo_p, rbo_ties)
    parts = []
    for subset in measure_subsets(measure_tables):
        col = collect(rms, pair_files, measure_tables, bench_kinds, subset=subset)
        bench, down = evaluate_scores(col, n_boot, stable_seed(seed, "correlation-subset", subset))
        keep = [e for e in bench if e.score.key["benchmark"] == PERSONALIZED
                and e.score.key["level"] == "subset" and str(e.score.key["group"]) == subset]
        keep += [e for e in headline_benchmarks(bench) if e.score.key["benchmark"] != PERSONALIZED]
        if not any(e.score.key["benchmark"] == PERSONALIZED for e in keep):  # data.personalized.downstream.subsets
            log.warning("correlation.per_subset: the downstream questions' subset %r has no personalized benchmark "
                        "pairs: its rows correlate the baselines only", subset)
        with rankmetrics.ranks_memo():
            table, _, _ = _coefficient_table(keep, down, coefs, n_boot, n_perm, ci, seed)
        parts.append(table.assign(subset=subset))
    if not parts:
        return pd.DataFrame(columns=SUBSET_COLUMNS)
    out = pd.concat(parts, ignore_index=True)[SUBSET_COLUMNS]
    out["q_null"] = inference.bh_qvalues(out["p_null"].to_numpy())
    return out


def correlate(
    col: Collected,
    n_boot: int = 1000,
    n_perm: int = 1000,
    rbo_p: float = 0.9,
    ci: float = 0.95,
    seed: int = 0,
    rbo_ties: str = "w",
    fdr: float = 0.05,
    min_rms: int | None = None,
    power_sims: int = 1000,
    signals: dict | None = None,
    confirmatory: list | None = None,
) -> Result:
    """Every coefficient for every (benchmark score, downstream measure) pair, with CIs, p-values,
    its null under a random RM ranking and its leave-one-RM-out range; the paired comparisons of
    the personalized benchmark with each baseline, their FDR control and verdicts, and the power
    table (`prbench.analysis.inference`, `prbench.analysis.verdict`). signals: {method: {"estimator", "k"}},
    the headline cell of each method (its judge score at that estimator and k; default: the first in
    table order); confirmatory: the declared family (`correlation.confirmatory`; None = every
    method's headline cell against every baseline, Spearman)."""
    bench, down = evaluate_scores(col, n_boot, seed)
    coefs = _coefficients(rbo_p, rbo_ties)
    with rankmetrics.ranks_memo():  # each bootstrap matrix meets every coefficient and measure: ranked once
        table, boots, undefined = _coefficient_table(bench, down, coefs, n_boot, n_perm, ci, seed)
        comparisons = compare_benchmarks(bench, down, coefs, n_boot=n_boot, n_perm=n_perm, ci=ci, seed=seed,
                                         fdr=fdr, min_rms=min_rms, signals=signals, confirmatory=confirmatory)
        power = power_table(comparisons, power_sims, fdr=fdr, seed=seed, min_rms=min_rms)
        best_loo = best_without_one_rm(col.rms, bench, down, coefs)

    inputs = _inputs_table(col, bench, down, ci)
    replicated = [downstream.label(m) for m, c in replicate_counts(col).items() if c[-1] > 1]
    summary = summarize(table, boots, ci, col.notes, n_boot=n_boot, n_perm=n_perm, rbo_p=rbo_p, rbo_ties=rbo_ties,
                        undefined=undefined, comparisons=comparisons, power=power, fdr=fdr, min_rms=min_rms,
                        power_sims=power_sims, best_loo=best_loo, replicated=replicated)
    return Result(table, inputs, boots, summary, comparisons, power, replicate_line(col))


def _write_tables(res: Result, out_table, out_inputs, out_comparisons, out_power) -> None:
    """The CSVs at 12 significant digits: the precision at which values are ties (rankmetrics.snap),
    so every coefficient can be recomputed from correlation_inputs.csv with its ties."""
    for path, table in ((out_table, res.table), (out_inputs, res.inputs), (out_comparisons, res.comparisons),
                        (out_power, res.power)):
        if path is not None:
            write_csv(path, table, float_format="%.12g")


def _write_verdict(res: Result, fdr: float, out_verdict, out_forest) -> None:
    """The forest plot (png, pdf) and the report's verdict fragment (the PNG embedded), when asked for."""
    if out_forest is not None:
        from .figures import plot_forest  # matplotlib only where the figure is asked for

        plot_forest(res.comparisons, *out_forest)
    if out_verdict is not None:
        forest = Path(out_forest[0]).read_bytes() if out_forest is not None else None
        Path(out_verdict).write_text(verdict_html(res.comparisons, res.power, fdr, forest), encoding="utf-8")


def run_correlations(
    rms: list[str],
    pair_files,
    downstream_tables,
    out_table: str | Path,
    out_summary: str | Path,
    out_inputs: str | Path,
    n_boot: int,
    n_perm: int,
    rbo_p: float,
    ci: float,
    seed: int,
    bench_kinds: dict | None = None,
    runs=None,
    out_comparisons: str | Path | None = None,
    out_power: str | Path | None = None,
    fdr: float = 0.05,
    min_rms: int | None = None,
    power_sims: int = 1000,
    signals: dict | None = None,
    confirmatory: list | None = None,
    out_verdict: str | Path | None = None,
    out_forest: tuple | None = None,
    per_subset: bool = False,
    out_by_subset: str | Path | None = None,
) -> Result:
    """Entry point of rule `correlations`: read, correlate, write the outputs (the comparison and
    power tables, the forest plot (png, pdf) and the report's verdict fragment when their paths are
    given; `out_by_subset`: the per-subset table, `correlate_by_subset`, with per_subset, else its
    header only). downstream_tables: (method, path of its measure table), in registry order."""
    col = collect(rms, pair_files, downstream_tables, bench_kinds, runs)
    log.info("%d RMs, %d benchmark scores, %d downstream measures, units per stratum: %s",
             len(rms), len(col.benchmarks), len(col.downstream),
             {k: len(v) for k, v in col.units.items()})
    for note in col.notes:
        log.warning(note)
    res = correlate(col, n_boot=n_boot, n_perm=n_perm, rbo_p=rbo_p, ci=ci, seed=seed, fdr=fdr, min_rms=min_rms,
                    power_sims=power_sims, signals=signals, confirmatory=confirmatory)
    _write_tables(res, out_table, out_inputs, out_comparisons, out_power)
    Path(out_summary).parent.mkdir(parents=True, exist_ok=True)
    Path(out_summary).write_text(res.summary + "\n", encoding="utf-8")
    _write_verdict(res, fdr, out_verdict, out_forest)
    if out_by_subset is not None:
        by_subset = correlate_by_subset(rms, pair_files, downstream_tables, bench_kinds, n_boot=n_boot,
                                        n_perm=n_perm, rbo_p=rbo_p, ci=ci, seed=seed) if per_subset \
            else pd.DataFrame(columns=SUBSET_COLUMNS)
        write_csv(out_by_subset, by_subset, float_format="%.12g")
        log.info("wrote %d per-subset correlation rows (exploratory)", len(by_subset))
    log.info("wrote %d correlation rows", len(res.table))
    return res
