"""Adapters on hand-written fixtures in each real schema (tests/fixtures/, from the documented formats)."""
from pathlib import Path

import pytest

from prbench.data import rewardbench, rmbench
from prbench.data.checks import DropLog
from prbench.data.prepare import in_holdout, prepare_baseline, prepare_personalized
from prbench.data.retrieval import bow_embed
from prbench.data.sources import is_local
from prbench.io import read_json, read_jsonl

FIX = Path(__file__).parent / "fixtures"
CANONICAL_KEYS = {"pair_id", "benchmark", "subset", "section", "question_id", "question", "profile", "chosen",
                  "rejected"}
# the personalized benchmark also carries each retrieved post's category, parallel to `profile`
PERS_KEYS = CANONICAL_KEYS | {"profile_categories"}


def _outputs(tmp_path, names=("benchmark", "judge_keys", "train", "prompts_train", "prompts_eval", "report")):
    ext = {"report": "json"}
    return {n: str(tmp_path / f"{n}.{ext.get(n, 'jsonl')}") for n in names}


def _pers_cfg(**kw):
    cfg = {"source": str(FIX / "personalized"), "subsets": ["Art_and_Entertainment", "Society_and_Culture"],
           "split": "test", "train_split": None, "holdout_fraction": 0.5}
    cfg.update(kw)
    return cfg


RETR = {"model": "bow", "pooling": "mean", "top_k": 2}


def test_is_local():
    assert is_local("results/demo/raw/x")
    assert is_local("./data") and is_local("/abs/path")
    assert is_local(str(FIX))  # exists
    assert not is_local("QiyaoMa/Personalized-RewardBench")


def test_personalized_canonical_judge_keys_and_prompts(tmp_path):
    out = _outputs(tmp_path)
    report = prepare_personalized(_pers_cfg(), RETR, seed=0, outputs=out, embed=bow_embed)
    rows = read_jsonl(out["benchmark"])
    assert len(rows) == 4
    for r in rows:
        assert set(r) == PERS_KEYS
        assert len(r["profile_categories"]) == len(r["profile"])
        assert r["benchmark"] == "personalized" and r["section"] == r["subset"]
        assert r["question_id"] == r["pair_id"]
        assert len(r["profile"]) <= 2
    # the same raw id in two subsets stays two distinct pairs
    ids = [r["pair_id"] for r in rows]
    assert "Art_and_Entertainment/ae-0001" in ids and "Society_and_Culture/ae-0001" in ids
    first = next(r for r in rows if r["pair_id"] == "Art_and_Entertainment/ae-0001")
    # retrieval ranks the film posts above bread / train tickets for a film question
    assert all("film" in p for p in first["profile"])
    # categories follow their posts through the ranking (the film posts are Art_and_Entertainment)
    assert first["profile_categories"] == ["Art_and_Entertainment", "Art_and_Entertainment"]
    empty = next(r for r in rows if r["pair_id"].endswith("ae-0003"))
    assert empty["profile"] == []
    keys = read_jsonl(out["judge_keys"])
    assert {k["pair_id"] for k in keys} == set(ids)
    k1 = next(k for k in keys if k["pair_id"] == "Art_and_Entertainment/ae-0001")
    assert k1["rubric_aspects"][0]["aspect"] == "Prefers classic black-and-white cinema"
    assert set(k1) == {"pair_id", "question_id", "subset", "rubric_aspects", "narrative"}
    # no train split: empty train file, prompts split by hashed id, disjoint and complete
    assert read_jsonl(out["train"]) == []
    ptrain, peval = read_jsonl(out["prompts_train"]), read_jsonl(out["prompts_eval"])
    assert {p["question_id"] for p in ptrain} | {p["question_id"] for p in peval} == set(ids)
    assert not ({p["question_id"] for p in ptrain} & {p["question_id"] for p in peval})
    for p in peval:
        assert in_holdout(0, p["question_id"], 0.5)
        assert set(p) == {"question_id", "subset", "question", "profile", "profile_categories"}
    rep = read_json(out["report"])
    assert rep["splits"]["test"]["read"] == 4 and rep["splits"]["test"]["kept"] == 4
    assert rep["train_note"] and report["prompts"]["eval"] == len(peval)
    assert any("empty profile" in n for n in rep["splits"]["test"]["notes"])


def test_personalized_train_split_feeds_train_files(tmp_path):
    src = tmp_path / "src"
    for sub in ("Art_and_Entertainment",):
        (src / sub).mkdir(parents=True)
        lines = (FIX / "personalized" / sub / "test.jsonl").read_text().splitlines()
        (src / sub / "test.jsonl").write_text("\n".join(lines[:2]) + "\n")
        (src / sub / "train.jsonl").write_text(lines[2] + "\n")
    out = _outputs(tmp_path)
    prepare_personalized(_pers_cfg(source=str(src), subsets=["Art_and_Entertainment"], train_split="train"),
                         RETR, seed=0, outputs=out, embed=bow_embed)
    assert [r["pair_id"] for r in read_jsonl(out["train"])] == ["Art_and_Entertainment/ae-0003"]
    assert [p["question_id"] for p in read_jsonl(out["prompts_train"])] == ["Art_and_Entertainment/ae-0003"]
    assert len(read_jsonl(out["prompts_eval"])) == 2


def test_holdout_is_deterministic_and_roughly_fractional():
    ids = [f"q{i}" for i in range(2000)]
    a = [in_holdout(3, i, 0.3) for i in ids]
    assert a == [in_holdout(3, i, 0.3) for i in ids]
    assert 0.26 < sum(a) / len(a) < 0.34
    assert a != [in_holdout(4, i, 0.3) for i in ids]


def test_rewardbench_sections_and_unknown_subset(tmp_path):
    drops = DropLog("rb")
    pairs = rewardbench.load_pairs(str(FIX / "rewardbench"), "filtered", "rewardbench", drops)
    by_id = {p["pair_id"]: p for p in pairs}
    assert by_id["30"]["section"] == "chat"
    assert by_id["1200"]["section"] == "chat_hard" and by_id["500"]["section"] == "chat_hard"
    assert by_id["2000"]["section"] == "safety"
    assert by_id["3000"]["section"] == "reasoning" and by_id["4000"]["section"] == "reasoning"
    assert all(set(p) == CANONICAL_KEYS and p["profile"] == [] for p in pairs)
    assert by_id["30"]["question"] == "What is the capital of France?"
    # an unknown subset is kept as 'other' and reported, not silently regrouped
    rows = [("f.jsonl", 1, {"id": 1, "prompt": "q", "chosen": "a", "rejected": "b", "chosen_model": "m",
                            "rejected_model": "n", "subset": "brand-new-subset"})]
    d2 = DropLog("rb2")
    (p,) = rewardbench.load_pairs("x", "filtered", "rb", d2, rows=rows)
    assert p["section"] == "other" and "brand-new-subset" in d2.notes[0]


def test_rmbench_style_matrix(tmp_path):
    drops = DropLog("rm")
    pairs = rmbench.load_pairs(str(FIX / "rmbench"), "train", "rmbench", drops)
    assert len(pairs) == 18 and drops.read == 18 and drops.kept == 18
    cat = [p for p in pairs if p["question_id"] == "chat/1"]
    sections = [p["section"] for p in cat]
    assert sections.count("hard") == 3 and sections.count("normal") == 3 and sections.count("easy") == 3
    hard = next(p for p in cat if p["pair_id"] == "chat/1/c0r2")
    # hard: the concise chosen answer against the markdown rejected answer (RM-Bench upper triangle)
    assert hard["section"] == "hard" and hard["chosen"] == "Quantum superposition."
    assert hard["rejected"].startswith("## Answer") and "Entanglement" in hard["rejected"]
    easy = next(p for p in cat if p["pair_id"] == "chat/1/c2r0")
    assert easy["section"] == "easy" and easy["rejected"] == "Quantum entanglement."
    assert {p["subset"] for p in pairs} == {"chat", "math"}


def test_prepare_baseline_writes_report_and_train(tmp_path):
    out = _outputs(tmp_path, ("benchmark", "train", "report"))
    rep = prepare_baseline("rb", {"kind": "rewardbench", "source": str(FIX / "rewardbench"), "split": "filtered",
                                  "train_split": None}, out)
    assert len(read_jsonl(out["benchmark"])) == 6 and read_jsonl(out["train"]) == []
    assert rep["pairs_per_section"] == {"chat": 1, "chat_hard": 2, "safety": 1, "reasoning": 2}
    assert read_json(out["report"])["splits"]["filtered"]["kept"] == 6
    with pytest.raises(ValueError, match="data.baselines.x.kind"):
        prepare_baseline("x", {"kind": "nope", "source": "a"}, out)


def test_missing_local_source_names_config_key(tmp_path):
    from prbench.data.checks import DataError

    out = _outputs(tmp_path, ("benchmark", "train", "report"))
    with pytest.raises(DataError, match=r"data.baselines.rb.source.*filtered"):
        prepare_baseline("rb", {"kind": "rewardbench", "source": str(tmp_path / "nowhere"), "split": "filtered"}, out)
