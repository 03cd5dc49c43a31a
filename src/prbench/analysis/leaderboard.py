"""The leaderboard (`results/tables/leaderboard.{csv,md,html}`; the HTML table is the report's):
every RM ranked by personalized accuracy, with its CI, per-subset accuracies, the baselines' official
scores (`prbench.scoring.leaderboard`)
and, where this run has them, its downstream scores: per policy and downstream method the signal
the scatter figure shows (mean judge score; BoN at the figure's estimator and k), with the
bootstrap CI of the correlation inputs (`correlation_inputs.csv`: over questions, and over
replicates where a method has several seeds or sample sets). A method whose rows are
missing for an RM leaves that RM's cell empty ("-")."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from ..io import write_csv
from ..scoring.leaderboard import benchmark_board, html, markdown
from .figures import _downstream_rows, _read_csv, _signals

INPUT_COLUMNS = ["rm", "kind", "policy", "downstream", "estimator", "measure", "k", "value", "ci_low", "ci_high"]


def downstream_columns(inputs: pd.DataFrame, signals: Mapping | None, measure: str = "judge_score") -> pd.DataFrame:
    """One row per RM (index `rm`), per (policy, method) signal a value column named like the
    figures' axis ("BoN (expected, k=16)"; the policy appended when the run has several) with
    `_ci_low`/`_ci_high`."""
    down = inputs[inputs["kind"] == "downstream"].copy()
    if down.empty:
        return pd.DataFrame(index=pd.Index([], name="rm"))
    down["estimator"] = down["estimator"].fillna("")
    sigs = _signals(down, dict(signals or {}))
    several = len(dict.fromkeys(down["policy"])) > 1
    out = pd.DataFrame(index=pd.Index(list(dict.fromkeys(inputs["rm"])), name="rm"))
    for label, policy, method, est, k in sigs:
        name = label if several else label[: -len(f" {policy}")]
        sel = _downstream_rows(policy, method, est, measure, k)(down)
        if sel["rm"].duplicated().any():
            raise ValueError(f"correlation inputs: several {name} rows for one RM")
        sel = sel.set_index("rm")
        out[name] = sel["value"]
        out[f"{name}_ci_low"] = sel["ci_low"]
        out[f"{name}_ci_high"] = sel["ci_high"]
    return out


def leaderboard(accuracy_csv, inputs_csv, csv_out, md_out, html_out, summary_out, rms=None,
                signals: Mapping | None = None,
                measure: str = "judge_score") -> pd.DataFrame:
    """Write the leaderboard as CSV (numbers), Markdown, an HTML table (the report's Leaderboard
    entry) and a compact HTML table without CIs (`summary_out`: the report's landing page);
    returns the CSV's frame."""
    acc = pd.read_csv(accuracy_csv)
    inputs = _read_csv(inputs_csv, INPUT_COLUMNS, "the correlation inputs table")
    board = benchmark_board(acc, rms)
    board = board.join(downstream_columns(inputs, signals, measure), on="rm")
    write_csv(csv_out, board)
    note = ("RMs ranked by personalized accuracy (overall pair accuracy, 95% bootstrap CI). Baselines: their "
            "official score where the benchmark has one, else overall accuracy. Downstream: mean "
            f"{measure.replace('_', ' ')} per method (BoN at the figures' estimator and k), "
            "bootstrap CI over questions (and over seeds or sample sets where a method has several). "
            "ties and failures: pairs of that benchmark (failures count as wrong).")
    outs = ((md_out, f"# Leaderboard\n\n{note}\n\n{markdown(board)}"), (html_out, html(board, note)),
            (summary_out, html(board, compact=True)))
    for path, text in outs:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    return board
