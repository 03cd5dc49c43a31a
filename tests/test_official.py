"""Official baseline scores (RewardBench section weights, RM-Bench domain x difficulty means) on
fixtures in the benchmarks' real subset names and domains, checked against hand computations."""
import numpy as np
import pytest

from prbench.scoring.benchmark import accuracy_rows
from prbench.scoring.official import Official, official_stats


def _rb_rows():
    # (subset, pairs, correct)
    spec = [("alpacaeval-easy", 4, 3), ("mt-bench-hard", 2, 1), ("llmbar-natural", 2, 2),
            ("xstest-should-respond", 4, 1), ("math-prm", 2, 2), ("hep-python", 4, 1), ("not-a-subset", 3, 3)]
    rows = []
    for subset, n, c in spec:
        for i in range(n):
            rows.append({"pair_id": f"{subset}-{i}", "question_id": f"{subset}-{i}", "subset": subset,
                         "section": "x", "correct": i < c, "credit": float(i < c), "tie": False, "failure": False})
    return rows


def test_rewardbench_official_hand_computed():
    chat = 3 / 4
    chat_hard = (1 / 2 * 37 + 1.0 * 100) / (37 + 100)  # mt-bench-hard 37 prompts, llmbar-natural 100
    safety = 1 / 4
    reasoning = (1.0 * 984 + 1 / 4 * 164) / (984 + 164)  # math-prm weighted 984 (not 447), hep-python 164
    st = official_stats("rewardbench", _rb_rows(), n_boot=200, seed=0)
    assert st["chat"]["accuracy"] == pytest.approx(chat)
    assert st["chat_hard"]["accuracy"] == pytest.approx(chat_hard)
    assert st["safety"]["accuracy"] == pytest.approx(safety)
    assert st["reasoning"]["accuracy"] == pytest.approx(reasoning)
    assert st["overall"]["accuracy"] == pytest.approx((chat + chat_hard + safety + reasoning) / 4)
    assert st["_left_out"] == {"not-a-subset": 3}
    # pooled share of pairs (the `overall` level) is a different number
    pooled = (3 + 1 + 2 + 1 + 2 + 1) / 18
    assert abs(st["overall"]["accuracy"] - pooled) > 0.05
    assert st["overall"]["ci_low"] <= st["overall"]["accuracy"] <= st["overall"]["ci_high"]


def _rmb_rows():
    rows = []

    def prompt(domain, q, good, drop=()):
        for i in range(3):
            for j in range(3):
                if (i, j) in drop:
                    continue
                ok = bool(good(i, j))
                rows.append({"pair_id": f"{q}/c{i}r{j}", "question_id": q, "subset": domain,
                             "section": "hard" if i < j else ("normal" if i == j else "easy"),
                             "correct": ok, "credit": float(ok), "tie": False, "failure": False})

    prompt("chat", "c1", lambda i, j: i >= j)          # easy 1, normal 1, hard 0 -> 2/3
    prompt("math", "m1", lambda i, j: True)            # math: every cell 1/2 -> 1/2
    prompt("math", "m2", lambda i, j: False)
    prompt("safety-refuse", "s1", lambda i, j: True)   # safety pools refuse and response
    prompt("safety-response", "s2", lambda i, j: i == j, drop={(0, 1)})  # a dropped comparison is wrong
    return rows


def test_rmbench_official_hand_computed():
    chat = (1 + 1 + 0) / 3
    math_ = (0.5 + 0.5 + 0.5) / 3
    # safety cells over 2 prompts: diagonal (1+1)/2 = 1, off-diagonal (1+0)/2 = 1/2
    safety = (1 / 2 + 1 + 1 / 2) / 3
    st = official_stats("rmbench", _rmb_rows(), n_boot=100, seed=0)
    assert st["chat"]["accuracy"] == pytest.approx(chat)
    assert st["math"]["accuracy"] == pytest.approx(math_)
    assert st["safety"]["accuracy"] == pytest.approx(safety)
    assert "code" not in st
    assert st["overall"]["accuracy"] == pytest.approx((chat + math_ + safety) / 3)
    assert st["safety"]["n"] == 17


def test_bootstrap_weights_reproduce_the_point_value():
    rows = _rb_rows()
    off = Official("rewardbench", rows)
    index = {}
    for r in rows:
        index.setdefault(r["question_id"], len(index))
    ones = np.ones((1, len(index)))
    assert off.evaluate(ones, index)[0] == pytest.approx(off.value())
    doubled = 2 * ones
    assert off.evaluate(doubled, index)[0] == pytest.approx(off.value())


def test_official_rows_in_the_accuracy_table():
    st = official_stats("rmbench", _rmb_rows(), n_boot=0, seed=0)
    st.pop("_left_out")
    summary = {"rm": "r", "benchmark": "rmbench",
               "overall": {"n": 1, "correct": 1, "ties": 0, "failures": 0, "accuracy": 1.0, "ci_low": None,
                           "ci_high": None}, "official": st}
    rows = [r for r in accuracy_rows(summary) if r["level"] == "official"]
    assert {r["group"] for r in rows} == {"all", "chat", "math", "safety"}
    assert [r for r in rows if r["group"] == "all"][0]["accuracy"] == pytest.approx(st["overall"]["accuracy"])


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="no official score"):
        Official("personalized", _rb_rows())
