"""The judge's protocol keys (judge.system_turn, aspect_format, max_new_tokens, aggregate, failure,
retries): each one changes what the LLM judge is asked, how its reply is read, or its judge id, and
a failed parse is counted whichever failure rule scores it. LLM replies come from a script."""
import copy
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

import prbench.judge as J
from prbench import prompts as P
from prbench.config import ConfigError
from prbench.downstream.bon.curves import bon_curves
from prbench.downstream.bon.stages import judge_bon
from prbench.downstream.evaluation import policy_table_rows
from prbench.io import read_jsonl, write_jsonl
from prbench.validation import validate_config

ROOT = Path(__file__).resolve().parents[1]


class Scripted(J._LLMJudge):
    """An LLM judge whose replies come from a script (attempt -> {answer: reply})."""

    def __init__(self, replies, retries=0, **protocol):
        self.replies, self.retries, self.seed = replies, retries, 0
        self.judge_id = "scripted" + self._protocol(**{"aspect_format": "numbered", "system_turn": False,
                                                        "aggregate": "per_aspect", "failure": "exclude", **protocol})
        self.tokenizer, self.calls = None, []

    def _prompt(self, item):
        return item.answer

    def _generate(self, prompts, attempt, seeds):
        self.calls.append(attempt)
        return [self.replies.get(attempt, {}).get(p, "no idea") for p in prompts]


def items(*answers, n=3):
    return [J.JudgeItem("q", a, [f"aspect {i}" for i in range(n)]) for a in answers]


def test_numbers_found_reads_the_first_list_else_every_number():
    assert J.base.numbers_found("[2, 1, 0]") == [2.0, 1.0, 0.0]
    assert J.base.numbers_found("```\n[2,2]\n``` and later [0]") == [2.0, 2.0]  # the first list only
    assert J.base.numbers_found("I'd say 2 then 1.") == [2.0, 1.0]  # no list: every number
    assert J.base.numbers_found("[3, -1, 1.5]") == [3.0, -1.0, 1.5]  # off-scale numbers count too
    assert J.base.numbers_found("[a, b]") is None and J.base.numbers_found("") is None


def test_mean_found_is_the_mean_of_the_numbers_and_ignores_the_aspect_count():
    judge = Scripted({0: {"a": "[2, 1, 0]", "b": "[2, 2]", "c": "Scores: [1, 2, 2, 2] ok", "d": "none"}},
                     aspect_format="joined", aggregate="mean_found", failure="exclude")
    res = judge.judge(items("a", "b", "c", "d"))
    assert [r.score for r in res[:3]] == [1.0, 2.0, np.mean([1, 2, 2, 2])]
    assert res[1].ratings == [2.0, 2.0] and not any(r.failed for r in res[:3])
    assert math.isnan(res[3].score) and res[3].failed and res[3].failures == 1


def test_failure_zero_scores_zero_and_still_counts_the_failure():
    for agg, fmt, good in (("per_aspect", "numbered", "Aspect 1: 0\nAspect 2: 0\nAspect 3: 0"),
                           ("mean_found", "joined", "[0, 0, 0]")):
        judge = Scripted({0: {"good": good, "bad": "cannot rate"}}, aspect_format=fmt, aggregate=agg, failure="zero")
        real, failed = judge.judge(items("good", "bad"))
        assert real.score == 0.0 and not real.failed  # a real zero
        assert failed.score == 0.0 and failed.failed and failed.failures == 1  # a failure scored 0.0, flagged


def test_retries_zero_asks_once_and_retries_resample_only_failures():
    once = Scripted({0: {"x": "nope"}, 1: {"x": "Aspect 1: 2\nAspect 2: 2\nAspect 3: 2"}}, retries=0)
    assert once.judge(items("x"))[0].failed and once.calls == [0]
    twice = Scripted({0: {"x": "nope"}, 1: {"x": "Aspect 1: 2\nAspect 2: 2\nAspect 3: 2"}}, retries=1)
    r = twice.judge(items("x"))[0]
    assert r.score == 2.0 and not r.failed and r.failures == 1 and twice.calls == [0, 1]


def test_mean_found_needs_joined_aspects():
    with pytest.raises(ValueError, match="judge.aggregate: mean_found needs judge.aspect_format joined"):
        Scripted({}, aspect_format="numbered", aggregate="mean_found")
    with pytest.raises(ValueError, match="config key judge.failure"):
        Scripted({}, failure="nan")
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    bad = copy.deepcopy(cfg)
    bad["judge"]["aspect_format"] = "numbered"
    with pytest.raises(ConfigError, match="judge.aggregate: mean_found needs judge.aspect_format: joined"):
        validate_config(bad)


def test_aspect_format_and_system_turn_shape_the_prompt():
    tpl = P.load_templates({"templates": "default"})
    asp = ["likes horror", "short films, ideally"]
    numbered = P.rubric_messages("Which film?", "Watch X.", asp, templates=tpl)
    assert [m["role"] for m in numbered] == ["user"]
    assert "1. likes horror\n2. short films, ideally" in numbered[0]["content"]
    assert "Aspect <number>: <rating>" in numbered[0]["content"]
    joined = P.rubric_messages("Which film?", "Watch X.", asp, templates=tpl, aspect_format="joined",
                               system_turn=True)
    assert [m["role"] for m in joined] == ["system", "user"]
    assert joined[0]["content"] == tpl.get("rubric_system")
    assert "likes horror, short films, ideally" in joined[1]["content"] and "1. likes" not in joined[1]["content"]
    assert "[2, 0, 1]" in joined[1]["content"]  # the joined prompt asks for a bare list


def test_system_turn_without_a_system_template_is_a_config_error(tmp_path):
    for role in ("rubric_user", "policy_user", "pairwise_user", "pointwise_user"):
        (tmp_path / f"{role}.txt").write_text("{question} {answer} {aspects}")
    tpl = P.load_templates({"templates": str(tmp_path)})
    assert len(P.rubric_messages("q", "a", ["x"], templates=tpl)) == 1
    with pytest.raises(FileNotFoundError, match="judge.system_turn: true"):
        P.rubric_messages("q", "a", ["x"], templates=tpl, system_turn=True)
    with pytest.raises(FileNotFoundError, match="rubric_list_user.txt"):
        P.rubric_messages("q", "a", ["x"], templates=tpl, aspect_format="joined")
    P.configure({"templates": str(tmp_path)})
    try:  # the judge refuses at construction, before any model loads
        with pytest.raises(FileNotFoundError, match="judge.system_turn: true"):
            Scripted({}, system_turn=True)
        with pytest.raises(ValueError, match="judge.aspect_format"):
            Scripted({}, aspect_format="bullets")
    finally:
        P.configure(P.FALLBACK_PROMPTS)


def test_every_protocol_setting_is_in_the_judge_id():
    base = Scripted({}).judge_id
    assert base == "scripted" + J.llm._rubric_hash()  # the defaults: the id of earlier runs
    ids = {base, Scripted({}, system_turn=True).judge_id, Scripted({}, aspect_format="joined").judge_id,
           Scripted({}, aspect_format="joined", aggregate="mean_found").judge_id, Scripted({}, failure="zero").judge_id}
    assert len(ids) == 5


def test_failed_flag_survives_the_cache(tmp_path):
    judge = Scripted({0: {"ok": "Aspect 1: 1\nAspect 2: 1\nAspect 3: 1", "bad": "?"}}, failure="zero")
    first = J.judge_items_cached(judge, items("ok", "bad"), tmp_path, "a.jsonl")
    again = J.judge_items_cached(Scripted({}, failure="zero"), items("ok", "bad"), tmp_path, "b.jsonl")
    assert [(r.score, r.failed) for r in first] == [(1.0, False), (0.0, True)] == [(r.score, r.failed) for r in again]
    # a record written before the `failed` field: a null score was a failure
    old = {"key": "k", "judge_id": "x", "score": None, "ratings": [None], "failures": 2}
    assert J.cache._as_result(old).failed and not J.cache._as_result(dict(old, score=1.0, ratings=[1])).failed


def test_zero_scored_failures_reach_the_bon_and_policy_tables(tmp_path):
    samples = [{"question_id": q, "subset": "s", "sample_idx": i, "answer": f"{q}-{i}"}
               for q in ("q1", "q2") for i in range(2)]
    write_jsonl(tmp_path / "samples.jsonl", samples)
    write_jsonl(tmp_path / "prompts.jsonl", [{"question_id": q, "question": f"question {q}"} for q in ("q1", "q2")])
    write_jsonl(tmp_path / "keys.jsonl", [{"question_id": q, "pair_id": q, "rubric_aspects": [{"aspect": "x"}]}
                                          for q in ("q1", "q2")])
    judge = Scripted({0: {"q1-0": "[2]", "q1-1": "[1]", "q2-0": "broken", "q2-1": "[2]"}},
                     aspect_format="joined", aggregate="mean_found", failure="zero")
    report = judge_bon(str(tmp_path / "samples.jsonl"), str(tmp_path / "prompts.jsonl"), str(tmp_path / "keys.jsonl"),
                       {}, 0, str(tmp_path / "cache"), str(tmp_path / "judged.jsonl"), judge=judge)
    judged = read_jsonl(tmp_path / "judged.jsonl")
    assert report["failed"] == 1 and report["nan_scores"] == 0
    assert [(r["score"], r["failed"]) for r in judged] == [(2.0, False), (1.0, False), (0.0, True), (2.0, False)]
    rm = {"r": [{"question_id": s["question_id"], "sample_idx": s["sample_idx"], "score": float(i)}
                for i, s in enumerate(samples)]}
    _, table = bon_curves(samples, judged, rm, [1, 2], 2, "p", n_boot=10)
    assert (table["judge_failed_samples"] == 1).all() and (table["judge_nan_samples"] == 0).all()
    # the trained-policy table: a 0.0-scored failure is in the mean and in judge_failures
    rows = [{"question_id": "q1", "subset": "s", "score": 0.0, "base_score": 1.0, "outcome": 0.0, "judge_failures": 1},
            {"question_id": "q2", "subset": "s", "score": 2.0, "base_score": 1.0, "outcome": 1.0, "judge_failures": 0}]
    write_jsonl(tmp_path / "eval.jsonl", rows)
    t = policy_table_rows({("p", "r"): str(tmp_path / "eval.jsonl")}, n_boot=10, seed=0)
    assert t.loc[0, "mean"] == 1.0 and t.loc[0, "judge_failures"] == 1


def test_prompts_files_can_map_the_list_prompt(tmp_path):
    for role in ("rubric_user", "policy_user", "pairwise_user", "pointwise_user"):
        (tmp_path / f"{role}.txt").write_text("{question} {answer} {aspects}")
    (tmp_path / "evaluation.txt").write_text("Aspects: {aspects}\nQ: {question}\nA: {answer}")
    cfg = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    cfg["prompts"] = {"templates": str(tmp_path), "files": {"rubric_list_user": "evaluation.txt"}}
    validate_config(cfg)  # the schema knows the role
    tpl = P.load_templates(cfg["prompts"])
    (msg,) = P.rubric_messages("q", "a", ["x", "y"], templates=tpl, aspect_format="joined")
    assert msg["content"] == "Aspects: x, y\nQ: q\nA: a"
