"""Generative RMs on tiny local Qwen2 causal LMs with a chat template.

Each tiny LM is trained for a few steps to always reply the same text, so the protocol (order
shuffle, both orders, position bias, parsing, failure counting) is tested end to end with real
generation."""
import math

import numpy as np
import pytest
from rm_helpers import make_pairs, tiny_causal_lm

from prbench.prompts import PairRequest, ScoreRequest
from prbench.rms import load_reward_model
from prbench.rms.generative import parse_choice, parse_score


@pytest.fixture(scope="module")
def lm_a(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("lm") / "always_a", "Result: A")


@pytest.fixture(scope="module")
def lm_score7(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("lm") / "score7", "Score: 7")


@pytest.fixture(scope="module")
def pairs():
    return [PairRequest(r["question"], r["chosen"], r["rejected"], tuple(r["profile"])) for r in make_pairs(16, seed=2)]


def _rm(path, kind, **kw):
    return load_reward_model({"name": "judge", "kind": kind, "path": str(path), "use_profile": True,
                              "max_new_tokens": 8, "progress": False, **kw})


def test_parsers():
    assert parse_choice("Result: A") == "A"
    assert parse_choice("Thinking...\nresult: **B**") == "B"
    assert parse_choice("B") == "B"
    assert parse_choice("Result: Answer A") == "A"
    assert parse_choice("Both are fine") is None
    assert parse_choice("Result: C") is None
    assert parse_choice("") is None
    assert parse_choice("**Reasoning:** B misses the point.\n**Result:** A") == "A"
    assert parse_choice("**Result**: B") == "B"
    assert parse_choice("I compare them. [[B]]") == "B"
    assert parse_choice("Result: [[A]]") == "A"
    # the final verdict wins over an earlier mention of the format
    assert parse_choice("Answer with Result: A or Result: B. ... Result: B") == "B"
    assert parse_choice("Reasoning: A is long-winded, B is short.") is None
    assert parse_score("Score: 7") == 7.0
    assert parse_score("score: 8.5 because") == 8.5
    assert parse_score(" 9 ") == 9.0
    assert math.isnan(parse_score("great answer"))
    assert math.isnan(parse_score(""))


def test_pairwise_single_order_is_seeded_and_position_biased_judge_scores_by_order(lm_a, pairs):
    rm = _rm(lm_a, "generative_pairwise", both_orders=False, seed=0)
    out = rm.compare(pairs)
    assert out.failures == 0
    shown_first = np.array([d["chosen_is_a"][0] for d in out.details])
    # a judge that always says "A" is right exactly when the chosen answer was shown as A
    np.testing.assert_array_equal(out.prefs, shown_first.astype(float))
    assert 0 < shown_first.sum() < len(pairs)  # the order really is shuffled
    d = rm.diagnostics()
    assert d["position_bias_a_rate"] == 1.0 and d["parse_failures"] == 0 and d["generations"] == len(pairs)
    # same seed -> same orders; another seed -> another shuffle
    again = _rm(lm_a, "generative_pairwise", both_orders=False, seed=0).compare(pairs)
    np.testing.assert_array_equal(again.prefs, out.prefs)
    other = _rm(lm_a, "generative_pairwise", both_orders=False, seed=1)
    assert [other.chosen_first(p) for p in pairs] != list(shown_first)


def test_pairwise_both_orders_cancels_position_bias_into_ties(lm_a, pairs):
    rm = _rm(lm_a, "generative_pairwise", both_orders=True)
    out = rm.compare(pairs)
    assert (out.prefs == 0.5).all() and out.failures == 0
    assert all(d["chosen_is_a"] == [True, False] and d["picks"] == ["A", "A"] for d in out.details)
    assert rm.diagnostics()["generations"] == 2 * len(pairs)
    # score(): win rate against the reference answer -> 0.5 for every answer
    s = rm.score([ScoreRequest(p.question, p.chosen, p.profile) for p in pairs[:3]])
    assert (s.scores == 0.5).all() and s.failures == 0


def test_pairwise_unparseable_outputs_are_failures(lm_score7, pairs):
    rm = _rm(lm_score7, "generative_pairwise", both_orders=True)
    out = rm.compare(pairs[:4])
    assert np.isnan(out.prefs).all() and out.failures == 4
    d = rm.diagnostics()
    assert d["parse_failures"] == 8 and d["pair_failures"] == 4 and d["position_bias_a_rate"] is None


def test_pointwise_parses_scores_and_counts_failures(lm_score7, lm_a, pairs):
    reqs = [ScoreRequest(p.question, p.chosen, p.profile) for p in pairs[:5]]
    ok = _rm(lm_score7, "generative_pointwise").score(reqs)
    assert (ok.scores == 7.0).all() and ok.failures == 0 and ok.raw[0] == "Score: 7"
    bad_rm = _rm(lm_a, "generative_pointwise")
    bad = bad_rm.score(reqs)
    assert np.isnan(bad.scores).all() and bad.failures == 5
    assert bad_rm.diagnostics()["parse_failures"] == 5
    # the pointwise compare: equal scores are ties, NaN scores failures
    assert (_rm(lm_score7, "generative_pointwise").compare(pairs[:3]).prefs == 0.5).all()
    assert bad_rm.compare(pairs[:3]).failures == 3


def test_prompt_without_profile_and_batch_size(lm_a, pairs):
    rm = _rm(lm_a, "generative_pairwise", use_profile=False, max_batch_size=1)
    out = rm.compare(pairs[:3])
    assert out.failures == 0
    assert all(d["raw"] == ["Result: A"] for d in out.details)


def test_always_a_judge_scores_about_half(lm_a, tmp_path):
    """The paper's accuracy: one seeded order per pair (about half the pairs show chosen first),
    or both orders with ties counting half; either way an always-"A" judge is at chance."""
    from prbench.io import write_jsonl
    from prbench.scoring.benchmark import score_benchmark

    rows = make_pairs(40, seed=5)
    write_jsonl(tmp_path / "bench.jsonl", rows)
    for both in (False, True):
        spec = {"name": "a", "kind": "generative_pairwise", "path": str(lm_a), "use_profile": False,
                "max_new_tokens": 8, "progress": False, "both_orders": both}
        s = score_benchmark(tmp_path / "bench.jsonl", spec, tmp_path / f"{both}.pairs.jsonl",
                            tmp_path / f"{both}.acc.json", "personalized", 0, {"bootstrap": 20})
        o = s["overall"]
        assert o["position_bias_a"] == 1.0 and o["failures"] == 0
        if both:
            assert o["accuracy"] == 0.5 and o["ties"] == 40 and o["all_orders_right"] == 0.0
        else:
            assert 0.3 <= o["accuracy"] <= 0.7 and o["ties"] == 0
            assert o["accuracy"] == o["all_orders_right"] == o["correct"] / 40


def test_pairwise_score_is_a_round_robin_with_signal(lm_a, pairs, monkeypatch):
    from prbench.rms.base import CompareOutput

    rm = _rm(lm_a, "generative_pairwise", both_orders=False)
    calls = []

    def compare(prs):
        calls.append(len(prs))
        return CompareOutput(prefs=np.array([1.0 if len(p.chosen) > len(p.rejected) else 0.0 for p in prs]),
                             failures=0, details=None)

    monkeypatch.setattr(rm, "compare", compare)
    q, prof = "q?", ("post",)
    answers = ["bb", "a", "dddd", "ccc"]
    out = rm.score([ScoreRequest(q, a, prof) for a in answers])
    # win rate against the 3 siblings = (rank by length) / 3
    assert out.scores.tolist() == pytest.approx([1 / 3, 0.0, 1.0, 2 / 3])
    assert calls == [6]  # every unordered pair judged once
    again = rm.score([ScoreRequest(q, a, prof) for a in answers])
    assert calls == [6] and again.scores.tolist() == out.scores.tolist()  # cached
    assert rm.diagnostics()["score_comparisons"] == 6
    # a lone answer is compared with the reference answer set for its prompt
    assert rm.score([ScoreRequest("other", "x", ())]).scores[0] == 0.0  # no references set: the fixed
    # "I don't know." (longer than "x") wins
    rm.set_reference_answers({(q, prof): "ccc"}, source="refs.jsonl")
    lone = rm.score([ScoreRequest(q, "dddd", prof)])
    assert lone.scores[0] == 1.0  # "dddd" beats its reference "ccc"
    with pytest.raises(ValueError, match="no reference answer for the prompt 'other'.* in refs.jsonl"):
        rm.score([ScoreRequest("other", "x", ())])  # references set, but none for this prompt


def test_pairwise_score_circulant_tournament(lm_a, monkeypatch):
    from prbench.rms.base import CompareOutput

    rm = _rm(lm_a, "generative_pairwise", score_opponents=1)
    calls = []

    def compare(prs):
        calls.append(len(prs))
        return CompareOutput(prefs=np.array([1.0 if len(p.chosen) > len(p.rejected) else 0.0 for p in prs]),
                             failures=0, details=None)

    monkeypatch.setattr(rm, "compare", compare)
    answers = ["x" * (i + 1) for i in range(6)]
    out = rm.score([ScoreRequest("q", a, ()) for a in answers])
    assert calls == [6]  # n * m unordered pairs, not n (n - 1) / 2 = 15
    assert out.scores[-1] == 1.0 and out.scores[0] == 0.0  # the longest wins every game, the shortest none
    assert np.all((out.scores >= 0) & (out.scores <= 1))
