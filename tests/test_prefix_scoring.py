"""Prefix-cached scoring (rms/prefix.py) equals full-sequence scoring, whatever the batching.

Tiny decoder classifiers of the Llama, Qwen2 and Qwen3 architectures with tokenizers carrying
each family's real special tokens and chat-template structure (Llama-3 header/eot tokens, Qwen's
ChatML, Qwen3's empty think block in the last assistant turn), built locally.
"""
from __future__ import annotations

import numpy as np
import pytest

from prbench.prompts import ScoreRequest
from prbench.rms import load_reward_model
from prbench.rms.prefix import PrefixScorer, common_prefix_len, read_position, unsupported_reason
from rm_helpers import corpus, make_pairs, minilm_classifier

LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Qwen3 style: the last assistant turn carries an (empty) think block the prompt does not have.
QWEN3_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['role'] == 'assistant' and loop.last %}<think>\n\n</think>\n\n{% endif %}"
    "{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
FAMILIES = {
    "llama": dict(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                            "<|eot_id|>", "<|finetune_right_pad_id|>"],
                  bos="<|begin_of_text|>", eos="<|eot_id|>", pad="<|finetune_right_pad_id|>", template=LLAMA3_TEMPLATE),
    "qwen2": dict(specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None, eos="<|im_end|>",
                  pad="<|endoftext|>", template=CHATML_TEMPLATE),
    "qwen3": dict(specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"], bos=None,
                  eos="<|im_end|>", pad="<|endoftext|>", template=QWEN3_TEMPLATE),
}


def family_tokenizer(family: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    f = FAMILIES[family]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=f["specials"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(corpus(), trainer)
    kw = {"bos_token": f["bos"]} if f["bos"] else {}
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token=f["eos"], pad_token=f["pad"], **kw)
    tok.chat_template = f["template"]
    return tok


def decoder_classifier(path, family: str, num_labels: int = 1, seed: int = 0):
    import torch
    from transformers import (LlamaConfig, LlamaForSequenceClassification, Qwen2Config,
                              Qwen2ForSequenceClassification, Qwen3Config, Qwen3ForSequenceClassification)

    tok = family_tokenizer(family)
    cls = {"llama": (LlamaConfig, LlamaForSequenceClassification), "qwen2": (Qwen2Config, Qwen2ForSequenceClassification),
           "qwen3": (Qwen3Config, Qwen3ForSequenceClassification)}[family]
    cfg = cls[0](vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=8, max_position_embeddings=2048, num_labels=num_labels,
                 pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    model = cls[1](cfg)
    with torch.no_grad():
        model.score.weight.normal_(0, 1.0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


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
    assert n_cached < n_full / 2


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
