"""The downstream prompt source (config key data.personalized.downstream, LaMP-QA schema):
PPO trains on its train split, BoN/PPO evaluate on all of its eval questions, judge keys go to
the judge-key file only, and no evaluation question ever reaches PPO training."""
import json
import re
from pathlib import Path

import pytest
from helpers import REPO

from prbench.data.checks import DataError
from prbench.data.prepare import prepare_personalized
from prbench.data.retrieval import bow_embed
from prbench.io import read_json, read_jsonl

FIX = REPO / "tests" / "fixtures" / "personalized"
RETR = {"model": "bow", "pooling": "mean", "top_k": 2}
SUB = "Art_and_Entertainment"


def _lampqa_row(i, split, aspects=True):
    row = {"id": f"{split}-{i}", "question": f"Which {split} film number {i} should I watch?",
           "profile": [{"id": "p1", "category": "Food", "text": "Tried a ramen place."},
                       {"id": "p2", "category": "Movies", "text": f"I adore film noir, film {i}."}],
           "category": SUB}
    if aspects:
        row["rubric_aspects"] = [{"aspect": f"likes noir {i}", "evidence": "p2", "reason": "post"}]
        row["narrative"] = f"SECRET narrative {split} {i}"
    return row


def _write(folder: Path, split: str, rows):
    (folder / SUB).mkdir(parents=True, exist_ok=True)
    (folder / SUB / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _outputs(tmp_path):
    names = ("benchmark", "judge_keys", "train", "prompts_train", "prompts_eval", "report")
    return {n: str(tmp_path / f"{n}.{'json' if n == 'report' else 'jsonl'}") for n in names}


def _cfg(ds):
    return {"source": str(FIX), "subsets": [SUB], "split": "test", "train_split": None,
            "holdout_fraction": 0.5, "downstream": ds}


def test_downstream_source_feeds_prompts_and_judge_keys(tmp_path):
    ds = tmp_path / "lampqa"
    _write(ds, "train", [_lampqa_row(i, "train", aspects=False) for i in range(5)])  # train: no judge keys needed
    _write(ds, "test", [_lampqa_row(i, "test") for i in range(3)])
    out = _outputs(tmp_path)
    rep = prepare_personalized(_cfg({"source": str(ds), "train_split": "train", "eval_split": "test"}), RETR,
                               seed=0, outputs=out, embed=bow_embed)
    ptrain, peval = read_jsonl(out["prompts_train"]), read_jsonl(out["prompts_eval"])
    assert [p["question_id"] for p in ptrain] == [f"{SUB}/train-{i}" for i in range(5)]
    assert [p["question_id"] for p in peval] == [f"{SUB}/test-{i}" for i in range(3)]  # all eval questions
    # ranked by the configured retriever, categories carried with their posts
    assert peval[0]["profile"][0].startswith("I adore film noir")
    assert peval[0]["profile_categories"] == ["Movies", "Food"]
    # judge keys: the benchmark's plus the downstream eval questions'; never in a prompt file
    keys = {k["question_id"]: k for k in read_jsonl(out["judge_keys"])}
    bench_ids = {r["pair_id"] for r in read_jsonl(out["benchmark"])}
    assert set(keys) == bench_ids | {p["question_id"] for p in peval}
    assert keys[f"{SUB}/test-1"]["rubric_aspects"][0]["aspect"] == "likes noir 1"
    for name in ("prompts_train", "prompts_eval", "benchmark"):
        assert "SECRET" not in Path(out[name]).read_text()
    assert rep["prompts"]["mode"].startswith("downstream source")
    assert read_json(out["report"])["prompts"]["downstream_splits"]["test"]["kept"] == 3


def test_eval_question_in_train_split_is_an_error(tmp_path):
    ds = tmp_path / "lampqa"
    _write(ds, "train", [_lampqa_row(0, "train"), _lampqa_row(1, "test")])  # leaked test question
    _write(ds, "test", [_lampqa_row(1, "test")])
    with pytest.raises(DataError, match="share 1 question ids"):
        prepare_personalized(_cfg({"source": str(ds)}), RETR, seed=0, outputs=_outputs(tmp_path), embed=bow_embed)


def test_conflicting_judge_keys_are_an_error(tmp_path):
    ds = tmp_path / "lampqa"
    row = _lampqa_row(0, "test")
    row["id"] = "ae-0001"  # same id as a benchmark question, other rubric
    _write(ds, "train", [_lampqa_row(0, "train")])
    _write(ds, "test", [row])
    with pytest.raises(DataError, match="other rubric aspects"):
        prepare_personalized(_cfg({"source": str(ds)}), RETR, seed=0, outputs=_outputs(tmp_path), embed=bow_embed)


def test_no_test_question_reaches_ppo_training(tmp_path):
    """The demo/test configs' shape: the demo world's train split plays LaMP-QA's train split.
    PPO's training prompts (rule train_ppo reads prompts/train.jsonl) hold no question id or
    text of the evaluation prompts or of the benchmark."""
    from prbench.data.demo_world import generate
    from prbench.validation import load_config

    cfg = load_config(str(REPO / "configs" / "test.yaml"))
    ds = cfg["data"]["personalized"]["downstream"]
    assert ds["source"] == cfg["data"]["personalized"]["source"] and ds["train_split"] == "train"
    raw = tmp_path / "raw"
    generate(cfg, str(raw / "personalized"), {"general": str(raw / "general")})
    data = dict(cfg["data"]["personalized"], source=str(raw / "personalized"),
                downstream=dict(ds, source=str(raw / "personalized")))
    out = _outputs(tmp_path)
    prepare_personalized(data, {"model": "bow", "top_k": 4}, seed=0, outputs=out, embed=bow_embed)
    train = read_jsonl(out["prompts_train"])
    held = read_jsonl(out["prompts_eval"]) + read_jsonl(out["benchmark"])
    assert train and held
    assert not {p["question_id"] for p in train} & {p["question_id"] for p in held}
    # the demo world draws question wordings from templates, so a wording recurs across users;
    # a question here is a user's question: (text, that user's retrieved posts) never recurs
    def asked(rows):
        return {(p["question"], tuple(p["profile"])) for p in rows}

    assert not asked(train) & asked(held)
    # and the PPO training rule reads that file, evaluation rules the eval file
    smk = (REPO / "rules" / "ppo.smk").read_text()
    train_rule = smk[smk.index("rule train_ppo:"):]
    train_rule = train_rule[:train_rule.index("\nrule ") if "\nrule " in train_rule else None]
    assert re.search(r'prompts="results/data/prompts/train.jsonl"', train_rule)
    assert "prompts/eval.jsonl" not in train_rule


def test_bon_headline_estimator_is_the_figure_signal():
    """bon.headline_estimator picks BoN's headline signal (at the largest k); default `expected`;
    an unknown name is a clear error naming the key; the registry passes it to the analysis."""
    import pytest as _pytest

    from prbench.downstream import figure_signals
    from prbench.downstream.bon import figure_signal

    assert figure_signal({"bon": {"ks": [1, 4, 2]}}) == {"estimator": "expected", "k": 4}
    cfg = {"bon": {"ks": [1, 8], "headline_estimator": "first_k"}}
    assert figure_signal(cfg) == {"estimator": "first_k", "k": 8}
    assert figure_signals(cfg, ["bon"])["bon"] == {"estimator": "first_k", "k": 8}
    with _pytest.raises(ValueError, match="bon.headline_estimator"):
        figure_signal({"bon": {"ks": [1], "headline_estimator": "mean"}})


def test_config_yaml_headline_estimator_is_the_authors_rule():
    import yaml

    from prbench.config import validate_schema

    cfg = validate_schema(yaml.safe_load(open("config.yaml")))
    assert cfg["bon"]["headline_estimator"] == "first_k"
    demo = validate_schema(yaml.safe_load(open("configs/demo.yaml")))
    assert demo["bon"]["headline_estimator"] == "expected"  # the schema default
