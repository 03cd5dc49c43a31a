"""Reading the correlation stage's inputs into per-unit sums (`collect`): every RM's scored pairs
(`results/scores/{rm}/{bench}.pairs.jsonl`: credit per question, overall and per subset or section,
and each rewardbench/rmbench baseline's official score) and every downstream method's measure table
(`prbench.downstream`). Used by `prbench.analysis.correlation`, which re-exports `collect` and
`Collected`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import downstream
from ..data.baselines import has_official
from ..downstream import SCORED_MEASURE, read_measures
from ..io import iter_jsonl
from ..scoring.official import Official
from .comparison import PERSONALIZED
from .scores import OfficialScore, Score, Units, _add, _materialise

PAIR_FIELDS = ("pair_id", "question_id", "subset", "section", "correct")


@dataclass
class Collected:
    rms: list[str]
    units: dict[str, Units] = field(default_factory=dict)
    benchmarks: list[Score] = field(default_factory=list)
    downstream: list[Score] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    replicates: dict = field(default_factory=dict)  # (method, policy) -> {RM index: [replicate ids]}


def _require(row: dict, fields, path, lineno) -> None:
    missing = [f for f in fields if f not in row]
    if missing:
        raise ValueError(f"{path}: row {lineno} lacks field(s) {missing}")


def collect(
    rms: list[str],
    pair_files: list[tuple[str, str, str]],
    measure_tables: Sequence[tuple[str, str]] = (),
    bench_kinds: dict | None = None,
    runs: Sequence[tuple[str, str]] | Mapping[str, Sequence[tuple[str, str]]] | None = None,
    subset: str | None = None,
) -> Collected:
    """Read every input into per-unit sums.

    pair_files: (rm, benchmark, path of {bench}.pairs.jsonl); measure_tables: (method, path of its
    measure table, `prbench.downstream`), read in the order given; bench_kinds: {baseline: kind},
    a baseline of kind rewardbench/rmbench also gets its official score (level `official`), its
    headline in the summary; runs: the (policy, rm) pairs every measure table must cover, or per method
    {method: pairs} (a method not named, or None = no check); subset: read only the downstream rows
    of that personalized subset's questions (None = every question).
    """
    col = Collected(rms=list(rms))
    rindex = {r: i for i, r in enumerate(rms)}
    bench_store: dict = {}
    down_store: dict = {}
    official_rows: dict[str, dict[int, list]] = {}
    for rm, bench, path in pair_files:
        _read_pairs(col, bench_store, official_rows, rindex, rm, bench, path, bench_kinds or {})
    _units(col, PERSONALIZED)
    for method, path in measure_tables:
        method_runs = runs.get(method) if isinstance(runs, Mapping) else runs
        _read_downstream(col, down_store, rindex, method, path, method_runs, subset)
    col.benchmarks = _materialise(bench_store, rms, col.units)
    col.benchmarks += _official_scores(col, official_rows, bench_kinds or {})
    col.downstream = _materialise(down_store, rms, col.units, col.replicates)
    col.benchmarks.sort(key=lambda s: _bench_order(s.key))
    col.downstream.sort(key=lambda s: _down_order(s.key))
    return col


OFFICIAL_ITEM_FIELDS = ("pair_id", "scores", "num_correct", "ties_type")


def _units(col: Collected, name: str) -> Units:
    if name not in col.units:
        col.units[name] = Units(name)
    return col.units[name]


def _read_pairs(col: Collected, store: dict, official_rows: dict, rindex: dict, rm: str, bench: str, path,
                bench_kinds: dict) -> None:
    """One RM's scored pairs on one benchmark: credit per question, overall and per subset/section."""

    if rm not in rindex:
        raise ValueError(f"{path}: RM {rm!r} is not among the configured reward_models")
    r = rindex[rm]
    units = _units(col, PERSONALIZED if bench == PERSONALIZED else f"baseline:{bench}")
    level2 = "subset" if bench == PERSONALIZED else "section"
    n = failures = ties = 0
    for lineno, row in enumerate(iter_jsonl(path), 1):
        _require(row, PAIR_FIELDS, path, lineno)
        u = units.add(str(row["question_id"]), str(row["subset"]))
        c = float(row["credit"]) if row.get("credit") is not None else (1.0 if row["correct"] is True else 0.0)
        failures += bool(row.get("failure"))
        ties += bool(row.get("tie"))
        n += 1
        if has_official(bench_kinds.get(bench)):
            official_rows.setdefault(bench, {}).setdefault(r, []).append(
                {**{k: row[k] for k in OFFICIAL_ITEM_FIELDS if k in row},  # RewardBench 2's Ties rule reads them
                 "question_id": str(row["question_id"]), "subset": str(row["subset"]), "credit": c})
        grp = row["subset"] if bench == PERSONALIZED else row["section"]
        _add(store, {"benchmark": bench, "level": "overall", "group": "overall"}, units.name, r, u, c)
        _add(store, {"benchmark": bench, "level": level2, "group": str(grp)}, units.name, r, u, c)
    if n == 0:
        raise ValueError(f"{path}: no pairs")
    if failures or ties:
        items = "rule" in row  # best-of-n items (RewardBench 2): a shared top credits 1/k
        how = ("items (RewardBench 2's rules: a top shared by k answers credits 1/k, a Ties tie and a failure "
               "nothing)") if items else "pairs (counted as wrong)"
        col.notes.append(f"{rm} on {bench}: {ties} ties and {failures} scoring failures among {n} {how}")


def _official_scores(col: Collected, official_rows: dict, bench_kinds: dict) -> list[Score]:
    """Each rewardbench/rmbench baseline's official score (`prbench.scoring.official`), level `official`."""

    out = []
    n_rms = len(col.rms)
    for bench, per_rm in official_rows.items():
        units = col.units[f"baseline:{bench}"]
        offs = {r: Official(bench_kinds[bench], rows) for r, rows in per_rm.items()}
        comps = sorted({c for o in offs.values() for c in o.parts})
        coefs = {c: coef for o in offs.values() for c, coef in o.groups["overall"]}
        parts = []
        for c in comps:
            num = np.zeros((n_rms, len(units)))
            den = np.zeros((n_rms, len(units)))
            for r, o in offs.items():
                num[r], den[r] = o.unit_arrays(units.index)[c]
            parts.append((coefs[c], num, den))
        zero = np.zeros((n_rms, len(units)))
        out.append(OfficialScore({"benchmark": bench, "level": "official", "group": "overall"},
                                 units.name, zero, zero, parts=parts))
    return out


def _read_downstream(col: Collected, store: dict, rindex: dict, method: str, path,
                     runs: Sequence[tuple[str, str]] | None, subset: str | None = None) -> None:
    """One method's measure table (only `subset`'s questions when given): every finite value is one
    observation of its run's RM on its question; NaN judge scores are counted (data note) and skipped."""
    df = read_measures(path, method)
    if subset is not None:
        df = df[df["subset"].astype(str) == str(subset)]
    # plain lists: one conversion per column, not one Python object per row and pass
    columns = [df[c].tolist() for c in ("policy", "rm", "estimator", "measure", "question_id", "subset", "value",
                                        "replicate")]
    runs_seen = dict.fromkeys(zip(columns[0], columns[1]))  # (policy, rm) in the table's order
    unknown = sorted({rm for _, rm in runs_seen} - set(rindex))
    if unknown:
        raise ValueError(f"{path}: RM(s) {unknown} are not among the configured reward_models")
    if runs is not None:
        missing = [f"{p}/{r}" for p, r in runs if (p, r) not in runs_seen]
        if missing:
            raise ValueError(f"{path}: no {method} measures for run(s) {missing}")
    pers = _units(col, PERSONALIZED)
    ks = [None if pd.isna(k) else int(k) for k in df["k"].tolist()]
    for policy, rm, est, measure, q, subset, value, rep, k in zip(*columns, ks):
        u = pers.add(q, subset)
        if math.isfinite(value):
            _add(store, _down(policy, method, est, measure, k), PERSONALIZED, rindex[rm], u, value, rep=int(rep))
    # the replicates each run has (NaN-only ones included: a replicate is present when it has rows)
    for (policy, rm), reps in df.groupby(["policy", "rm"], sort=False)["replicate"]:
        col.replicates.setdefault((method, policy), {})[rindex[rm]] = sorted(set(int(x) for x in reps))
    unscored = df[(df["measure"] == SCORED_MEASURE) & df["value"].isna()]
    counts = unscored.groupby(["policy", "rm"], sort=False).size()
    for policy, rm in runs_seen:
        n = int(counts.get((policy, rm), 0))
        if n:
            col.notes.append(f"{downstream.label(method)} {policy}/{rm}: {n} {_unscored(method)} without a judge "
                             "score (skipped)")


def _unscored(method: str) -> str:
    return downstream.REGISTRY[method].unscored if method in downstream.REGISTRY else "answers"


def _down(policy: str, method: str, estimator: str, measure: str, k) -> dict:
    return {"policy": policy, "downstream": method, "estimator": estimator, "measure": measure,
            "k": None if k is None else int(k)}


def _bench_order(key: dict):
    level_rank = {"official": 0, "overall": 1, "subset": 2, "section": 2}
    return (key["benchmark"] != PERSONALIZED, key["benchmark"], level_rank[key["level"]], key["group"])


def _down_order(key: dict):
    k = key["k"] if key["k"] is not None else 10**9
    return (downstream.method_rank(key["downstream"]), key["policy"],
            downstream.estimator_rank(key["downstream"], key["estimator"]), key["measure"], k)
