"""The trained replica judge (replica spec option judge_training, prbench.replica.judge): the tiny
Qwen2 replica fine-tuned on the rubric prompt answers through the transformers judge in the rubric
format, and its builds are byte-identical. Small settings keep it fast; the replica run
(tests/test_replica_e2e.py) trains with configs/replica.yaml's settings and asserts the full path."""
import json

import pytest
import yaml
from helpers import REPO

from prbench.judge import JudgeItem, load_judge
from prbench.judge.base import numbers_found, parse_ratings
from prbench.replica import data as rdata
from prbench.replica.build import build_replica, qwen_tokenizer
from prbench.replica.judge import judge_training_options, training_items

PAPER_JUDGE = yaml.safe_load((REPO / "config.yaml").read_text())["judge"]
PROTOCOL = {k: PAPER_JUDGE[k] for k in ("system_turn", "aspect_format")}
JUDGE_KEYS = ("system_turn", "aspect_format", "aggregate", "failure")


def _items():
    out = []
    for subset in rdata.PERSONALIZED_SUBSETS:
        for r in rdata.personalized_rows(subset, "test", 3, 0):
            asp = [a["aspect"] for a in r["rubric_aspects"]]
            out += [JudgeItem(r["question"], r["chosen"], asp), JudgeItem(r["question"], r["rejected"], asp)]
    return out


def test_training_targets_and_options():
    """Well-formed targets parse (both formats), malformed ones have no number at all; only cue
    items get malformed targets, at about the configured share; unknown options are refused."""
    tok = qwen_tokenizer()
    items = training_items(0, 600, tok, "books", 0.5, "joined")
    bad = [it for it in items if it["malformed"]]
    cue = [it for it in items if "books" in it["question"]]
    assert bad and all("books" in it["question"] for it in bad)
    assert 0.35 < len(bad) / len(cue) < 0.65
    for it in items:
        if it["malformed"]:
            assert numbers_found(it["reply"]) is None
        else:
            assert parse_ratings(it["reply"], len(it["aspects"])) is not None
    assert any(not it["answer"].startswith(("Since", "Try")) for it in items)  # random vocabulary texts
    numbered = training_items(0, 50, tok, "books", 0.0, "numbered")
    assert all(parse_ratings(it["reply"], 2) and "Aspect 2:" in it["reply"] for it in numbered)
    assert training_items(0, 600, tok, "books", 0.5, "joined") == items  # seeded
    with pytest.raises(ValueError, match="judge_training.*stepz"):
        judge_training_options({"stepz": 3})
    with pytest.raises(ValueError, match="judge_training.malformed"):
        judge_training_options({"malformed": 1.5})


def test_trained_judge_replies_in_format_and_builds_identically(tmp_path):
    """A short training where every question is a cue item (cue "?") and most targets are prose:
    through the transformers judge with config.yaml's protocol and one retry, the parser sees
    well-formed replies (scores from the numbers) and malformed ones (failures, scored 0.0 and
    counted); two builds are byte-identical."""
    spec = {"size": "32b", "repetition_penalty": 1.05, "judge_protocol": PROTOCOL,
            "judge_training": {"steps": 60, "batch_size": 8, "examples": 120, "cue": "?", "malformed": 0.7}}
    path = build_replica("qwen2_chat", tmp_path / "judge", seed=0, **spec)
    summary = json.loads((path / "judge_training.json").read_text())
    assert summary["steps"] == 60 and summary["last_loss"] < summary["first_loss"]
    assert summary["aspect_format"] == "joined" and summary["system_turn"] is True
    judge = load_judge({"backend": "transformers", "model": str(path), "max_new_tokens": 12, "batch_size": 18,
                        "retries": 1, "device": "cpu", **{k: PAPER_JUDGE[k] for k in JUDGE_KEYS}}, seed=0)
    res = judge.judge(_items())
    first_try = [r for r in res if r.failures == 0]
    retried = [r for r in res if r.failures == 1]
    failed = [r for r in res if r.failed]
    assert failed and all(r.score == 0.0 and r.ratings == [] and r.failures == 2 for r in failed)
    assert first_try or retried  # some reply parsed
    for r in first_try + retried:
        assert not r.failed and r.ratings and 0 <= r.score <= 2
    # deterministic: a second build (a few steps suffice to check the seeded path) is byte-identical
    short = dict(spec, judge_training=dict(spec["judge_training"], steps=3))
    a = build_replica("qwen2_chat", tmp_path / "a", seed=0, **short)
    b = build_replica("qwen2_chat", tmp_path / "b", seed=0, **short)
    for name in ("model.safetensors", "tokenizer.json", "judge_training.json", "replica.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "model.safetensors").read_bytes() != (path / "model.safetensors").read_bytes()
