"""Prefix-cached scoring (rms/prefix.py) equals full-sequence scoring, whatever the batching.

Tiny decoder classifiers of the Llama, Qwen2 and Qwen3 architectures with tokenizers carrying
each family's real special tokens and chat-template structure (Llama-3 header/eot tokens, Qwen's
ChatML, Qwen3's empty think block in the last assistant turn), built locally.
"""
from __future__ import annotations

import numpy as np
import pytest
from rm_helpers import make_pairs, minilm_classifier

from prbench.prompts import ScoreRequest
from prbench.replica.rms import build_seqcls_replica
from prbench.rms import load_reward_model
from prbench.rms.prefix import PrefixScorer, common_prefix_len, read_position, unsupported_reason


def decoder_classifier(path, family: str, num_labels: int = 1, seed: int = 0):
    """A tiny decoder classifier replica (prbench.replica.rms): Llama-3, Qwen2 (ChatML) or Qwen3
    (ChatML with the think block in the last assistant turn)."""
    return build_seqcls_replica(path, {"llama": "llama3"}.get(family, family), seed=seed, hidden=32,
                                num_labels=num_labels)


def _requests(n_pairs=12, answers_per_prompt=1):
    rows = make_pairs(n_pairs, seed=3)
    reqs = []
    for r in rows:
        for s in ("chosen", "rejected"):
            for j in range(answers_per_prompt):
                reqs.append(ScoreRequest(r["question"], r[s] + (" really" * j), tuple(r["profile"])))
    return reqs


def _rm(path, **kw):
    return load_reward_model({"name": "t", "kind": "classifier", "path": str(path), "use_profile": True,
                              "progress": False, **kw})


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_prefix_scores_equal_full_sequence_scores(tmp_path, family):
    rm = _rm(decoder_classifier(tmp_path / family, family))
    assert rm.prefix is not None, "a decoder classifier gets the prefix scorer"
    reqs = _requests(answers_per_prompt=3)
    feats = rm.encode(reqs)
    # the shared prefix is the rendered prompt: it stops before the answer's tokens
    assert all(0 < f["prefix_len"] < len(f["input_ids"]) for f in feats)
    full = rm.score_full(feats)
    cached = rm.score(reqs).scores
    assert np.max(np.abs(full - cached)) <= 1e-4
    assert np.ptp(full) > 1e-3, "scores must differ between inputs for the comparison to mean anything"
    d = rm.diagnostics()
    assert d["prefix_cache"] and d["prefix_groups"] == 12  # one run per unique prompt (12 pairs, 12 prompts)
    assert d["prefix_tokens"] + d["continuation_tokens"] < sum(len(f["input_ids"]) for f in feats)


def test_two_label_head_reads_softmax_of_last_class(tmp_path):
    rm = _rm(decoder_classifier(tmp_path / "m", "qwen2", num_labels=2))
    reqs = _requests(6)
    feats = rm.encode(reqs)
    cached = rm.score(reqs).scores
    assert np.all((cached > 0) & (cached < 1))
    assert np.max(np.abs(rm.score_full(feats) - cached)) <= 1e-4


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_prefix_scores_do_not_depend_on_batching_or_order(tmp_path, family):
    rm = _rm(decoder_classifier(tmp_path / family, family))
    reqs = _requests(10, answers_per_prompt=2)
    ref = rm.score(reqs).scores
    for budget, max_bs in ((10**6, None), (300, None), (10**6, 1)):
        rm.prefix.max_tokens_per_batch, rm.prefix.max_batch_size = budget, max_bs
        np.testing.assert_allclose(rm.score(reqs).scores, ref, rtol=0, atol=1e-5)
    order = np.random.default_rng(0).permutation(len(reqs))
    shuffled = rm.score([reqs[i] for i in order]).scores
    np.testing.assert_allclose(shuffled, ref[order], rtol=0, atol=1e-5)
    # one request alone scores as it does among others
    alone = np.array([rm.score([r]).scores[0] for r in reqs[:5]])
    np.testing.assert_allclose(alone, ref[:5], rtol=0, atol=1e-5)


def test_profile_blind_rm_shares_one_prefix_per_question(tmp_path):
    rm = load_reward_model({"name": "t", "kind": "classifier", "path": str(decoder_classifier(tmp_path / "m", "llama")),
                            "use_profile": False, "progress": False})
    q = "Any hobby advice for me?"
    reqs = [ScoreRequest(q, f"You could try cooking {'very ' * i}soon.", ("I like the oven.",)) for i in range(16)]
    feats = rm.encode(reqs)
    full = rm.score_full(feats)
    np.testing.assert_allclose(rm.score(reqs).scores, full, rtol=0, atol=1e-4)
    assert rm.diagnostics()["prefix_groups"] == 1
    n_full, n_cached = rm.prefix.tokens_saved(feats)
    p = feats[0]["prefix_len"]
    assert p > 0 and all(f["prefix_len"] == p for f in feats)
    assert n_cached == n_full - (len(reqs) - 1) * p  # the shared prompt runs once instead of 16 times


def test_option_off_and_encoders_use_full_sequences(tmp_path, caplog):
    rm = _rm(decoder_classifier(tmp_path / "m", "qwen2"), prefix_cache=False)
    assert rm.prefix is None and rm.diagnostics()["prefix_cache"] is False
    with caplog.at_level("INFO", logger="prbench.rms.classifier"):
        enc = _rm(minilm_classifier(tmp_path / "minilm"))
    assert enc.prefix is None
    assert "prefix caching off" in caplog.text and "text-pair encoder" in caplog.text
    reqs = _requests(4)
    feats = enc.encode(reqs)
    assert "prefix_len" not in feats[0]
    np.testing.assert_allclose(enc.score(reqs).scores, enc.score_full(feats), rtol=0, atol=0)


def test_unsupported_reason_names_the_cause(tmp_path):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(minilm_classifier(tmp_path / "minilm"))
    assert "model_type 'bert'" in unsupported_reason(model)
    llama = AutoModelForSequenceClassification.from_pretrained(decoder_classifier(tmp_path / "l", "llama"))
    assert unsupported_reason(llama) is None
    llama.config.use_sliding_window, llama.config.sliding_window = True, 64
    assert "sliding-window" in unsupported_reason(llama)


def test_read_position_and_split_never_swallow_the_read_token():
    assert common_prefix_len([1, 2, 3], [1, 2, 4]) == 2
    assert read_position([5, 6, 0, 0], pad_token_id=0) == 1
    assert read_position([0, 0], pad_token_id=0) == 1
    scorer = PrefixScorer.__new__(PrefixScorer)
    scorer.pad_token_id = 0
    # the pad id ends the content (pad == eos models): the read token stays in the continuation
    prefix, cont, read = scorer.split({"input_ids": [7, 8, 9, 0], "prefix_len": 4})
    assert prefix == (7, 8) and cont == [9, 0] and read == 0
