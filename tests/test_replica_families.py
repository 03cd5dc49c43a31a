"""Replicas of the study's families beyond config.yaml's (prbench.replica.families, the tulu3 family of
prbench.replica.rms): each builds offline with the real model class, head and tokenizer roles, renders
its chat structure, and loads and scores through prbench.rms with its configs/study.yaml kind."""
import json

import numpy as np
import pytest
import yaml
from helpers import REPO

from prbench.prompts import PairRequest, ScoreRequest
from prbench.replica.build import BUILDERS, build_replica
from prbench.rms import load_reward_model

REQS = [ScoreRequest("How do I start painting?", "Buy a watercolor set.", ("I love museums.",), ("Art",)),
        ScoreRequest("Best soup?", "Tomato soup with bread.")]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    specs = {"gemma2": ("gemma_seqcls", {"version": "gemma2"}), "gemma": ("gemma_seqcls", {"version": "gemma"}),
             "deberta": ("deberta_seqcls", {}), "tulu3": ("seqcls", {"family": "tulu3"}),
             "llama3_chat": ("llama3_chat", {})}
    return {name: build_replica(b, root / name, seed=0, **opts) for name, (b, opts) in specs.items()}


def _rm(path, **spec):
    return load_reward_model({"name": "r", "kind": "classifier", "path": str(path), "device": "cpu",
                              "progress": False, **spec})


def _tok(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@pytest.mark.parametrize("name,arch,model_type", [("gemma2", "Gemma2ForSequenceClassification", "gemma2"),
                                                  ("gemma", "GemmaForSequenceClassification", "gemma")])
def test_gemma_replicas(built, name, arch, model_type):
    from transformers import AutoConfig

    path = built[name]
    cfg = AutoConfig.from_pretrained(path)
    assert cfg.architectures == [arch] and cfg.model_type == model_type and cfg.num_labels == 1
    if name == "gemma2":  # soft-capping and the local/global layer pattern of Gemma 2
        assert cfg.attn_logit_softcapping == 50.0 and cfg.final_logit_softcapping == 30.0
        assert set(cfg.layer_types) == {"sliding_attention", "full_attention"}
    else:
        assert cfg.num_key_value_heads == 1
    assert (path / "model.safetensors").exists() and not list(path.glob("*.bin"))
    tok = _tok(path)
    assert [tok.convert_tokens_to_ids(t) for t in ("<pad>", "<eos>", "<bos>", "<unk>")] == [0, 1, 2, 3]
    assert cfg.pad_token_id == 0 and tok.pad_token == "<pad>" and tok.eos_token == "<eos>"
    assert tok("hi")["input_ids"][0] == tok.bos_token_id  # BOS added on encode
    assert tok.convert_ids_to_tokens(tok("a\nb", add_special_tokens=False)["input_ids"])[1] == "\n"
    assert tok.decode(tok("café", add_special_tokens=False)["input_ids"]) == "café"  # byte fallback
    chat = [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "A."}]
    assert tok.apply_chat_template(chat, tokenize=False) == \
        "<bos><start_of_turn>user\nQ?<end_of_turn>\n<start_of_turn>model\nA.<end_of_turn>\n"
    with pytest.raises(Exception, match="system role"):
        tok.apply_chat_template([{"role": "system", "content": "S"}] + chat, tokenize=False)
    rm = _rm(path, add_special_tokens=True)  # config.yaml's scoring: a second BOS in front of the template's
    assert rm.adapter.name == "sequence_classifier" and rm.model.score.weight.shape == (1, 64)
    ids = rm.encode(REQS[:1])[0]["input_ids"]
    assert ids[:3] == [2, 2, tok.convert_tokens_to_ids("<start_of_turn>")]
    assert ids[-2:] == [tok.convert_tokens_to_ids("<end_of_turn>"), tok.convert_tokens_to_ids("\n")]
    out = rm.score(REQS)
    assert out.failures == 0 and np.isfinite(out.scores).all() and out.scores[0] != out.scores[1]
    # Gemma: prefix-cached scoring (rms/prefix.py) equals full sequences; Gemma 2 (sliding window) takes
    # the full-sequence path
    assert rm.diagnostics()["prefix_cache"] is (name == "gemma")
    np.testing.assert_allclose(rm.score_full(rm.encode(REQS)), out.scores, atol=1e-4)


def test_deberta_replica_scores_the_cards_text_pair(built):
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    path = built["deberta"]
    cfg = AutoConfig.from_pretrained(path)
    assert cfg.architectures == ["DebertaV2ForSequenceClassification"] and cfg.model_type == "deberta-v2"
    assert cfg.relative_attention and cfg.type_vocab_size == 0 and cfg.max_position_embeddings == 512
    tok = _tok(path)
    assert not tok.chat_template and tok.model_max_length == 512
    assert [tok.convert_tokens_to_ids(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[UNK]")] == [0, 1, 2, 3]
    assert tok.convert_tokens_to_ids("[MASK]") == len(tok) - 1
    enc = tok("Best soup?", "Tomato soup.")
    toks = tok.convert_ids_to_tokens(enc["input_ids"])
    assert toks[0] == "[CLS]" and toks.count("[SEP]") == 2 and toks[-1] == "[SEP]" and "[UNK]" not in toks
    assert enc["token_type_ids"][: toks.index("[SEP]") + 1] == [0] * (toks.index("[SEP]") + 1)
    assert set(enc["token_type_ids"][toks.index("[SEP]") + 1:]) == {1}
    rm = _rm(path)
    assert rm.diagnostics()["input_format"] == "text_pair" and rm.max_length == 512
    assert rm.model.classifier.weight.shape == (1, 32)
    out = rm.score(REQS[1:])
    # the model card's usage: score = model(**tokenizer(question, answer)).logits[0]
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        direct = model(**tok("Best soup?", "Tomato soup with bread.", return_tensors="pt")).logits[0, 0].item()
    assert out.scores[0] == pytest.approx(direct, abs=1e-4)
    both = rm.score(REQS)
    assert np.isfinite(both.scores).all() and both.scores[0] != both.scores[1]


def test_tulu_replica(built):
    path = built["tulu3"]
    tok = _tok(path)
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q?"},
            {"role": "assistant", "content": "A."}]
    assert tok.apply_chat_template(chat, tokenize=False) == \
        "<|system|>\nS\n<|user|>\nQ?\n<|assistant|>\nA.<|end_of_text|>"
    assert tok.apply_chat_template(chat[1:2], tokenize=False, add_generation_prompt=True) == \
        "<|user|>\nQ?\n<|assistant|>\n"
    assert tok.pad_token == "<pad>" and tok.eos_token == "<|end_of_text|>"
    rm = _rm(path, add_special_tokens=True)
    ids = rm.encode(REQS[:1])[0]["input_ids"]
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1  # the template has no BOS
    assert ids[-1] == tok.eos_token_id  # the score is read at the answer's EOS
    assert type(rm.model).__name__ == "LlamaForSequenceClassification"
    scores = rm.score(REQS).scores
    assert np.isfinite(scores).all() and rm.diagnostics()["prefix_cache"]
    np.testing.assert_allclose(rm.score_full(rm.encode(REQS)), scores, atol=1e-4)


def test_llama3_chat_replica_as_generative_rm(built):
    from transformers import AutoConfig

    path = built["llama3_chat"]
    cfg = AutoConfig.from_pretrained(path)
    assert cfg.architectures == ["LlamaForCausalLM"] and cfg.rope_scaling["rope_type"] == "llama3"
    tok = _tok(path)
    assert tok.pad_token is None and tok.eos_token == "<|eot_id|>" and tok.bos_token == "<|begin_of_text|>"
    text = tok.apply_chat_template([{"role": "user", "content": "Q?"}], tokenize=False, add_generation_prompt=True)
    assert text == ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                    "December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>"
                    "\n\nQ?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    with_sys = tok.apply_chat_template([{"role": "system", "content": " Judge. "}, {"role": "user", "content": "Q"}],
                                       tokenize=False)
    assert "Today Date: 26 Jul 2024\n\nJudge.<|eot_id|><|start_header_id|>user" in with_sys
    assert with_sys.count("<|start_header_id|>system") == 1
    gen = json.loads((path / "generation_config.json").read_text())
    stops = [tok.convert_tokens_to_ids(t) for t in ("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>")]
    assert gen["do_sample"] is True and gen["temperature"] == 0.6 and gen["top_p"] == 0.9
    assert gen["eos_token_id"] == stops
    spec = {"name": "g", "kind": "generative_pairwise", "path": str(path), "device": "cpu", "progress": False,
            "max_new_tokens": 6, "use_profile": True}
    rm = load_reward_model(spec)
    pairs = [PairRequest("Best soup?", "Tomato soup.", "Nothing.", ("I cook.",)),
             PairRequest("How do I start painting?", "Buy paints.", "No idea.")]
    a, b = rm.compare(pairs), load_reward_model(spec).compare(pairs)
    # greedy despite the sampling defaults: the same replies from a fresh load; random weights rarely
    # write a verdict, and each unparseable reply is counted
    assert [d["raw"] for d in a.details] == [d["raw"] for d in b.details]
    assert a.failures == sum(d["failed"][0] for d in a.details)


def test_builders_in_schema_and_dispatch(tmp_path):
    schema = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())
    models = schema["properties"]["replica"]["properties"]["models"]["additionalProperties"]
    assert set(models["properties"]["builder"]["enum"]) == set(BUILDERS)
    out = build_replica("gemma_seqcls", tmp_path / "g", seed=1, version="gemma")
    assert json.loads((out / "replica.json").read_text()) == \
        {"builder": "gemma_seqcls", "options": {"version": "gemma"}, "seed": 1}
    with pytest.raises(ValueError, match="unknown version"):
        build_replica("gemma_seqcls", tmp_path / "x", version="gemma3")
