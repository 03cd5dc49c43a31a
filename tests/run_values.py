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
from collections import defaultdict
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


def rewardbench2_official(saved_rows) -> tuple[dict, float]:
    """RewardBench 2's score from saved per-item scores, written from reward-bench's scripts/run_v2.py
    and rewardbench/utils.py (reroll_and_score_dataset, process_single_model) in this test's own words:
    non-Ties: results = 1 / #(scores == max) when scores[0] is the max, else 0, subset = mean; Ties:
    per (type, prompt) accurate = min(correct) - max(incorrect) > 0, then 0.3 tied acc + 0.3 ref acc +
    0.2 P(tied gap > tied spread) + 0.2 P(min(ref gap, tied gap) > tied spread) + 0.01 mean tanh(...);
    the leaderboard's overall = mean over the subsets. A failed RM call (its score saved as None) is
    NaN, as numpy reads it: never the maximum, every comparison with it false, its margin 0."""
    by_subset = defaultdict(list)
    for r in saved_rows:
        by_subset[r["subset"]].append(r)
    subset_scores = {}
    for subset, rows in by_subset.items():
        if subset.lower() != "ties":
            res = []
            for r in rows:
                sc = np.asarray(r["scores"], dtype=float)
                mx = np.max(sc)
                res.append((1 / np.sum(sc == mx)) if sc[0] == mx else 0)
            subset_scores[subset] = sum(res) / len(res)
            continue
        stats = {"ref": {}, "tied": {}}
        for r in rows:
            kind, pid = r["pair_id"].split(":")
            sc = np.asarray(r["scores"], dtype=float)  # a failed call's None: NaN
            k = r["num_correct"]
            corr, inc = sc[:k], sc[k:]
            spread = float(np.max(corr) - np.min(corr)) if len(corr) > 1 else None
            gap = float(np.min(corr) - np.max(inc))
            stats[kind][int(pid)] = (gap > 0, spread, gap)
        ref_acc = np.mean([s[0] for s in stats["ref"].values()]) if stats["ref"] else 0.0
        tied_acc = np.mean([s[0] for s in stats["tied"].values()]) if stats["tied"] else 0.0
        both = set(stats["ref"]) & set(stats["tied"])
        spread = np.array([stats["tied"][p][1] for p in both])
        gap_t = np.array([stats["tied"][p][2] for p in both])
        gap_r = np.array([stats["ref"][p][2] for p in both])
        with np.errstate(divide="ignore", invalid="ignore"):
            margin = np.nan_to_num(np.tanh(np.minimum(gap_r, gap_t) / spread - 1), nan=0.0)
        subset_scores[subset] = (0.3 * tied_acc + 0.3 * ref_acc + 0.2 * np.mean(gap_t > spread)
                                 + 0.2 * np.mean(np.minimum(gap_r, gap_t) > spread) + 0.01 * float(np.mean(margin)))
    return subset_scores, float(np.mean(list(subset_scores.values())))


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


def check_rewardbench2_official(root: Path, rms: list[str], baseline: str, correlated: list[str] | None = None) -> None:
    """RewardBench 2's official score of each RM from its saved per-item scores
    (results/scores/{rm}/{baseline}.pairs.jsonl) by the v2 rules written out above: equal to 1e-9 to
    the scoring job's accuracy file and to the 6 decimals of benchmark_accuracy.csv; for the RMs in
    `correlated` (default: all), to 1e-9 to the correlation stage's input."""
    acc = pd.read_csv(Path(root) / "results" / "tables" / "benchmark_accuracy.csv")
    table = acc[(acc["benchmark"] == baseline) & (acc["level"] == "official") & (acc["group"] == "all")]
    table = table.set_index("rm")["accuracy"]
    inp = pd.read_csv(Path(root) / "results" / "tables" / "correlation_inputs.csv")
    inp = inp[(inp["kind"] == "benchmark") & (inp["benchmark"] == baseline) & (inp["level"] == "official")
              & (inp["group"] == "overall")].set_index("rm")["value"]
    for rm in rms:
        rows = pairs(root, rm, baseline).to_dict("records")
        subsets, overall = rewardbench2_official(rows)
        assert set(subsets) == {"Factuality", "Precise IF", "Math", "Safety", "Focus", "Ties"}, (rm, set(subsets))
        saved = json.loads((Path(root) / "results" / "scores" / rm / f"{baseline}.accuracy.json").read_text())
        assert abs(saved["official"]["overall"]["accuracy"] - overall) < 1e-9, (rm, saved["official"], overall)
        for s, v in subsets.items():
            assert abs(saved["official"][s]["accuracy"] - v) < 1e-9, (rm, s)
        assert abs(table[rm] - overall) < 5e-7, (rm, table[rm], overall)
        if correlated is None or rm in correlated:
            assert abs(inp[rm] - overall) < 1e-9, (rm, inp[rm], overall)
