"""`classifier` RMs on tiny local models: a Llama sequence classifier with a chat template and the
MiniLM cross-encoder (text / text_pair, no chat template)."""
import numpy as np
import pytest
import torch
from rm_helpers import make_pairs, minilm_classifier, tiny_llama_classifier

from prbench.prompts import PairRequest, ScoreRequest
from prbench.rms import load_reward_model
from prbench.rms.inputs import load_options

POSTS = ("I love growing tomatoes.", "My compost pile is huge.", "Seedlings everywhere this spring.")


def _rm(path, **kw):
    spec = {"name": "t", "kind": "classifier", "path": str(path), "progress": False, **kw}
    return load_reward_model(spec)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return tiny_llama_classifier(tmp_path_factory.mktemp("llama") / "m")


@pytest.fixture(scope="module")
def minilm_dir(tmp_path_factory):
    return minilm_classifier(tmp_path_factory.mktemp("minilm") / "m", layers=1)


def test_chat_template_input_with_and_without_profile(llama_dir):
    req = ScoreRequest("What should I plant?", "Try tomatoes.", POSTS)
    with_p = _rm(llama_dir, use_profile=True)
    no_p = _rm(llama_dir, use_profile=False)
    assert not with_p.encoder.pair_mode
    text = with_p.tokenizer.decode(with_p.encode([req])[0]["input_ids"])
    assert text.startswith("<|user|>Here are some of my previous posts:")
    assert "1. I love growing tomatoes." in text and "<|assistant|>Try tomatoes.</s>" in text
    text_np = no_p.tokenizer.decode(no_p.encode([req])[0]["input_ids"])
    assert "tomatoes." in text_np and "previous posts" not in text_np
    s1, s2 = with_p.score([req]).scores[0], no_p.score([req]).scores[0]
    assert np.isfinite(s1) and np.isfinite(s2) and abs(s1 - s2) > 1e-6
    top1 = _rm(llama_dir, use_profile=True, top_k=1)
    text_k = top1.tokenizer.decode(top1.encode([req])[0]["input_ids"])
    assert "1. I love growing tomatoes." in text_k and "compost" not in text_k


def test_multi_label_head_scores_last_class_probability(tmp_path):
    path = tiny_llama_classifier(tmp_path / "m2", num_labels=3)
    rm = _rm(path, use_profile=True)
    reqs = [ScoreRequest("Q?", "short", POSTS), ScoreRequest("Q?", "a much longer answer here", POSTS)]
    scores = rm.score(reqs).scores
    feats = rm.encode(reqs)
    with torch.no_grad():
        logits = rm.model(input_ids=torch.tensor([feats[0]["input_ids"]])).logits
    assert scores[0] == pytest.approx(torch.softmax(logits, -1)[0, -1].item(), abs=1e-5)
    assert ((scores > 0) & (scores < 1)).all()


def test_compare_uses_strict_preference_and_ties(llama_dir):
    rm = _rm(llama_dir, use_profile=True)
    pairs = [PairRequest("Q?", "same answer", "same answer", POSTS), PairRequest("Q?", "one", "another one", POSTS),
             PairRequest("Q?", "another one", "one", POSTS)]
    out = rm.compare(pairs)
    assert out.prefs[0] == 0.5 and out.failures == 0
    # the pointwise scores decide: 1.0 when the chosen answer scores strictly higher, else 0.0
    s_one, s_another = rm.score([ScoreRequest("Q?", "one", POSTS), ScoreRequest("Q?", "another one", POSTS)]).scores
    assert s_one != s_another
    assert out.prefs[1] == (1.0 if s_one > s_another else 0.0)
    assert out.prefs[2] == 1.0 - out.prefs[1]  # the same two answers swapped: the other side


def test_minilm_cross_encoder_text_pair(minilm_dir):
    rm = _rm(minilm_dir, use_profile=True)
    assert rm.encoder.pair_mode  # no chat template -> text / text_pair
    req = ScoreRequest("What should I plant?", "Try tomatoes.", POSTS)
    feat = rm.encode([req])[0]
    tt = feat["token_type_ids"]
    n_second = sum(tt)
    answer_ids = rm.tokenizer("Try tomatoes.", add_special_tokens=False)["input_ids"]
    assert n_second == len(answer_ids) + 1  # answer + final [SEP] form the second segment
    assert "previous posts" in rm.tokenizer.decode(feat["input_ids"])
    scores = rm.score([req, ScoreRequest("What should I plant?", "No idea.", POSTS)]).scores
    assert np.isfinite(scores).all() and scores[0] != scores[1]


def test_long_inputs_drop_lowest_ranked_posts_first(minilm_dir):
    long_posts = tuple(f"post number {i} " + "word " * 30 for i in range(5))
    req = ScoreRequest("What should I plant?", "Try tomatoes.", long_posts)
    rm = _rm(minilm_dir, use_profile=True, max_length=80)
    text = rm.tokenizer.decode(rm.encode([req])[0]["input_ids"])
    assert len(rm.encode([req])[0]["input_ids"]) <= 80
    assert "post number 0" in text and "post number 4" not in text
    assert "what should i plant?" in text and "try tomatoes." in text
    assert rm.diagnostics()["profile_posts_dropped"] > 0
    tiny = _rm(minilm_dir, use_profile=True, max_length=8)
    assert len(tiny.encode([req])[0]["input_ids"]) == 8
    assert tiny.diagnostics()["truncated_inputs"] == 1


def test_loading_options_and_errors(llama_dir, tmp_path):
    spec = {"name": "x", "kind": "classifier"}
    opts = load_options(spec)
    assert opts["trust_remote_code"] is False and opts["use_safetensors"] is True
    assert opts["dtype"] == torch.float32 and opts["device"] == "cpu"
    assert load_options({**spec, "trust_remote_code": True, "dtype": "bfloat16"})["trust_remote_code"] is True
    rm = _rm(llama_dir, dtype="bfloat16")
    assert next(rm.model.parameters()).dtype == torch.bfloat16
    assert np.isfinite(rm.score([ScoreRequest("Q?", "A.", ())]).scores).all()
    with pytest.raises(ValueError, match=r"reward_models\.x\.path"):
        load_reward_model(spec)
    with pytest.raises(ValueError, match=r"reward_models\.x\.kind"):
        load_reward_model({"name": "x", "kind": "nope"})
    # pickle weights only: refused unless the entry sets use_safetensors: false
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    binary = tmp_path / "bin"
    model = AutoModelForSequenceClassification.from_pretrained(llama_dir)
    model.config.save_pretrained(binary)
    torch.save(model.state_dict(), binary / "pytorch_model.bin")
    AutoTokenizer.from_pretrained(llama_dir).save_pretrained(binary)
    with pytest.raises(RuntimeError, match="use_safetensors"):
        _rm(binary)
    req = [ScoreRequest("Q?", "A.", ())]
    np.testing.assert_allclose(_rm(binary, use_safetensors=False).score(req).scores, _rm(llama_dir).score(req).scores,
                               rtol=1e-5)


def test_scores_identical_across_reloads(llama_dir):
    rows = make_pairs(6, seed=5)
    reqs = [ScoreRequest(r["question"], r["chosen"], tuple(r["profile"])) for r in rows]
    a = _rm(llama_dir, use_profile=True).score(reqs).scores
    b = _rm(llama_dir, use_profile=True).score(reqs).scores
    np.testing.assert_array_equal(a, b)


def test_special_tokens_and_right_truncation_keys(tmp_path):
    """scoring.add_special_tokens: the rendered chat tokenized with the tokenizer's special tokens
    on top (the authors': a Llama-3 template that starts with BOS gets it twice) or without (one
    BOS). scoring.truncation: `right` keeps every post and cuts the tokenized input's right end
    (the answer's tail), `fit` drops posts and keeps the answer."""
    from prbench.replica.rms import build_seqcls_replica

    path = build_seqcls_replica(tmp_path / "llama3", family="llama3", seed=0)
    req = ScoreRequest("What should I plant?", "Try tomatoes.", POSTS)
    one, two = _rm(path, use_profile=True), _rm(path, use_profile=True, add_special_tokens=True)
    bos = one.tokenizer.bos_token_id
    ids1, ids2 = one.encode([req])[0]["input_ids"], two.encode([req])[0]["input_ids"]
    assert ids1[0] == bos and ids1[1] != bos
    assert ids2[:2] == [bos, bos] and ids2[1:] == ids1
    assert np.isfinite(two.score([req]).scores[0]) and two.score([req]).scores[0] != one.score([req]).scores[0]

    long_answer = "tomatoes " * 60
    req = ScoreRequest("What should I plant?", long_answer, POSTS)
    full = one.encode([req])[0]["input_ids"]
    limit = len(full) - 40
    fit = _rm(path, use_profile=True, max_length=limit)
    right = _rm(path, use_profile=True, max_length=limit, truncation="right")
    f_ids, r_ids = fit.encode([req])[0]["input_ids"], right.encode([req])[0]["input_ids"]
    assert len(f_ids) <= limit and r_ids == full[:limit]
    assert fit.diagnostics()["profile_posts_dropped"] > 0 and right.diagnostics()["profile_posts_dropped"] == 0
    assert right.diagnostics()["truncated_inputs"] == 1
    assert "Seedlings" in right.tokenizer.decode(r_ids) and "Seedlings" not in fit.tokenizer.decode(f_ids)
    assert long_answer.strip() in fit.tokenizer.decode(f_ids)  # fit keeps the whole answer
    assert long_answer.strip() not in right.tokenizer.decode(r_ids)  # right cuts its tail
    with pytest.raises(ValueError, match="scoring.truncation"):
        _rm(path, truncation="left")
