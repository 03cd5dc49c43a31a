"""How far each RM agrees with the judge on BoN's answers: the numbers behind the choice of the demo's
PPO claim RM (perf/ppo_tune/README.md, "A fourth round").

    .venv/bin/python perf/rm_judge_agreement.py [RUN] [--policy demo_policy] [--top 12]

Reads a finished run's `results/bon/<policy>/judged.jsonl` and `rm_scores/*.jsonl` (set 0) and prints,
per RM, over the questions: the mean within-question Pearson correlation of the RM's score with the
judge's (questions where either side is constant left out), the mean best-of-4 gain in judge points
over the mean of its block (the 16 samples in 4 blocks of 4, in sample order), and the mean
within-question standard deviation of the RM's scores and of the judge's (their ratio sizes a
`reward_scale` that puts the judge on the RM's spread). Sorted by the correlation.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd


def agreement(judged: pd.DataFrame, scores: pd.DataFrame, block: int = 4) -> dict:
    """One RM's agreement with the judge over the samples both files hold."""
    m = scores.merge(judged, on=["question_id", "sample_idx"], suffixes=("_rm", "_judge"))
    if m.empty:
        raise ValueError("no sample is in both the RM's scores and the judge's ratings")
    corr, gains, sd_rm, sd_judge = [], [], [], []
    for _, g in m.sort_values("sample_idx").groupby("question_id", sort=True):
        rm, judge = g["score_rm"].to_numpy(float), g["score_judge"].to_numpy(float)
        sd_rm.append(rm.std(ddof=1) if len(rm) > 1 else np.nan)
        sd_judge.append(judge.std(ddof=1) if len(judge) > 1 else np.nan)
        if len(rm) > 1 and rm.std() > 0 and judge.std() > 0:
            corr.append(np.corrcoef(rm, judge)[0, 1])
        for b in range(0, len(rm) - block + 1, block):
            r, j = rm[b:b + block], judge[b:b + block]
            gains.append(j[int(np.argmax(r))] - j.mean())
    return {"within_corr": float(np.mean(corr)) if corr else np.nan, "questions": int(m["question_id"].nunique()),
            f"best_of_{block}_gain": float(np.mean(gains)) if gains else np.nan,
            "sd_rm": float(np.nanmean(sd_rm)), "sd_judge": float(np.nanmean(sd_judge))}


def table(run: Path, policy: str = "demo_policy") -> pd.DataFrame:
    bon = run / "results" / "bon" / policy
    judged_path = bon / "judged.jsonl"
    if not judged_path.exists():
        raise SystemExit(f"{judged_path}: no judged BoN samples (run the demo first)")
    judged = pd.read_json(judged_path, lines=True)[["question_id", "sample_idx", "score"]]
    rows = []
    for path in sorted((bon / "rm_scores").glob("*.jsonl")):
        scores = pd.read_json(path, lines=True)[["question_id", "sample_idx", "score"]]
        rows.append({"rm": path.stem, **agreement(judged, scores)})
    if not rows:
        raise SystemExit(f"{bon / 'rm_scores'}: no RM scores")
    return pd.DataFrame(rows).sort_values("within_corr", ascending=False, kind="stable").reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", default=".", help="a finished run's folder (default: here)")
    ap.add_argument("--policy", default="demo_policy")
    ap.add_argument("--top", type=int, default=12, help="rows to print (0: all)")
    a = ap.parse_args(argv)
    t = table(Path(a.run), a.policy)
    print((t.head(a.top) if a.top else t).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
