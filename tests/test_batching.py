"""Length-bucketed, token-budgeted batching: correctness of the batches and batch-size invariance."""
import random

import numpy as np
import pytest
import torch
from rm_helpers import make_pairs, minilm_classifier, tiny_llama_classifier

from prbench.batching import collate, fixed_size_batches, length_bucketed_batches, padded_tokens, run_batched
from prbench.prompts import ScoreRequest
from prbench.rms import load_reward_model


def _lengths(n=200, seed=0):
    rng = random.Random(seed)
    return [rng.randint(1, 300) for _ in range(n)]


def test_every_item_once_and_budget_respected():
    lengths = _lengths()
    budget = 1024
    batches = length_bucketed_batches(lengths, budget)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for b in batches:
        assert len(b) * max(lengths[i] for i in b) <= budget
    # longest first, lengths non-increasing along the concatenated batches
    seq = [lengths[i] for b in batches for i in b]
    assert seq == sorted(seq, reverse=True)
    assert batches == length_bucketed_batches(lengths, budget)  # deterministic


def test_oversized_item_gets_its_own_batch_and_max_batch_size():
    batches = length_bucketed_batches([5, 50, 5, 5], 20)
    assert [1] in batches
    assert all(len(b) * 5 <= 20 for b in batches if 1 not in b)
    capped = length_bucketed_batches([3] * 10, 10_000, max_batch_size=4)
    assert [len(b) for b in capped] == [4, 4, 2]
    with pytest.raises(ValueError, match="max_tokens_per_batch"):
        length_bucketed_batches([1], 0)


def test_bucketing_pads_much_less_than_fixed_batches():
    lengths = _lengths(400, seed=1)
    bucketed = padded_tokens(lengths, length_bucketed_batches(lengths, 8 * 300))
    naive = padded_tokens(lengths, fixed_size_batches(len(lengths), 8))
    assert bucketed < 0.75 * naive
    assert bucketed >= sum(lengths)


def test_collate_padding_sides():
    feats = [{"input_ids": [5, 6, 7], "token_type_ids": [0, 1, 1]}, {"input_ids": [8], "token_type_ids": [0]}]
    right = collate(feats, pad_token_id=0, padding_side="right")
    assert right["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert right["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert right["token_type_ids"].tolist() == [[0, 1, 1], [0, 0, 0]]
    left = collate(feats, pad_token_id=9, padding_side="left")
    assert left["input_ids"].tolist() == [[5, 6, 7], [9, 9, 8]]
    assert left["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]


def test_run_batched_restores_input_order():
    items = [{"input_ids": [0] * n} for n in (3, 9, 1, 5)]
    batches = length_bucketed_batches([len(x["input_ids"]) for x in items], 10)
    out = run_batched(items, lambda b: [len(items[i]["input_ids"]) * 10 for i in b], batches, progress=False)
    assert out == [30, 90, 10, 50]
    with pytest.raises(RuntimeError, match="outputs"):
        run_batched(items, lambda b: [], batches, progress=False)


@pytest.fixture(scope="module")
def requests_varied():
    rows = make_pairs(24, seed=3)
    return [ScoreRequest(r["question"], r[side], tuple(r["profile"])) for r in rows for side in ("chosen", "rejected")]


@pytest.mark.parametrize("builder", ["llama", "minilm"])
def test_scores_do_not_depend_on_batch_size(tmp_path, requests_varied, builder):
    torch.manual_seed(0)
    path = tiny_llama_classifier(tmp_path / "m") if builder == "llama" else minilm_classifier(tmp_path / "m", layers=1)
    results = {}
    for bs in (1, 16):
        rm = load_reward_model({"name": "t", "kind": "classifier", "path": str(path), "use_profile": True,
                                "max_batch_size": bs, "max_tokens_per_batch": 100_000, "progress": False})
        results[bs] = rm.score(requests_varied).scores
    assert np.isfinite(results[1]).all()
    assert np.ptp(results[1]) > 1e-3  # scores actually vary across inputs
    np.testing.assert_allclose(results[1], results[16], rtol=1e-4, atol=1e-5)
    # and the naive fixed batches (dataset order, padded to the longest) agree too
    rm.fixed_batch_size = 8
    np.testing.assert_allclose(rm.score(requests_varied).scores, results[1], rtol=1e-4, atol=1e-5)
