"""One row per RM from the tidy accuracy table (`benchmark_accuracy.csv`): the leaderboard's
benchmark columns, shared by the leaderboard rule (which adds the downstream columns,
`prbench.analysis.leaderboard`) and the one-RM command (`prbench.scoring.one_rm`).

Columns (CSV): `rank` (by personalized overall accuracy, highest first; equal accuracies to 12
significant digits share the lower rank), `rm`, `personalized` with `personalized_ci_low/high`,
`personalized_n`, `ties` and `failures` (personalized overall pairs), one `personalized:{subset}`
accuracy per subset with its CI, and per baseline `{baseline}` (its official score where the
benchmark has one, else its overall accuracy), `{baseline}_ci_low/high`, `{baseline}_score`
("official" or "accuracy"), `{baseline}_ties`, `{baseline}_failures`. Extra columns (the
downstream scores) go after these; `markdown()` formats any such frame.
"""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

PERSONALIZED = "personalized"


def _stat(row: pd.Series | None, prefix: str) -> dict:
    if row is None:
        return {prefix: math.nan, f"{prefix}_ci_low": math.nan, f"{prefix}_ci_high": math.nan}
    return {prefix: row["accuracy"], f"{prefix}_ci_low": row["ci_low"], f"{prefix}_ci_high": row["ci_high"]}


def _count(row: pd.Series | None, key: str):
    if row is None or pd.isna(row[key]):
        return pd.NA
    return int(row[key])


def benchmark_board(acc: pd.DataFrame, rms: Sequence[str] | None = None) -> pd.DataFrame:
    """The leaderboard's benchmark columns, one row per RM, ranked (see the module docstring).
    `acc` has the columns of `benchmark_accuracy.csv`; `rms` (default: every RM in `acc`, in order
    of appearance) fixes which RMs appear: an RM without a personalized overall row is an error."""
    need = {"rm", "benchmark", "level", "group", "n", "ties", "failures", "accuracy", "ci_low", "ci_high"}
    missing = need - set(acc.columns)
    if missing:
        raise ValueError(f"accuracy table lacks column(s) {sorted(missing)}")
    acc = acc.copy()
    acc["group"] = acc["group"].astype(str)
    rms = list(dict.fromkeys(acc["rm"])) if rms is None else list(rms)
    baselines = [b for b in dict.fromkeys(acc["benchmark"]) if b != PERSONALIZED]
    subsets = list(dict.fromkeys(acc[(acc["benchmark"] == PERSONALIZED) & (acc["level"] == "subset")]["group"]))

    def one(rm, bench, level, group="all"):
        sel = acc[(acc["rm"] == rm) & (acc["benchmark"] == bench) & (acc["level"] == level) & (acc["group"] == group)]
        if len(sel) > 1:
            raise ValueError(f"accuracy table: {len(sel)} rows for rm={rm!r} benchmark={bench!r} "
                             f"level={level!r} group={group!r}")
        return sel.iloc[0] if len(sel) else None

    rows = []
    for rm in rms:
        pers = one(rm, PERSONALIZED, "overall")
        if pers is None:
            raise ValueError(f"accuracy table: no personalized overall row for RM {rm!r}")
        row = {"rm": rm, **_stat(pers, PERSONALIZED), "personalized_n": _count(pers, "n"),
               "ties": _count(pers, "ties"), "failures": _count(pers, "failures")}
        for s in subsets:
            row.update(_stat(one(rm, PERSONALIZED, "subset", s), f"{PERSONALIZED}:{s}"))
        for b in baselines:
            official = one(rm, b, "official")
            overall = one(rm, b, "overall")
            row.update(_stat(official if official is not None else overall, b))
            row[f"{b}_score"] = "official" if official is not None else "accuracy"
            row[f"{b}_ties"] = _count(overall, "ties")
            row[f"{b}_failures"] = _count(overall, "failures")
        rows.append(row)
    df = pd.DataFrame(rows)
    key = df[PERSONALIZED].map(lambda v: float(f"{v:.12g}"))
    df = df.assign(_key=key).sort_values(["_key", "rm"], ascending=[False, True], kind="stable")
    df.insert(0, "rank", df["_key"].rank(method="min", ascending=False).astype(int))
    return df.drop(columns="_key").reset_index(drop=True)


def _fmt(v, lo, hi, ci: bool = True) -> str:
    if pd.isna(v):
        return "-"
    if not ci or pd.isna(lo) or pd.isna(hi):
        return f"{v:.3f}"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def cells(board: pd.DataFrame, mark: str | None = None, subsets: bool = True,
          baseline_counts: bool = True, ci: bool = True) -> tuple[list[str], list[list[str]]]:
    """Header and formatted rows of a board: every value column with a CI as "value [low, high]",
    counts as integers. `mark` names an RM whose row gets a trailing " *" (the one-RM command's new
    RM); `subsets=False` leaves the per-subset columns out, `baseline_counts=False` the baselines'
    ties and failures, `ci=False` the CIs."""
    values = [c for c in board.columns if f"{c}_ci_low" in board.columns]
    if not subsets:
        values = [c for c in values if not c.startswith(f"{PERSONALIZED}:")]
    counts = [c for c in board.columns
              if c in ("ties", "failures") or (baseline_counts and c.endswith(("_ties", "_failures")))]
    head = ["rank", "RM", *[_header(board, c) for c in values], *counts]
    rows = []
    for _, r in board.iterrows():
        name = f"{r['rm']} *" if mark is not None and r["rm"] == mark else str(r["rm"])
        rows.append([str(r["rank"]), name, *[_fmt(r[c], r[f"{c}_ci_low"], r[f"{c}_ci_high"], ci) for c in values],
                     *["-" if pd.isna(r[c]) else str(int(r[c])) for c in counts]])
    return head, rows


def markdown(board: pd.DataFrame, mark: str | None = None, subsets: bool = True) -> str:
    """The board as a Markdown table (`cells`)."""
    head, rows = cells(board, mark, subsets)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def html(board: pd.DataFrame, caption: str = "", compact: bool = False) -> str:
    """The board as one HTML <table> (`cells`, escaped) in a horizontally scrolling <div>, with an
    optional <caption>. `compact` (the report's landing page, a 32-em column beside the rule graph)
    leaves out the CIs, the per-subset accuracies and the baselines' counts."""
    from html import escape

    head, rows = cells(board, subsets=not compact, baseline_counts=not compact, ci=not compact)
    out = ['<div style="overflow-x:auto;max-width:100%"><table class="prbench-leaderboard" style="font-size:0.8em">']
    if caption:
        out.append(f"<caption>{escape(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr></thead><tbody>")
    out += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows]
    out.append("</tbody></table></div>")
    return "\n".join(out) + "\n"


def _header(board: pd.DataFrame, col: str) -> str:
    kind = f"{col}_score"
    if kind in board.columns and (board[kind] == "official").all():
        return f"{col} (official)"
    return col
