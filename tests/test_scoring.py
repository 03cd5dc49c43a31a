"""Benchmark scoring: dedupe, regrouping, ties, failures, accuracy JSON and the tidy table."""
import json

import numpy as np
import pandas as pd
import pytest
from rm_helpers import make_pairs

from prbench.io import read_json, read_jsonl, write_jsonl
from prbench.rms.base import CompareOutput, RewardModel, ScoreOutput
from prbench.scoring.benchmark import accuracy_table, load_pairs, score_benchmark, score_pairs, summarize


class DictRM(RewardModel):
    """Scores answers from a lookup table (missing -> NaN); records every request it gets."""

    kind = "fake"

    def __init__(self, table):
        self.name, self.use_profile, self.table, self.seen = "fake", False, table, []

    def score(self, requests):
        self.seen.extend(requests)
        s = np.array([self.table.get(r.answer, np.nan) for r in requests], dtype=float)
        return ScoreOutput(scores=s, failures=int(np.isnan(s).sum()))


class PairwiseFake(RewardModel):
    kind, pairwise = "fake_pairwise", True

    def __init__(self):
        self.name, self.use_profile, self.calls = "pw", True, []

    def score(self, requests):  # pragma: no cover - must not be used for benchmark pairs
        raise AssertionError("pairwise RMs are scored with compare()")

    def compare(self, pairs, groups=None):
        self.calls.append(len(pairs))
        prefs = np.array([1.0, 0.5, np.nan, 0.0][: len(pairs)])
        return CompareOutput(prefs=prefs, failures=int(np.isnan(prefs).sum()),
                             details=[{"raw": ["Result: A"]} for _ in pairs])


def _row(i, chosen, rejected, subset="S1", q="Q?", profile=("p",)):
    return {"pair_id": f"p{i}", "benchmark": "b", "subset": subset, "section": subset + "_sec", "question_id": f"q{i}",
            "question": q, "profile": list(profile), "chosen": chosen, "rejected": rejected}


def test_unique_responses_scored_once_ties_and_failures():
    rows = [_row(0, "good", "bad"), _row(1, "good", "bad"), _row(2, "same", "same"), _row(3, "good", "unknown"),
            _row(4, "bad", "good", subset="S2"), _row(5, "good", "bad", profile=("other",))]
    rm = DictRM({"good": 2.0, "bad": 1.0, "same": 0.0})
    res, info = score_pairs(rm, rows)
    # (Q?, (p,), good/bad) shared by pairs 0, 1, 3, 4; pair 5 has another profile; same/same once
    assert info["responses"] == 12 and info["unique_responses"] == 6 and len(rm.seen) == 6
    assert [r["correct"] for r in res] == [True, True, False, False, False, True]
    assert [r["tie"] for r in res] == [False, False, True, False, False, False]
    assert [r["failure"] for r in res] == [False, False, False, True, False, False]
    assert res[3]["score_rejected"] is None and res[3]["pref"] is None
    assert res[0]["score_chosen"] == 2.0 and res[0]["pref"] == 1.0
    assert set(res[0]) >= {"pair_id", "question_id", "subset", "section", "score_chosen", "score_rejected", "pref",
                           "correct", "tie", "failure"}
    summary = summarize(res, "fake", "b", n_boot=200, seed=0)
    o = summary["overall"]
    assert (o["n"], o["correct"], o["ties"], o["failures"]) == (6, 3, 1, 1)
    assert o["accuracy"] == pytest.approx(0.5)
    assert o["ci_low"] <= 0.5 <= o["ci_high"]
    assert summary["subset"]["S2"]["accuracy"] == 0.0 and summary["subset"]["S1"]["n"] == 5
    assert summary["section"]["S1_sec"]["n"] == 5
    assert summarize(res, "fake", "b", 200, 0) == summary  # seeded bootstrap


def test_pairwise_rm_uses_compare_on_pairs():
    rows = [_row(i, f"c{i}", f"r{i}") for i in range(4)]
    rm = PairwiseFake()
    res, info = score_pairs(rm, rows)
    assert rm.calls == [4] and info["judge_calls"] == 4
    assert [r["correct"] for r in res] == [True, False, False, False]
    assert [r["tie"] for r in res] == [False, True, False, False]
    assert [r["failure"] for r in res] == [False, False, True, False]
    # credit = the preference for the chosen answer: a tie is half credit, a failure none
    assert [r["credit"] for r in res] == [1.0, 0.5, 0.0, 0.0]
    assert [r["pref"] for r in res] == [1.0, 0.5, None, 0.0]
    assert res[0]["judge"] == {"raw": ["Result: A"]}
    o = summarize(res, "pw", "b", n_boot=50, seed=0)["overall"]
    assert o["accuracy"] == pytest.approx(1.5 / 4)  # mean credit, not the share strictly correct (1/4)
    assert (o["n"], o["correct"], o["ties"], o["failures"]) == (4, 1, 1, 1)


def test_load_pairs_errors_name_file_row_and_field(tmp_path):
    p = tmp_path / "b.jsonl"
    good = _row(0, "a", "b")
    write_jsonl(p, [good, {k: v for k, v in _row(1, "a", "b").items() if k != "rejected"}])
    with pytest.raises(ValueError, match=r"b\.jsonl: row 2: missing field 'rejected'"):
        load_pairs(p)
    write_jsonl(p, [good, dict(_row(1, "a", "b"), profile="not a list")])
    with pytest.raises(ValueError, match=r"row 2: field 'profile' must be list"):
        load_pairs(p)
    write_jsonl(p, [good, good])
    with pytest.raises(ValueError, match="duplicate pair_id"):
        load_pairs(p)


def test_score_benchmark_end_to_end_with_length_rm_and_table(tmp_path):
    rows = make_pairs(40, seed=1)
    bench = tmp_path / "personalized.jsonl"
    write_jsonl(bench, rows)
    out = tmp_path / "scores"
    spec = {"name": "length_only", "kind": "length", "length_unit": "words"}
    s = score_benchmark(bench, spec, out / "p.pairs.jsonl", out / "p.accuracy.json", "personalized", seed=0,
                        scoring={"bootstrap": 100})
    pairs = read_jsonl(out / "p.pairs.jsonl")
    assert len(pairs) == 40
    expected = sum(len(r["chosen"].split()) > len(r["rejected"].split()) for r in rows)
    assert s["overall"]["correct"] == expected == sum(p["correct"] for p in pairs)
    acc = read_json(out / "p.accuracy.json")
    assert acc["rm"] == "length_only" and acc["benchmark"] == "personalized"
    assert acc["diagnostics"]["kind"] == "length" and acc["scoring"]["unique_responses"] <= 80
    # second "RM" via a generic classifier-free path: same file with another name
    s2 = dict(spec, name="length_chars", length_unit="chars")
    score_benchmark(bench, s2, out / "c.pairs.jsonl", out / "c.accuracy.json", "personalized", 0, {"bootstrap": 100})
    df = accuracy_table([out / "p.accuracy.json", out / "c.accuracy.json"], tmp_path / "table.csv")
    back = pd.read_csv(tmp_path / "table.csv")
    assert list(back.columns) == ["rm", "benchmark", "level", "group", "n", "correct", "ties", "failures",
                                  "accuracy", "ci_low", "ci_high", "all_orders_right", "position_bias_a"]
    assert set(back.level) == {"overall", "subset", "section"}
    overall = back[(back.level == "overall") & (back.rm == "length_only")].iloc[0]
    assert overall.n == 40 and overall.correct == expected
    assert len(df) == 2 * (1 + 2 + 2)  # overall + 2 subsets + 2 sections per RM
    json.dumps(acc)  # plain JSON (no NaN objects)
