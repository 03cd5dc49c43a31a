"""The downstream contract: every downstream method writes one tidy per-question measure table and
registers itself here; the analysis stage (correlations, summary, figures, report) reads the
methods from these tables and this registry, never from a hard-coded list.

Measure table (`results/downstream/{method}.csv`, one per method, every policy x RM run):

    policy, rm, method, estimator, measure, k, replicate, question_id, subset, value

one row per (run, estimator, measure, k, replicate, question). `estimator` is "" for a method with
one way of computing its measures (PPO, GRPO); `k` is empty unless the measure is taken at a number
of samples (BoN); `replicate` (int, 0-based) numbers the independent repeats of a run: BoN's sample
sets (`bon.sample_sets`, shared by every RM), PPO's and GRPO's training seeds (`ppo.seeds`,
`grpo.seeds`); a single-replicate run writes 0. The downstream measure of a run is the mean over its
replicates of each replicate's question mean; the analysis' bootstrap resamples the replicates too
(`Method.shared_replicates`: once for all RMs, or per RM). `value` is empty
(NaN) where the question has no value (a judge parse failure): the analysis counts those rows
(measure `judge_score`) as a data note and skips them, so an unparseable output is never a zero.
A question appears at least once per run even when all of its values are NaN (it remains a
resampling unit). Rows keep each run's question order (the
analysis' bootstrap units are numbered in order of first appearance).

Registry: a `Method` per downstream method in `REGISTRY` (`register()`). The built-in methods are
declared below; their config-dependent hooks (`enabled`, `signal`) are "module:attr" strings under
`prbench.downstream` (each method's package: `bon`, `ppo`, `grpo`), imported on first use as
`prbench.rms.KINDS` imports its classes, so reading the registry loads no trainer. A test or a user
may register a method with plain callables. The Snakemake side (`rules/common.smk`: `DOWNSTREAM`)
lists the methods a config enables (`enabled(config)`), in registry order, and the analysis rules
take their inputs from `table_path()`. Adding a downstream method = one stage (a rules file and a
package here) that writes its measure table, plus one `register()` entry.

Package layout: `bon/` (sampling, judging, RM scoring, curves), `ppo/` (training, checkpoints,
launch, memory plan, rollout), `grpo/` (training), and the pieces the trained-policy methods share:
`policy` (loading and generation), `prompt_rows` (train/eval prompt rows), `reward_adapter` (an RM
as the policy's reward), `checkpoints` (resume-folder helpers), `evaluation` (the shared evaluation
against the base policy and its tables).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..config import entry_with_defaults
from ..io import iter_jsonl, write_csv
from ..registry import load_ref
from .reward_rise import reward_change as training_reward_change  # noqa: F401 (the analysis' training figure)
from .reward_rise import reward_rise as training_reward_rise  # noqa: F401 (the analysis' training figure reads it here)

MEASURE_COLUMNS = ["policy", "rm", "method", "estimator", "measure", "k", "replicate", "question_id", "subset",
                   "value"]
TABLE_PATTERN = "results/downstream/{method}.csv"
# The measure whose NaN values the analysis reports as unscored (judge parse failures).
SCORED_MEASURE = "judge_score"


def _no_signal(config: Mapping) -> dict:
    return {"estimator": "", "k": None}


Hook = Callable[[Mapping], object] | str


CLAIM_SEEDS = 3  # claim.seeds when a claim omits it (the schema's default)


def claim_seeds(section: Mapping | None, rm: str) -> int:
    """Training seeds of `rm`'s run in a trained-policy method's config section: `seeds` (1 when
    absent), raised to `claim.seeds` (schema default 3) for the RM of its claim (prbench.downstream.claim)."""
    section = section or {}
    n = int(section.get("seeds") or 1)
    claim = section.get("claim") or {}
    return max(n, int(claim.get("seeds") or CLAIM_SEEDS)) if claim.get("rm") == rm else n


def resolve(hook: Hook) -> Callable:
    """A hook given as "module:attr" (module relative to prbench.downstream) or as a callable."""
    return hook if callable(hook) else load_ref(hook, __name__)


def section_enabled(config: Mapping, key: str, default: bool) -> bool:
    """A method switched by `<key>.enabled` (schema default) and run or not when the section is absent."""
    section = config.get(key)
    if section is None:
        return default
    return bool(entry_with_defaults(section, key)["enabled"])


@dataclass(frozen=True)
class Method:
    """One downstream method.

    name       the `method` column of its table and the `downstream` column of the analysis tables
    label      its name in the summary, figure titles and axis labels ("BoN", "PPO")
    order      position among the methods in every analysis table (lower first)
    enabled    config -> bool: whether a config runs it (the Snakemake-side list); a callable or
               "module:attr" under prbench.downstream
    estimators preferred order of its estimators (others after them, in data order)
    signal     config -> {"estimator", "k"}: the one signal per policy shown in the scatter and
               correlation figures (measure `judge_score`); a callable or "module:attr"
    unscored   noun of the data note for NaN judge scores ("answers", "curve points")
    train_log  path pattern ({policy}, {rm}) of a per-step training log (step, reward, kl[, entropy]),
               plotted as figure `{name}_training`; None = no training figure
    trained_policy  True when the method trains a policy per RM that the shared evaluation
               (rule `eval_policy`: answers on the eval split, cached judge, win rate against
               the base policy) reads from `results/{name}/{policy}/{rm}/model`
    shared_replicates  True when replicate j is the same draw for every RM (BoN's sample sets: every
               RM ranks the same samples), so the analysis' bootstrap resamples the replicate indices
               once for all RMs; False when each RM's replicates are its own runs (training seeds),
               resampled independently per RM
    replicate_noun  what one replicate is, in the summary ("sample set", "training seed")
    """

    name: str
    label: str
    order: int
    enabled: Hook
    estimators: tuple[str, ...] = ()
    signal: Hook = _no_signal
    unscored: str = "answers"
    train_log: str | None = None
    trained_policy: bool = False
    shared_replicates: bool = False
    replicate_noun: str = "replicate"
    extra: dict = field(default_factory=dict)

    @property
    def table(self) -> str:
        return table_path(self.name)

    def runs(self, config: Mapping) -> bool:
        return bool(resolve(self.enabled)(config))

    def figure_signal(self, config: Mapping) -> dict:
        return resolve(self.signal)(config)


REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add (or replace) a method; its name must be a plain identifier (it becomes a path part)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", method.name):
        raise ValueError(f"downstream method name {method.name!r}: use lower-case letters, digits and _")
    REGISTRY[method.name] = method
    return method


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


def table_path(name: str) -> str:
    return TABLE_PATTERN.format(method=name)


def ordered(names: Sequence[str]) -> list[str]:
    """Method names in registry order (unregistered names after them, in the order given)."""
    names = list(dict.fromkeys(names))
    return sorted(names, key=lambda n: (0, REGISTRY[n].order, n) if n in REGISTRY else (1, 0, names.index(n)))


def enabled(config: Mapping) -> list[str]:
    """The methods a config runs, in registry order (the Snakemake-side list)."""
    return ordered([m.name for m in REGISTRY.values() if m.runs(config)])


def label(name: str) -> str:
    return REGISTRY[name].label if name in REGISTRY else name


def method_rank(name: str) -> tuple:
    return (0, REGISTRY[name].order, name) if name in REGISTRY else (1, 0, name)


def estimator_rank(name: str, estimator: str) -> int:
    """Position of an estimator in its method's preferred order (unknown ones last)."""
    ests = REGISTRY[name].estimators if name in REGISTRY else ()
    return ests.index(estimator) if estimator in ests else len(ests) if ests else 3


def measure_label(name: str, estimator: str, measure: str, k) -> str:
    """'BoN expected judge_score k=16', 'PPO win_rate': the summary's name of one measure."""
    parts = [label(name)] + ([str(estimator)] if estimator else []) + [str(measure)]
    k_part = "" if k is None or (isinstance(k, float) and math.isnan(k)) or pd.isna(k) else f" k={int(k)}"
    return " ".join(parts) + k_part


def figure_signals(config: Mapping, names: Sequence[str]) -> dict:
    """{method: {"estimator", "k"}} for the figure rules' params."""
    return {n: REGISTRY[n].figure_signal(config) for n in names if n in REGISTRY}


# ---- the measure table ---------------------------------------------------------------------------


def measure_frame(rows: Sequence[dict] | pd.DataFrame) -> pd.DataFrame:
    """Rows in the contract's column order and types (k nullable int, replicate int, value float).
    Rows without `replicate` are replicate 0 (a method with one replicate need not write it)."""
    if not isinstance(rows, pd.DataFrame):
        rows = pd.DataFrame(list(rows))
        if rows.empty:
            rows = pd.DataFrame(columns=MEASURE_COLUMNS)
    df = rows.copy()
    if "replicate" not in df.columns:
        df["replicate"] = 0
    missing = [c for c in MEASURE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"downstream measure rows lack column(s) {missing}")
    df = df[MEASURE_COLUMNS].copy()
    df["estimator"] = df["estimator"].fillna("").astype(str)
    df["k"] = df["k"].astype("Int64")
    df["replicate"] = df["replicate"].fillna(0).astype(int)
    df["value"] = df["value"].astype(float)
    return df


def write_measures(path: str | Path, rows: Sequence[dict] | pd.DataFrame) -> pd.DataFrame:
    """Write a measure table (floats at full precision: the analysis reads them back exactly)."""
    df = measure_frame(rows)
    if df.empty:
        raise ValueError(f"{path}: no downstream measures to write")
    write_csv(path, df, float_format=None)  # shortest repr: read back bit for bit (read_measures)
    return df


def read_measures(path: str | Path, method: str | None = None) -> pd.DataFrame:
    """Read and check one measure table; errors name the file and the column."""
    df = pd.read_csv(path, dtype={"policy": str, "rm": str, "method": str, "estimator": str, "measure": str,
                                  "question_id": str, "subset": str},
                     keep_default_na=False, na_values={"k": [""], "value": ["", "nan", "NaN"]},
                     float_precision="round_trip")
    missing = [c for c in MEASURE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: downstream measure table lacks column(s) {missing}")
    if df.empty:
        raise ValueError(f"{path}: no rows")
    if method is not None:
        other = sorted(set(df["method"]) - {method})
        if other:
            raise ValueError(f"{path}: column 'method' holds {other}, expected only {method!r}")
    for col in ("policy", "rm", "measure", "question_id"):
        if (df[col] == "").any():
            raise ValueError(f"{path}: column {col!r} is empty in {int((df[col] == '').sum())} row(s)")
    try:
        df["value"] = pd.to_numeric(df["value"], errors="raise").astype(float)
        df["k"] = pd.to_numeric(df["k"], errors="raise").astype("Int64")
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: columns 'value' / 'k' must be numeric ({e})") from None
    rep = pd.to_numeric(df["replicate"], errors="coerce")
    if rep.isna().any() or (rep < 0).any() or (rep != rep.round()).any():
        bad = df["replicate"][rep.isna() | (rep < 0) | (rep != rep.round())].tolist()[:3]
        raise ValueError(f"{path}: column 'replicate' must hold integers >= 0, got {bad}")
    df["replicate"] = rep.astype(int)
    return df


def run_files(paths: str | Path | Sequence[str | Path]) -> list[str | Path]:
    """The eval_judged.jsonl files of one (policy, rm): one path, or one per subset (ppo.per_subset)."""
    return [paths] if isinstance(paths, (str, Path)) else list(paths)


def judged_measures(method: str, runs: Mapping[tuple, str | Sequence[str]]) -> pd.DataFrame:
    """Measures of a trained-policy method from its runs' eval_judged.jsonl (rule eval_policy):
    judge_score (the trained policy's judge score) and win_rate (1 win / 0.5 tie / 0 loss against
    the base policy's answer, or the mean over its answers with `ppo.eval_samples` > 1; NaN when
    either is unscored), one row each per question.
    A (policy, rm) trained per subset (ppo.per_subset) gives one file per subset: each contributes
    its subset's questions, so the rows have the pooled run's shape (a mean over them is the
    question-weighted mean over the subsets). A key (policy, rm, replicate) is one training seed of
    the run (`ppo.seeds`, `grpo.seeds`); a key (policy, rm) is replicate 0."""
    rows = []
    for key, paths in runs.items():
        policy, rm, replicate = (*key, 0) if len(key) == 2 else key
        seen: dict[str, str] = {}
        for path in run_files(paths):
            new = _judged_rows(method, policy, rm, path, int(replicate))
            twice = sorted({r["question_id"] for r in new} & set(seen))
            if twice:
                raise ValueError(f"{path}: question(s) {twice[:3]} of {policy}/{rm} (replicate {replicate}) "
                                 f"also judged in {seen[twice[0]]}")
            seen.update({r["question_id"]: str(path) for r in new})
            rows.extend(new)
    return measure_frame(rows)


def _judged_rows(method: str, policy: str, rm: str, path, replicate: int = 0) -> list[dict]:
    """Two measure rows (judge_score, win_rate) per judged question of one eval_judged.jsonl."""
    rows = []
    for lineno, row in enumerate(iter_jsonl(path), 1):
        missing = [f for f in ("question_id", "subset", "score", "outcome") if f not in row]
        if missing:
            raise ValueError(f"{path}: row {lineno} lacks field(s) {missing}")
        base = {"policy": policy, "rm": rm, "method": method, "estimator": "", "k": None, "replicate": replicate,
                "question_id": str(row["question_id"]), "subset": str(row["subset"])}
        rows.append({**base, "measure": "judge_score", "value": _num(row["score"])})
        rows.append({**base, "measure": "win_rate", "value": _num(row["outcome"])})
    if not rows:
        raise ValueError(f"{path}: no judged answers")
    return rows


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else float("nan")


def write_judged_measures(method: str, runs: Mapping[tuple, str | Sequence[str]], out_csv: str | Path) -> pd.DataFrame:
    return write_measures(out_csv, judged_measures(method, runs))


# ---- the built-in methods ------------------------------------------------------------------------


register(Method("bon", "BoN", 0, enabled="bon:enabled", estimators=("expected", "first_k", "first_k_tieavg"),
                signal="bon:figure_signal", unscored="curve points", shared_replicates=True,
                replicate_noun="sample set"))
register(Method("ppo", "PPO", 1, enabled="ppo:enabled", train_log="results/ppo/{policy}/{rm}/train_log.csv",
                trained_policy=True, replicate_noun="training seed"))
register(Method("grpo", "GRPO", 2, enabled="grpo:enabled", train_log="results/grpo/{policy}/{rm}/train_log.csv",
                trained_policy=True, replicate_noun="training seed"))
