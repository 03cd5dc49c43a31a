"""Re-applying the authors' rules to the SAVED per-pair scores and BoN
files reproduces benchmark_accuracy.csv and the first_k rows of bon.csv exactly (as written),
ties included. The rules are re-implemented here in plain Python, independently of prbench."""
import random

import numpy as np
import pandas as pd

from prbench.downstream import bon
from prbench.io import read_jsonl, write_jsonl
from prbench.rms.base import CompareOutput, RewardModel, ScoreOutput
from prbench.scoring.benchmark import accuracy_table, score_benchmark

SUBSETS = {"alpacaeval-easy": "chat", "mt-bench-med": "chat", "llmbar-natural": "chat_hard",
           "donotanswer": "safety", "math-prm": "reasoning", "hep-go": "reasoning"}
WEIGHTS = {"alpacaeval-easy": 100, "mt-bench-med": 40, "llmbar-natural": 100, "donotanswer": 136,
           "math-prm": 984, "hep-go": 164}  # RewardBench's prompt counts, math-prm upweighted 447 -> 984


class CoarseRM(RewardModel):
    """Pointwise: answer length // 10 (many exact ties); answers containing '?' fail (NaN)."""

    kind, name, use_profile = "coarse", "coarse", False

    def score(self, requests):
        s = np.array([np.nan if "?" in r.answer else float(len(r.answer) // 10) for r in requests])
        return ScoreOutput(scores=s, failures=int(np.isnan(s).sum()))


class RandomJudge(RewardModel):
    """Pairwise: seeded random verdicts in both orders, some unparseable (None)."""

    kind, name, use_profile, pairwise = "rj", "judge", False, True

    def score(self, requests):  # pragma: no cover - benchmark pairs go through compare()
        raise AssertionError

    def compare(self, pairs, groups=None):
        rng = random.Random(7)
        prefs, details = [], []
        for _ in pairs:
            d = {"chosen_is_a": [True, False], "picks": [rng.choice("AAB" + "B" * 2 + "x") for _ in range(2)],
                 "raw": ["", ""]}
            d["picks"] = [None if p == "x" else p for p in d["picks"]]
            details.append(d)
            if None in d["picks"]:
                prefs.append(np.nan)
            else:
                prefs.append(np.mean([(p == "A") == c for p, c in zip(d["picks"], d["chosen_is_a"])]))
        prefs = np.array(prefs, dtype=float)
        return CompareOutput(prefs=prefs, failures=int(np.isnan(prefs).sum()), details=details)


def _bench(n=120, seed=0):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        subset = list(SUBSETS)[i % len(SUBSETS)]
        c = "c" * rng.randint(5, 40) + ("?" if rng.random() < 0.05 else "")
        r = "r" * rng.randint(5, 40)
        rows.append({"pair_id": f"p{i}", "benchmark": "rb", "subset": subset, "section": SUBSETS[subset],
                     "question_id": f"p{i}", "question": "q", "profile": [], "chosen": c, "rejected": r})
    return rows


def _credit_from_saved(p):
    if "judge" in p:  # pairwise: share of orders in which the pick is the chosen answer; unparseable = 0
        d = p["judge"]
        if any(x is None for x in d["picks"]):
            return 0.0
        return sum((x == "A") == c for x, c in zip(d["picks"], d["chosen_is_a"])) / len(d["picks"])
    c, r = p["score_chosen"], p["score_rejected"]
    return 1.0 if (c is not None and r is not None and c > r) else 0.0  # strict: ties are wrong


def test_accuracy_table_reproduced_from_saved_pairs(tmp_path):
    write_jsonl(tmp_path / "rb.jsonl", _bench())
    accs = []
    for rm in (CoarseRM(), RandomJudge()):
        score_benchmark(tmp_path / "rb.jsonl", {"name": rm.name}, tmp_path / f"{rm.name}.pairs.jsonl",
                        tmp_path / f"{rm.name}.acc.json", "rb", 0, {"bootstrap": 20}, rm=rm,
                        bench_kind="rewardbench")
        accs.append(tmp_path / f"{rm.name}.acc.json")
    accuracy_table(accs, tmp_path / "benchmark_accuracy.csv")
    table = pd.read_csv(tmp_path / "benchmark_accuracy.csv", dtype={"accuracy": str})
    n_ties = 0
    for name in ("coarse", "judge"):
        saved = read_jsonl(tmp_path / f"{name}.pairs.jsonl")
        credit = {p["pair_id"]: _credit_from_saved(p) for p in saved}
        n_ties += sum(p["tie"] for p in saved)
        expected = {("overall", "all"): list(credit.values())}
        for p in saved:
            expected.setdefault(("subset", p["subset"]), []).append(credit[p["pair_id"]])
            expected.setdefault(("section", p["section"]), []).append(credit[p["pair_id"]])
        sub_acc = {g: sum(v) / len(v) for (lv, g), v in expected.items() if lv == "subset"}
        sections = {}
        for s, sec in SUBSETS.items():
            sections.setdefault(sec, []).append(s)
        off = {sec: sum(sub_acc[s] * WEIGHTS[s] for s in subs) / sum(WEIGHTS[s] for s in subs)
               for sec, subs in sections.items()}
        want = {k: sum(v) / len(v) for k, v in expected.items()}
        want.update({("official", sec): v for sec, v in off.items()})
        want[("official", "all")] = sum(off.values()) / 4
        got = table[table.rm == name].set_index(["level", "group"])["accuracy"]
        assert set(got.index) == set(want)
        for key, v in want.items():
            assert got[key] == f"{v:.6g}", (name, key)
    assert n_ties > 0


def test_first_k_rows_of_bon_csv_reproduced_from_saved_files(tmp_path):
    rng = random.Random(3)
    n, ks, qids = 8, [1, 2, 4, 8], [f"q{i}" for i in range(30)]
    samples = [{"question_id": q, "subset": "S", "sample_idx": s, "answer": f"{q}-{s}"} for q in qids for s in range(n)]
    judged = [{"question_id": q, "sample_idx": s, "score": rng.choice([0.0, 0.5, 1.0, 1.5, 2.0])}
              for q in qids for s in range(n)]
    rm_rows = [{"question_id": q, "sample_idx": s, "score": rng.choice([None, 0.0, 1.0, 1.0, 2.0])}
               for q in qids for s in range(n)]  # coarse scores: many ties, some failures
    for name, rows in (("samples", samples), ("judged", judged), ("rm", rm_rows)):
        write_jsonl(tmp_path / f"{name}.jsonl", rows)
    bon.bon_table({"pol": {"samples": tmp_path / "samples.jsonl", "judged": tmp_path / "judged.jsonl",
                           "rm_scores": {"rm": tmp_path / "rm.jsonl"}, "curves_dir": tmp_path / "curves"}},
                  tmp_path / "bon.csv", ks=ks, n=n, seed=0, n_boot=20)
    table = pd.read_csv(tmp_path / "bon.csv", dtype={"mean": str})
    g = {(r["question_id"], r["sample_idx"]): r["score"] for r in read_jsonl(tmp_path / "judged.jsonl")}
    rsc = {(r["question_id"], r["sample_idx"]): r["score"] for r in read_jsonl(tmp_path / "rm.jsonl")}
    tie_decided = 0
    for k in ks:
        picked = []
        for q in qids:
            best = 0  # first k samples in order; a later sample wins only with a strictly higher score
            for s in range(1, k):
                a, b = rsc[(q, s)], rsc[(q, best)]
                if a is not None and (b is None or a > b):
                    best = s
            head = [rsc[(q, s)] for s in range(k)]
            tie_decided += sum(1 for x in head if x == rsc[(q, best)]) > 1
            picked.append(g[(q, best)])
        row = table[(table.rm == "rm") & (table.subset == "all") & (table.estimator == "first_k") & (table.k == k)]
        assert row["mean"].iloc[0] == f"{np.mean(picked):.6g}", k
    assert tie_decided > 0
