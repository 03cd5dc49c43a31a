"""A model's generation_config.json never leaks into sampling (prbench.generation).

The model here ships a Qwen2.5-Instruct-style generation config (repetition_penalty 1.1,
top_k 20, top_p 0.8, temperature 0.7, do_sample true). Every generating path must sample
exactly what the project's config says.
"""
from __future__ import annotations

import json

import pytest
from rm_helpers import tiny_tokenizer

from prbench.generation import generation_config, neutralize, sampling_settings, vllm_sampling_kwargs
from prbench.prompts import ScoreRequest

QWEN_STYLE = {"bos_token_id": 1, "do_sample": True, "eos_token_id": [2], "pad_token_id": 0,
              "repetition_penalty": 1.1, "temperature": 0.7, "top_k": 20, "top_p": 0.8}


def _lm(path, with_generation_config: bool):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = tiny_tokenizer()
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # a peaked, repetitive next-token distribution: a penalty visibly changes it
        model.lm_head.weight.mul_(30)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    gc = path / "generation_config.json"
    if with_generation_config:
        gc.write_text(json.dumps({**QWEN_STYLE, "bos_token_id": tok.bos_token_id, "eos_token_id": [tok.eos_token_id],
                                  "pad_token_id": tok.pad_token_id}))
    elif gc.exists():
        gc.unlink()
    return path


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    return _lm(root / "qwen_style", True), _lm(root / "plain", False)


PROMPTS = [{"question_id": f"q{i}", "subset": "Art", "question": q, "profile": ["I like the oven and spices."]}
           for i, q in enumerate(["Any hobby advice for me?", "What should I do this weekend?"])]


def _answers(path, **kw):
    from prbench.downstream.policy import generate_answers, load_policy

    model, tok = load_policy(str(path))
    return generate_answers(model, tok, PROMPTS, max_new_tokens=24, progress=False, **kw)


def test_loaded_policy_keeps_only_token_ids(lms):
    from prbench.downstream.policy import load_policy

    model, _ = load_policy(str(lms[0]))
    g = model.generation_config
    assert g.repetition_penalty is None and g.top_k is None and g.temperature is None and not g.do_sample
    assert g.eos_token_id is not None and g.pad_token_id is not None


@pytest.mark.parametrize("kw", [dict(greedy=True), dict(n=3, temperature=1.0, top_p=0.9, seed=5)])
def test_policy_samples_ignore_the_model_generation_config(lms, kw):
    assert _answers(lms[0], **kw) == _answers(lms[1], **kw)


def test_configured_penalty_does_change_samples(lms):
    """The check above can fail: the same penalty, asked for in the config, changes the output."""
    plain = _answers(lms[1], greedy=True)
    assert _answers(lms[1], greedy=True, repetition_penalty=1.1) != plain
    assert _answers(lms[1], n=2, seed=5, top_k=1) != _answers(lms[1], n=2, seed=5)


def test_trl_style_partial_config_is_not_filled_from_the_model(lms):
    """trl 1.12's PPO passes a GenerationConfig with only some fields set; after neutralize()
    the unset ones are transformers' neutral values, not the model's."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    model = AutoModelForCausalLM.from_pretrained(lms[0])
    partial = GenerationConfig(max_new_tokens=8, temperature=1.0, top_k=0, top_p=1.0, do_sample=True)
    leaked, _ = model._prepare_generation_config(partial)
    assert leaked.repetition_penalty == 1.1  # what happens without the guard
    neutralize(model)
    merged, _ = model._prepare_generation_config(partial)
    assert merged.repetition_penalty == 1.0 and merged.top_k == 0 and merged.top_p == 1.0


def test_explicit_config_sets_every_sampling_field(lms):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(lms[0])  # not neutralized: the explicit config alone must win
    cfg = generation_config(max_new_tokens=8, do_sample=True, pad_token_id=0, eos_token_id=2, temperature=1.0,
                            top_p=0.9)
    merged, _ = model._prepare_generation_config(cfg)
    assert (merged.temperature, merged.top_p, merged.top_k, merged.repetition_penalty) == (1.0, 0.9, 0, 1.0)


def test_generative_rm_and_judge_use_neutral_settings(lms):
    from prbench.judge import TransformersJudge
    from prbench.rms import load_reward_model

    rm = load_reward_model({"name": "g", "kind": "generative_pointwise", "path": str(lms[0]), "use_profile": True,
                            "progress": False, "max_new_tokens": 4})
    out = rm.score([ScoreRequest("Any advice?", "Cook.")])
    assert out.failures == 1  # a random model writes no "Score:" line: counted, not a silent 0
    assert rm.model.generation_config.repetition_penalty is None
    judge = TransformersJudge(str(lms[0]), max_new_tokens=4, batch_size=2)
    assert judge.model.generation_config.repetition_penalty is None and judge.model.generation_config.top_k is None


def test_sampling_settings_and_vllm_kwargs():
    assert sampling_settings(None) == {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "repetition_penalty": 1.0}
    assert sampling_settings({"top_p": 0.9, "temperature": 0.5})["top_p"] == 0.9
    assert vllm_sampling_kwargs(1.0, 0.9)["top_k"] == -1 and vllm_sampling_kwargs(1.0, 0.9, 20)["top_k"] == 20
    assert vllm_sampling_kwargs(1.0, 0.9)["repetition_penalty"] == 1.0
