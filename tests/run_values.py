"""Headline numbers of a finished run recomputed from its own per-pair and measure files by a path
independent of the analysis code (issue 35): pandas means, scipy's Spearman and RewardBench's
official formula written out here from its published subset sizes. Used by tests/test_e2e.py on the
demo-config run and by tests/test_wiring_values.py on a synthetic world in the same file layout:

    results/scores/{rm}/{bench}.pairs.jsonl     per-pair `credit` (pairwise ties 0.5)
    results/downstream/bon.csv                  BoN measure table (one row per question, k, estimator, measure)
    results/tables/correlations.csv             what is checked: the coefficients,
    results/tables/correlation_inputs.csv       the per-RM values correlated,
    results/tables/benchmark_accuracy.csv       the official scores (level `official`, group `all`)
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

# RewardBench's sections and the prompt counts of its `filtered` split (Lambert et al. 2024, the
# leaderboard's scoring): a section is the prompt-weighted mean of its subsets' accuracies, math-prm
# weighted as the six hep-* subsets together (6 x 164); overall is the plain mean of the sections.
RB_SECTIONS = {
    "chat": {"alpacaeval-easy": 100, "alpacaeval-length": 95, "alpacaeval-hard": 95, "mt-bench-easy": 28,
             "mt-bench-med": 40},
    "chat_hard": {"mt-bench-hard": 37, "llmbar-natural": 100, "llmbar-adver-neighbor": 134,
                  "llmbar-adver-GPTInst": 92, "llmbar-adver-GPTOut": 47, "llmbar-adver-manual": 46},
    "safety": {"refusals-dangerous": 100, "refusals-offensive": 100, "xstest-should-refuse": 154,
               "xstest-should-respond": 250, "donotanswer": 136},
    "reasoning": {"math-prm": 6 * 164, "hep-cpp": 164, "hep-go": 164, "hep-java": 164, "hep-js": 164,
                  "hep-python": 164, "hep-rust": 164},
}


def pairs(root: Path, rm: str, bench: str) -> pd.DataFrame:
    path = Path(root) / "results" / "scores" / rm / f"{bench}.pairs.jsonl"
    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines() if line.strip()])


def mean_credit(root: Path, rm: str, bench: str) -> float:
    """Pooled accuracy: the mean of the pairs' credit (1 right, 0.5 a pairwise tie, 0 wrong)."""
    return float(pairs(root, rm, bench)["credit"].astype(float).mean())


def rewardbench_official(df: pd.DataFrame) -> float:
    """RewardBench's official score of one RM's pairs by hand (subsets outside its map left out)."""
    acc = df.groupby("subset")["credit"].mean()
    sections = []
    for subsets in RB_SECTIONS.values():
        present = [s for s in subsets if s in acc.index]
        if present:
            sections.append(sum(subsets[s] * acc[s] for s in present) / sum(subsets[s] for s in present))
    return float(np.mean(sections))


def _tied(v) -> np.ndarray:
    """Values equal to 12 significant digits are ties (the tables' precision), so summation-order noise
    in a mean cannot break a tie the stage sees (e.g. BoN at k=1, where every RM has the same value)."""
    return np.array([float(f"{x:.12g}") for x in v])


def bon_means(root: Path, rms: list[str], estimator: str, measure: str, k: int) -> np.ndarray:
    """Each RM's mean over questions of one BoN measure (all its sample sets pooled, as in the table)."""
    df = pd.read_csv(Path(root) / "results" / "downstream" / "bon.csv", dtype={"rm": str, "estimator": str})
    sel = df[(df["estimator"].fillna("") == estimator) & (df["measure"] == measure) & (df["k"] == k)]
    sel = sel[np.isfinite(sel["value"])]
    means = sel.groupby("rm")["value"].mean()
    return np.array([means[rm] for rm in rms])


def check_bon_spearman(root: Path, rms: list[str]) -> int:
    """Every correlations.csv Spearman of personalized overall accuracy vs a BoN judge score at some k
    against scipy on (mean credit per RM, mean judge score per RM); returns how many rows were checked
    with a finite value."""
    corr = pd.read_csv(Path(root) / "results" / "tables" / "correlations.csv", dtype={"estimator": str})
    rows = corr[(corr["benchmark"] == "personalized") & (corr["level"] == "overall")
                & (corr["downstream"] == "bon") & (corr["measure"] == "judge_score")
                & (corr["coefficient"] == "spearman") & corr["k"].notna()]
    assert len(rows), "no BoN judge-score Spearman rows in correlations.csv"
    x = _tied([mean_credit(root, rm, "personalized") for rm in rms])
    finite = 0
    for _, row in rows.iterrows():
        y = _tied(bon_means(root, rms, "" if pd.isna(row["estimator"]) else row["estimator"], "judge_score",
                            int(row["k"])))
        where = f"{row['estimator']} k={int(row['k'])}"
        assert int(row["n_rms"]) == len(rms), where
        if len(set(x)) == 1 or len(set(y)) == 1:  # a constant side: no rank correlation
            assert np.isnan(row["value"]), (where, row["value"])
            continue
        want = stats.spearmanr(x, y).statistic
        assert abs(row["value"] - want) < 1e-9, (where, row["value"], want, x, y)
        finite += 1
    return finite


def check_inputs(root: Path, rms: list[str], baseline: str) -> None:
    """correlation_inputs.csv: the personalized accuracy is each RM's mean credit and the baseline's
    headline its official RewardBench score, both recomputed by hand from the pairs files."""
    inp = pd.read_csv(Path(root) / "results" / "tables" / "correlation_inputs.csv")
    bench = inp[inp["kind"] == "benchmark"]
    pers = bench[(bench["benchmark"] == "personalized") & (bench["level"] == "overall")].set_index("rm")
    off = bench[(bench["benchmark"] == baseline) & (bench["level"] == "official")
                & (bench["group"] == "overall")].set_index("rm")
    for rm in rms:
        assert abs(pers.loc[rm, "value"] - mean_credit(root, rm, "personalized")) < 1e-9, rm
        assert abs(off.loc[rm, "value"] - rewardbench_official(pairs(root, rm, baseline))) < 1e-9, rm


def check_official_table(root: Path, rms: list[str], baseline: str) -> np.ndarray:
    """benchmark_accuracy.csv's official score (level official, group all; written to 6 decimals) of each
    RM by hand;
    returns the official scores and pooled accuracies (to show the two differ)."""
    acc = pd.read_csv(Path(root) / "results" / "tables" / "benchmark_accuracy.csv")
    off = acc[(acc["benchmark"] == baseline) & (acc["level"] == "official") & (acc["group"] == "all")]
    off = off.set_index("rm")["accuracy"]
    out = []
    for rm in rms:
        df = pairs(root, rm, baseline)
        want = rewardbench_official(df)
        assert abs(off[rm] - want) < 5e-7, (rm, off[rm], want)  # the table's 6 decimals
        out.append((want, float(df["credit"].mean())))
    return np.array(out)
