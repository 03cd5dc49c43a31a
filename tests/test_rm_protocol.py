"""The authors' RM-side protocol as config keys (`scoring.order_seed` / `pairwise_parse` /
`pairwise_failure`, section `reward`), each rule tested on its own and end to end on tiny local
models: the pairwise parse and failure rules with their counts, the seeded order draw, the 0-1
pointwise downstream scoring with its fallback score and counts (BoN score file, BoN table, PPO/GRPO
reward adapter), the classifier's `query + posts` input under `reward.profile: always`, and the
position and margin reports beside the accuracy table."""
import math

import numpy as np
import pandas as pd
import pytest
from rm_helpers import make_pairs, tiny_causal_lm, tiny_llama_classifier, tiny_tokenizer
from scipy.stats import binomtest

from prbench import prompts as P
from prbench.config import ConfigError
from prbench.downstream.bon.curves import bon_curves
from prbench.downstream.bon.stages import score_bon
from prbench.downstream.reward_adapter import PromptIndex, RewardAdapter
from prbench.io import read_jsonl, write_jsonl
from prbench.prompts import PairRequest, ScoreRequest
from prbench.rms import load_reward_model, reward_spec
from prbench.rms.generative import (
    chosen_shown_first,
    parse_choice,
    parse_first_result,
    parse_unit_score,
    parse_unit_score_authors,
)
from prbench.scoring.benchmark import benchmark_reports, score_benchmark
from prbench.seeding import stable_seed
from prbench.stats import bootstrap_ci

UNPARSEABLE = "Maybe later."


@pytest.fixture(scope="module")
def lm_mute(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("lm") / "mute", UNPARSEABLE)


@pytest.fixture(scope="module")
def lm_08(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("lm") / "point8", "0.8")


@pytest.fixture(autouse=True)
def _default_templates():
    # the compact set (short prompts the tiny LMs answer reliably) with the schema's post format (the authors')
    P.configure({"templates": "compact"})
    yield
    P._ACTIVE = None


def _spec(path, kind="generative_pairwise", **kw):
    return {"name": "judge", "kind": kind, "path": str(path), "use_profile": True, "max_new_tokens": 8,
            "progress": False, **kw}


# ---- parsing -----------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("Result: A", "A"),
    ("**Result:** b", "B"),
    ('Reasoning first.\nresult: "B"', "B"),
    ("Result: B. On reflection, Result: A", "B"),           # the FIRST result: counts
    ("<think>result: A</think>\nResult: B", "B"),          # only the text after the last </think>
    ("Result: Answer B", "A"),                             # the authors' rule reads the first letter
    ("Result: C", None),
    ("[[A]]", None),                                       # no "result:" at all
    ("A", None),
    ("", None),
])
def test_first_result_parse_is_the_authors_rule(text, expected):
    assert parse_first_result(text) == expected


def test_the_two_parsers_differ_where_the_rules_do():
    text = "Result: B. On reflection, Result: A"
    assert parse_choice(text) == "A" and parse_first_result(text) == "B"
    assert parse_choice("[[A]]") == "A" and parse_first_result("[[A]]") is None


@pytest.mark.parametrize("text,expected", [
    ("0.8", 0.8), (" .75 ", 0.75), ("1", 1.0), ("0", 0.0), ("Score: 0.3 because", 0.3),
    ("7", 1.0), ("-0.2", 0.0),  # clamped into [0, 1] as the authors
    ("great", math.nan), ("", math.nan),
])
def test_unit_score_parse(text, expected):
    got = parse_unit_score(text)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


# ---- the order draw ----------------------------------------------------------------------------
def test_order_draw_is_seeded_balanced_and_independent_of_file_order():
    pairs = [PairRequest(r["question"], r["chosen"], r["rejected"], tuple(r["profile"]))
             for r in make_pairs(400, seed=5)]
    draws = [chosen_shown_first(42, p) for p in pairs]
    assert draws == [chosen_shown_first(42, p) for p in pairs]                   # deterministic
    assert [chosen_shown_first(42, p) for p in reversed(pairs)] == draws[::-1]    # the file order plays no part
    other = [chosen_shown_first(43, p) for p in pairs]
    assert other != draws
    assert binomtest(sum(draws), len(draws), 0.5).pvalue > 0.01                   # a fair coin
    assert binomtest(sum(a == b for a, b in zip(draws, other)), len(draws), 0.5).pvalue > 0.01  # seeds independent


# ---- pairwise failure rules, counted either way ------------------------------------------------
def test_pairwise_failure_rules_and_counts(lm_mute):
    pairs = [PairRequest(r["question"], r["chosen"], r["rejected"], tuple(r["profile"]))
             for r in make_pairs(12, seed=3)]
    rm = load_reward_model(_spec(lm_mute, order_seed=42, pairwise_parse="first_result", pairwise_failure="predict_a"))
    out = rm.compare(pairs)
    shown_a = np.array([chosen_shown_first(42, p) for p in pairs])
    assert [d["chosen_is_a"] for d in out.details] == [[bool(a)] for a in shown_a]
    np.testing.assert_array_equal(out.prefs, shown_a.astype(float))  # "A" predicted: right iff chosen is A
    assert out.failures == len(pairs) and all(d["failed"] == [True] for d in out.details)
    assert rm.diagnostics()["parse_failures"] == len(pairs) and rm.diagnostics()["position_bias_a_rate"] is None
    wrong = load_reward_model(_spec(lm_mute, order_seed=42)).compare(pairs)
    assert np.isnan(wrong.prefs).all() and wrong.failures == len(pairs)


def test_sequential_order_rule_reproduces_the_authors_draws_per_subset(lm_mute, tmp_path):
    """scoring.order_rule: sequential: random.seed(42) then one random.random() < 0.5 per pair in
    the file order, restarted per subset (their evaluation/pairwise.py runs per subset), written in
    the pairs file's `chosen_is_a`; `hashed` stays the per-pair coin."""
    import random

    rows = make_pairs(20, seed=5)
    for i, r in enumerate(rows):
        r["subset"] = "S1" if i < 12 else "S2"
    write_jsonl(tmp_path / "bench.jsonl", rows)
    scoring = {"order_seed": 42, "order_rule": "sequential", "pairwise_parse": "first_result",
               "pairwise_failure": "predict_a", "bootstrap": 10}
    score_benchmark(tmp_path / "bench.jsonl", _spec(lm_mute), tmp_path / "s.pairs.jsonl", tmp_path / "s.acc.json",
                    "personalized", seed=0, scoring=scoring)
    got = [d["judge"]["chosen_is_a"] for d in read_jsonl(tmp_path / "s.pairs.jsonl")]
    want = []
    for n in (12, 8):
        random.seed(42)
        want += [[random.random() < 0.5] for _ in range(n)]
    assert got == want
    hashed = load_reward_model(_spec(lm_mute, order_seed=42)).compare(
        [PairRequest(r["question"], r["chosen"], r["rejected"], tuple(r["profile"])) for r in rows])
    assert [d["chosen_is_a"] for d in hashed.details] == [
        [chosen_shown_first(42, PairRequest(r["question"], r["chosen"], r["rejected"], tuple(r["profile"])))]
        for r in rows]
    with pytest.raises(ValueError, match="scoring.order_rule"):
        load_reward_model(_spec(lm_mute, order_rule="shuffled"))


@pytest.mark.parametrize("rule", ["predict_a", "wrong"])
def test_benchmark_accuracy_and_position_report_under_each_failure_rule(lm_mute, tmp_path, rule):
    rows = make_pairs(16, seed=4)
    write_jsonl(tmp_path / "bench.jsonl", rows)
    scoring = {"order_seed": 42, "pairwise_parse": "first_result", "pairwise_failure": rule, "bootstrap": 20}
    summary = score_benchmark(tmp_path / "bench.jsonl", _spec(lm_mute), tmp_path / "j.pairs.jsonl",
                              tmp_path / "j.accuracy.json", "personalized", seed=0, scoring=scoring)
    shown_a = np.array([chosen_shown_first(42, PairRequest(r["question"], r["chosen"], r["rejected"],
                                                           tuple(r["profile"]))) for r in rows])
    o = summary["overall"]
    assert o["failures"] == len(rows)  # counted under both rules
    assert o["accuracy"] == pytest.approx(shown_a.mean() if rule == "predict_a" else 0.0)
    assert o["position_bias_a"] is None  # no parsed verdict: the stand-in "A"s are not picks
    pos, margin = benchmark_reports([tmp_path / "j.accuracy.json"], [tmp_path / "j.pairs.jsonl"],
                                    tmp_path / "pos.csv", tmp_path / "margin.csv", n_boot=20)
    assert margin.empty
    row = pos[pos.level == "overall"].iloc[0]
    assert row.n_chosen_a == shown_a.sum() and row.n_chosen_b == len(rows) - shown_a.sum()
    assert (row.acc_chosen_a, row.acc_chosen_b) == ((1.0, 0.0) if rule == "predict_a" else (0.0, 0.0))
    assert row.position_bias == (1.0 if rule == "predict_a" else 0.0)
    assert pd.isna(row.share_a) and row.failures == len(rows)
    assert set(pos.level) == {"overall", "subset", "section"}
    written = pd.read_csv(tmp_path / "pos.csv")
    assert list(written.columns) == list(pos.columns) and len(written) == len(pos)


# ---- the reports on hand-made pairs ------------------------------------------------------------
def _pairwise_row(pid, subset, chosen_is_a, picks, failed):
    return {"pair_id": pid, "subset": subset, "section": subset, "failure": any(failed),
            "judge": {"chosen_is_a": chosen_is_a, "picks": picks, "failed": failed}}


def test_position_and_margin_reports_by_hand(tmp_path):
    from prbench.io import write_json

    judge_rows = [
        _pairwise_row("p0", "S", [True, False], ["A", "B"], [False, False]),  # both right
        _pairwise_row("p1", "S", [True, False], ["A", "A"], [False, False]),  # A-biased: right, wrong
        _pairwise_row("p2", "T", [True, False], ["B", None], [False, True]),  # wrong, unparsed -> wrong
    ]
    write_jsonl(tmp_path / "j.pairs.jsonl", judge_rows)
    write_json(tmp_path / "j.acc.json", {"rm": "j", "benchmark": "b", "diagnostics": {"kind": "generative_pairwise"}})
    margins = [2.0, -1.0, 0.5, 3.0]
    cls_rows = [{"pair_id": f"c{i}", "subset": "S", "section": "S", "failure": False, "score_chosen": m + 1.0,
                 "score_rejected": 1.0} for i, m in enumerate(margins)]
    cls_rows.append({"pair_id": "c9", "subset": "S", "section": "S", "failure": True, "score_chosen": None,
                     "score_rejected": 1.0})
    write_jsonl(tmp_path / "c.pairs.jsonl", cls_rows)
    write_json(tmp_path / "c.acc.json", {"rm": "c", "benchmark": "b", "diagnostics": {"kind": "classifier"}})
    # the same judge on a best-of-n benchmark (RewardBench 2 by round robin): its rows carry win counts,
    # no A/B order per pair, so neither table takes them (before, it entered the margin table, all failures)
    bestof_rows = [{"pair_id": f"t{i}", "subset": "Math", "section": "Math", "scores": [2.0, 1.0, None, 0.0],
                    "num_correct": 1, "rule": "best_of_n", "failure": True, "score_chosen": None,
                    "score_rejected": None} for i in range(3)]
    write_jsonl(tmp_path / "j2.pairs.jsonl", bestof_rows)
    write_json(tmp_path / "j2.acc.json", {"rm": "j", "benchmark": "rewardbench2",
                                          "diagnostics": {"kind": "generative_pairwise"}})
    names = ("j", "c", "j2")
    pos, margin = benchmark_reports([tmp_path / f"{n}.acc.json" for n in names],
                                    [tmp_path / f"{n}.pairs.jsonl" for n in names],
                                    tmp_path / "pos.csv", tmp_path / "margin.csv", n_boot=200, seed=3)
    assert set(pos["benchmark"]) == {"b"} and set(margin["rm"]) == {"c"}
    o = pos[pos.level == "overall"].iloc[0]
    assert (o.n_chosen_a, o.n_chosen_b) == (3, 3)
    assert o.acc_chosen_a == pytest.approx(2 / 3) and o.acc_chosen_b == pytest.approx(1 / 3)
    assert o.position_bias == pytest.approx(1 / 3)
    assert o.share_a == pytest.approx(3 / 5)  # parsed picks A, B, A, A, B
    assert o.failures == 1 and o.n_pairs == 3
    m = margin[margin.level == "overall"].iloc[0]
    assert m.kind == "classifier" and m.n == 4 and m.failures == 1
    assert m.mean_margin == pytest.approx(np.mean(margins))
    _, lo, hi = bootstrap_ci(np.array(margins), n_boot=200, seed=stable_seed(3, "c", "b", "margin", "overall", "all"))
    assert (m.ci_low, m.ci_high) == (lo, hi) and lo < m.mean_margin < hi
    assert list(pos.columns)[:4] == ["rm", "benchmark", "level", "group"]


# ---- downstream 0-1 pointwise scoring ----------------------------------------------------------
def _reqs(n=6):
    return [ScoreRequest(r["question"], r["chosen"], tuple(r["profile"])) for r in make_pairs(n, seed=6)]


@pytest.mark.parametrize("kind", ["generative_pairwise", "generative_pointwise"])
def test_pointwise_reward_reads_a_0_1_score(lm_08, kind):
    spec = reward_spec(_spec(lm_08, kind), {"generative": "pointwise"})
    assert (spec["reward_generative"], spec["reward_max_new_tokens"], spec["reward_failure_score"]) == \
        ("pointwise", 10, 0.5)
    rm = load_reward_model(spec)
    out = rm.score(_reqs())
    np.testing.assert_allclose(out.scores, 0.8)
    assert out.failures == 0 and not out.failed.any()
    d = rm.diagnostics()
    assert d["unit_scored"] == 6 and d["unit_failures"] == 0


@pytest.mark.parametrize("text,project,authors", [
    ("0.7", 0.7, 0.7), (" .5\n", 0.5, 0.5), ("1", 1.0, 1.0), ("1.0", 1.0, 1.0), ("0", 0.0, 0.0),
    ("Score: 0.9", 0.9, 0.9), ("Score: 7", 1.0, None), ("7/10", 1.0, 1.0), ("score 2.5", 1.0, 0.5),
    ("-3", 0.0, 0.0), ("", None, None), ("abc", None, None), ("I rate it 1 out of 10", 1.0, 1.0),
])
def test_unit_score_parsers_project_and_authors(text, project, authors):
    """`reward.generative_parse`: first_number (any first number, clamped) vs the authors' rule
    (float(reply), else the first match of 0?.d+ / [01].?d*, clamped, else a failure); the authors'
    rule checked against its own expression, evaluated here directly."""
    import re
    for parse, want in ((parse_unit_score, project), (parse_unit_score_authors, authors)):
        got = parse(text)
        assert (math.isnan(got) if want is None else got == pytest.approx(want)), (parse.__name__, text, got)
    t = text.strip()
    try:
        direct = max(0.0, min(1.0, float(t)))
    except ValueError:
        nums = re.findall(r"0?\.\d+|[01]\.?\d*", t)
        direct = max(0.0, min(1.0, float(nums[0]))) if nums else None
    got = parse_unit_score_authors(text)
    assert (math.isnan(got) if direct is None else got == direct)


def test_pointwise_reward_parse_rule_is_a_key(tmp_path):
    """A reply "Score: 7": 1.0 under first_number, a counted failure scored 0.5 under the authors' rule."""
    lm7 = tiny_causal_lm(tmp_path / "seven", "Score: 7")
    reqs = _reqs(3)
    spec = reward_spec(_spec(lm7), {"generative": "pointwise", "generative_parse": "authors"})
    assert spec["reward_parse"] == "authors"
    out = load_reward_model(spec).score(reqs)
    np.testing.assert_allclose(out.scores, 0.5)
    assert out.failures == 3 and out.failed.all()
    rm = load_reward_model(reward_spec(_spec(lm7), {"generative": "pointwise"}))
    out = rm.score(reqs)
    np.testing.assert_allclose(out.scores, 1.0)
    d = rm.diagnostics()
    assert out.failures == 0 and d["unit_clamped"] == 3 and d["unit_parse"] == "first_number"
    with pytest.raises(ConfigError, match="generative_parse"):
        reward_spec(_spec(lm7), {"generative": "pointwise", "generative_parse": "magic"})


def test_pointwise_reward_failure_scores_the_fallback_and_is_counted(lm_mute, tmp_path):
    reqs = _reqs()
    rm = load_reward_model(reward_spec(_spec(lm_mute), {"generative": "pointwise", "generative_failure_score": 0.25}))
    out = rm.score(reqs)
    np.testing.assert_allclose(out.scores, 0.25)
    assert out.failures == len(reqs) and out.failed.all()
    assert rm.diagnostics()["unit_failures"] == len(reqs)
    # the reply budget is reward.generative_max_new_tokens, not the RM's max_new_tokens
    short = load_reward_model(reward_spec(_spec(lm_mute), {"generative": "pointwise", "generative_max_new_tokens": 1}))
    tok = tiny_tokenizer()
    assert all(len(tok(t, add_special_tokens=False)["input_ids"]) <= 1 for t in short.score(reqs[:2]).raw)
    assert any(len(tok(t, add_special_tokens=False)["input_ids"]) > 1 for t in out.raw)

    # BoN: every row flags its failure, the report and the BoN table count them
    prompts = [{"question_id": f"q{i}", "subset": "S", "question": r.question, "profile": list(r.profile)}
               for i, r in enumerate(reqs[:3])]
    samples = [{"question_id": f"q{i}", "subset": "S", "sample_idx": s, "answer": f"answer {s} to {i}"}
               for i in range(3) for s in range(2)]
    write_jsonl(tmp_path / "prompts.jsonl", prompts)
    write_jsonl(tmp_path / "samples.jsonl", samples)
    report = score_bon(tmp_path / "samples.jsonl", tmp_path / "prompts.jsonl", {"name": "judge"},
                       tmp_path / "scores.jsonl", rm=rm)
    rows = read_jsonl(tmp_path / "scores.jsonl")
    assert report["failures"] == report["fallback_scored"] == 6
    assert all(r["failed"] and r["score"] == 0.25 for r in rows)
    judged = [{"question_id": s["question_id"], "sample_idx": s["sample_idx"], "score": float(s["sample_idx"])}
              for s in samples]
    _, table = bon_curves(samples, judged, {"judge": rows}, ks=[1, 2], n=2, policy="p", n_boot=10)
    assert (table[table.rm == "judge"].rm_failures == 6).all()

    # PPO / GRPO: the adapter rewards the fallback score (scaled) and counts the failures
    tok.pad_token = "<pad>"
    adapter = RewardAdapter(rm, tok, PromptIndex([], tok), nan_reward=-1.0, reward_scale=0.1)
    rewards = adapter.score_requests(reqs)
    np.testing.assert_allclose(rewards, 0.025)
    assert adapter.total.failures == len(reqs) and adapter.total.scored == len(reqs)


def test_round_robin_stays_the_default(lm_08):
    spec = _spec(lm_08)
    assert reward_spec(spec, {}) == spec and reward_spec(spec, {"generative": "round_robin"}) == spec


# ---- reward.profile: always --------------------------------------------------------------------
def test_reward_spec_profile_rule_by_kind():
    cls = {"name": "c", "kind": "classifier", "path": "x", "use_profile": False}
    assert reward_spec(cls, {"profile": "as_benchmark"}) == cls
    always = reward_spec(cls, {"profile": "always"})
    assert always == {**cls, "use_profile": True, "profile_layout": "after_question"}
    joined = reward_spec(cls, {"profile": "always", "profile_join": "authors"})
    assert joined == {**cls, "use_profile": True, "profile_layout": "appended"}
    for other in ({"name": "l", "kind": "length"}, {"name": "g", "kind": "generative_pairwise", "path": "x"}):
        assert reward_spec(other, {"profile": "always"}) == other
    with pytest.raises(ConfigError, match="reward"):
        reward_spec(cls, {"profile": "sometimes"})


def test_profile_always_gives_a_profile_free_classifier_the_question_then_the_posts(tmp_path):
    path = tiny_llama_classifier(tmp_path / "cls")
    bench = {"name": "c", "kind": "classifier", "path": str(path), "use_profile": False, "progress": False}
    req = ScoreRequest("What should I do this weekend?", "You could try cycling.",
                       ("I ride my bike daily.", "New gears arrived."), ("Sports", ""))
    plain = load_reward_model(bench)
    rm = load_reward_model(reward_spec(bench, {"profile": "always"}))
    tok = rm.tokenizer
    text = tok.decode(rm.encoder.encode(req)["input_ids"])
    user = ("What should I do this weekend?\n\nPost 1 (Category: Sports):\nI ride my bike daily.\n"
            "Post 2 (Category: unknown):\nNew gears arrived.")
    assert text == P.render_chat(tok, [{"role": "user", "content": user},
                                       {"role": "assistant", "content": "You could try cycling."}])
    assert tok.decode(plain.encoder.encode(req)["input_ids"]).startswith("<|user|>What should I do this weekend?</s>")
    s_plain, s_always = plain.score([req]).scores[0], rm.score([req]).scores[0]
    assert s_plain != s_always  # the posts reach the model


def test_profile_join_authors_appends_the_posts_unseparated_and_unstripped(tmp_path):
    """reward.profile_join: authors: their `query + profile` (BoN/score.py), the question as given
    directly followed by the formatted posts, nothing stripped; blank_line strips and separates."""
    path = tiny_llama_classifier(tmp_path / "cls")
    bench = {"name": "c", "kind": "classifier", "path": str(path), "use_profile": False, "progress": False}
    req = ScoreRequest("What should I do this weekend? ", "You could try cycling.",
                       (" I ride my bike daily.\n", "New gears arrived."), ("Sports", "Hobbies"))
    authors = load_reward_model(reward_spec(bench, {"profile": "always", "profile_join": "authors"}))
    project = load_reward_model(reward_spec(bench, {"profile": "always"}))
    posts = ("Post 1 (Category: Sports):\n I ride my bike daily.\n\n"
             "Post 2 (Category: Hobbies):\nNew gears arrived.")
    want = "What should I do this weekend? " + posts
    assert P.user_turn(req.question, req.profile, True, None, "appended", req.categories) == want
    assert P.user_turn(req.question, req.profile, True, None, "after_question", req.categories) == (
        "What should I do this weekend?\n\nPost 1 (Category: Sports):\nI ride my bike daily.\n"
        "Post 2 (Category: Hobbies):\nNew gears arrived.")
    tok = authors.tokenizer
    assert tok.decode(authors.encoder.encode(req)["input_ids"]) == P.render_chat(
        tok, [{"role": "user", "content": want}, {"role": "assistant", "content": "You could try cycling."}])
    assert authors.score([req]).scores[0] != project.score([req]).scores[0]
    with pytest.raises(ConfigError, match="profile_join"):
        reward_spec(bench, {"profile": "always", "profile_join": "comma"})



def test_reward_prompt_templates(tmp_path):
    tpl = P.load_templates({"templates": "default"})
    msgs = P.reward_judge_messages("Best noir?", "Vertigo.", ("Loved the retrospective.",), categories=("Art",),
                                   templates=tpl)
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    assert "Best noir?" in user and "Vertigo." in user and "Post 1 (Category: Art):\nLoved the retrospective." in user
    assert "between 0 and 1" in user
    (tmp_path / "policy_user.txt").write_text("{question}")
    for role in ("pairwise_user", "pointwise_user", "rubric_user"):
        (tmp_path / f"{role}.txt").write_text("{question}")
    own = P.load_templates({"templates": str(tmp_path)})  # a set without the reward prompt still loads
    with pytest.raises(FileNotFoundError, match="reward_user"):
        P.reward_judge_messages("Q?", "A.", templates=own)


def test_config_check_refuses_pointwise_reward_without_its_prompt(tmp_path):
    import yaml
    from helpers import REPO

    from prbench.validation import validate_config

    for role in ("policy_user", "pairwise_user", "pointwise_user", "rubric_user"):
        (tmp_path / f"{role}.txt").write_text("{question}")
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    cfg["prompts"] = {"templates": str(tmp_path)}
    # a generative RM (the demo policy asked for "Result: A|B"): the reward prompt is read for it
    cfg["reward_models"]["policy_judge"] = {"kind": "generative_pairwise", "from_policy": "demo_policy",
                                            "use_profile": True}
    cfg["demo_training"]["policy"]["judge_examples"] = True  # the policy judges: it trains on judge examples
    validate_config(yaml.safe_load(yaml.safe_dump(cfg)))  # round_robin reads no reward prompt
    cfg["reward"] = {"generative": "pointwise"}
    with pytest.raises(ConfigError, match="reward.generative"):
        validate_config(cfg)
    (tmp_path / "reward_user.txt").write_text("{question} {answer}")
    validate_config(cfg)


def test_strip_answers_key_reaches_the_rubric_prompt_and_the_reward_input():
    """prompts.strip_answers: true strips a generated answer for the judge and the RM; false (the
    authors') keeps it as generated."""
    keep = P.load_templates({"templates": "default", "strip_answers": False})
    strip = P.load_templates({"templates": "default"})
    answer = "  Try cycling.\n"
    assert P.answer_text(answer, keep) == answer and P.answer_text(answer, strip) == "Try cycling."
    user = lambda tpl: P.rubric_messages("Q?", answer, ["Aspect"], tpl, "joined", True)[-1]["content"]  # noqa: E731
    assert answer in user(keep) and answer not in user(strip) and "Try cycling." in user(strip)
    P.configure({"templates": "default", "strip_answers": False})
    assert P.answer_text(answer) == answer
    P.configure({"templates": "default"})
    assert P.answer_text(answer) == "Try cycling."


# ---- the generative reward's prompt per stage (reward.generative_prompt_bon / _ppo) ---------------
def test_reward_prompt_per_stage_in_the_spec(lm_08):
    """BoN reads generative_prompt_bon, PPO and GRPO generative_prompt_ppo; the project's `reward`
    adds no key; without a stage (validation) or under round_robin nothing is added."""
    spec = _spec(lm_08)
    reward = {"generative": "pointwise", "generative_prompt_bon": "rubric", "generative_prompt_ppo": "policy"}
    assert reward_spec(spec, reward, "bon")["reward_prompt"] == "rubric"
    assert reward_spec(spec, reward, "ppo")["reward_prompt"] == "policy"
    assert reward_spec(spec, reward, "grpo")["reward_prompt"] == "policy"
    assert "reward_prompt" not in reward_spec(spec, reward)
    assert "reward_prompt" not in reward_spec(spec, {"generative": "pointwise"}, "bon")
    assert reward_spec(spec, {**reward, "generative": "round_robin"}, "ppo") == spec
    cls = {"name": "c", "kind": "classifier", "path": "x", "use_profile": False}
    assert "reward_prompt" not in reward_spec(cls, reward, "bon")
    with pytest.raises(ValueError, match="reward stage"):
        reward_spec(spec, reward, "dpo")
    with pytest.raises(ConfigError, match="generative_prompt_ppo"):
        reward_spec(spec, {"generative": "pointwise", "generative_prompt_ppo": "sample"}, "ppo")


def test_reward_prompt_values_change_what_the_scorer_sees():
    """Each value of the keys renders another prompt from the same request: `reward` and `rubric`
    show the answer, `policy` (the authors' PPO prompt) does not, whatever the answer; `rubric` leaves
    {aspects} unfilled (judge-only: no aspect reaches an RM) and shows no profile."""
    tpl = P.load_templates({"templates": "default"})
    q, prof, cats = "How do I start oil painting?", ("I paint birds at dawn.", "I love ochre."), ("Art", "Art")
    answer = "Buy three tubes of ANSWERTOKEN paint."

    def user(prompt, a=answer):
        msgs = P.reward_prompt_messages(prompt, q, a, prof, True, None, cats, templates=tpl)
        assert msgs[0] == {"role": "system", "content": tpl.get("reward_system")}  # the judge's system turn
        return msgs[-1]["content"]

    reward, rubric, policy = user("reward"), user("rubric"), user("policy")
    assert len({reward, rubric, policy}) == 3
    assert q in reward and q in rubric and q in policy
    assert answer in reward and answer in rubric and answer not in policy
    assert "I paint birds at dawn." in reward and "I paint birds at dawn." in policy
    assert "I paint birds at dawn." not in rubric and "{aspects}" in rubric
    assert reward == P.reward_judge_messages(q, answer, prof, True, None, cats, templates=tpl)[-1]["content"]
    assert policy == P.fill(tpl.get("policy_user"), question=q, profile=P.render_profile(prof, cats, None,
                                                                                     tpl.post_format))
    assert user("policy", "another answer") == policy and user("reward", "another answer") != reward
    assert P.response_blind("policy", tpl) and not P.response_blind("rubric", tpl) \
        and not P.response_blind("reward", tpl)
    with pytest.raises(ValueError, match="generative_prompt"):
        P.reward_prompt_messages("sample", q, answer, templates=tpl)


@pytest.mark.parametrize("prompt,blind", [("reward", False), ("rubric", False), ("policy", True)])
def test_reward_prompt_reaches_the_model_and_the_blind_one_warns(lm_08, prompt, blind, caplog):
    """The prompt ids the scorer generates from hold the answer unless the prompt is `policy`, which
    logs that the reward cannot depend on the response (and says so in the diagnostics)."""
    P.configure({"templates": "default"})
    reward = {"generative": "pointwise", "generative_prompt_bon": prompt, "generative_prompt_ppo": prompt}
    rm = load_reward_model(reward_spec(_spec(lm_08), reward, "ppo"))
    seen = []
    generate = rm._generate
    rm._generate = lambda ids, **kw: seen.extend(ids) or generate(ids, **kw)
    reqs = [ScoreRequest("What should I cook tonight?", f"Cook dish number {i} ANSWERTOKEN.", ("I like rice.",))
            for i in range(2)]
    with caplog.at_level("WARNING", logger="prbench.rms.generative"):
        out = rm.score(reqs)
        rm.score(reqs)
    texts = [rm.tokenizer.decode(ids) for ids in seen]
    assert all("What should I cook tonight?" in t for t in texts)
    assert all(("ANSWERTOKEN" in t) is not blind for t in texts)
    assert (texts[0] == texts[1]) is blind  # response-blind: both answers give the scorer one input
    warned = [r for r in caplog.records if "cannot depend on the response" in r.getMessage()]
    assert len(warned) == (1 if blind else 0)  # once per RM
    assert rm.diagnostics()["unit_prompt"] == prompt and rm.diagnostics()["unit_response_blind"] is blind
    assert out.scores.shape == (2,) and ((out.scores >= 0) & (out.scores <= 1)).all()
    if blind:  # one input, greedy: one score for both answers
        assert out.scores[0] == out.scores[1]
