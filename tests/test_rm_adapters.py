"""Every reward-model interface of config.yaml loads and scores as its model card intends.

Replicas (prbench.replica.rms) stand in for the hub models: same architecture families, special
tokens, chat-template structure and remote-code interfaces, random weights, built locally.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from helpers import REPO

from prbench import prompts
from prbench.prompts import ScoreRequest
from prbench.replica.build import build_qwen2_chat
from prbench.replica.rms import build_armorm_replica, build_internlm2_reward_replica, build_seqcls_replica
from prbench.rms import load_reward_model
from prbench.rms.adapters import choose_adapter

POSTS = ("I spent the weekend on compost and tomatoes again.", "Guitar chords after work help me relax.",
         "My telescope shows the nebula on clear nights.")


def _requests():
    """Different lengths: short and long answers, with and without posts, two questions."""
    out = []
    for i in range(6):
        q = "What should I do this weekend?" if i % 2 else "Any hobby advice for me?"
        out.append(ScoreRequest(q, "You could try gardening" + " really" * (3 * i), POSTS[: i % 4]))
    return out


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    root = tmp_path_factory.mktemp("replicas")
    return {
        "llama3": build_seqcls_replica(root / "llama3", "llama3"),
        "llama3_nopad": build_seqcls_replica(root / "llama3_nopad", "llama3", pad=False, seed=1),
        "qwen3": build_seqcls_replica(root / "qwen3", "qwen3"),
        "internlm2": build_internlm2_reward_replica(root / "internlm2"),
        "armorm": build_armorm_replica(root / "armorm"),
        "qwen25": build_qwen2_chat(root / "qwen25", size="7b"),
    }


def _rm(path, **kw):
    return load_reward_model({"name": "r", "kind": "classifier", "path": str(path), "use_profile": True,
                              "progress": False, **kw})


def _alone_and_together(rm, reqs):
    together = rm.score(reqs).scores
    alone = np.array([rm.score([r]).scores[0] for r in reqs])
    return together, alone


def test_every_config_entry_loads_against_its_replica(replicas):
    """config.yaml's seven RMs, each built through load_reward_model on its replica; scores of
    requests of different lengths are identical alone and together."""
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    stand_in = {"Skywork/Skywork-Reward-V2-Llama-3.1-8B": "llama3", "Skywork/Skywork-Reward-V2-Qwen3-4B": "qwen3",
                "internlm/internlm2-7b-reward": "internlm2", "RLHFlow/ArmoRM-Llama3-8B-v0.1": "armorm",
                "Qwen/Qwen2.5-7B-Instruct": "qwen25"}
    assert {"internlm2_7b_reward", "armorm_llama3_8b"} <= set(cfg["reward_models"])
    reqs = _requests()
    seen = set()
    for name, entry in cfg["reward_models"].items():
        spec = {**entry, "name": name, "path": str(replicas[stand_in[entry["path"]]]), "progress": False,
                "max_new_tokens": 4}
        rm = load_reward_model(spec)
        together, alone = _alone_and_together(rm, reqs)
        np.testing.assert_allclose(together, alone, rtol=0, atol=1e-5, equal_nan=True)
        if entry["kind"] == "classifier":
            assert np.all(np.isfinite(together)) and np.ptp(together) > 0
            seen.add(rm.adapter.name)
    assert seen == {"sequence_classifier", "score_output", "reward_token"}


def test_internlm2_style_score_equals_model_card_get_score(replicas):
    from transformers import AutoModel, AutoTokenizer

    path = replicas["internlm2"]
    for use_profile in (False, True):
        rm = _rm(path, trust_remote_code=True, use_profile=use_profile)
        assert rm.adapter.name == "reward_token"
        reqs = _requests()
        ours = rm.score(reqs).scores
        model = AutoModel.from_pretrained(path, trust_remote_code=True).eval()
        tok = AutoTokenizer.from_pretrained(path)
        card = [model.get_score(tok, prompts.rm_messages(r, use_profile)) for r in reqs]
        np.testing.assert_allclose(ours, card, rtol=0, atol=1e-5)


def test_armorm_style_score_equals_its_score_output(replicas):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = replicas["armorm"]
    rm = _rm(path, trust_remote_code=True)  # goes through the compatibility path in this process
    assert rm.adapter.name == "score_output"
    reqs = _requests()
    ours = rm.score(reqs).scores
    model = AutoModelForSequenceClassification.from_pretrained(path, trust_remote_code=True).eval()
    tok = AutoTokenizer.from_pretrained(path)
    card = []
    for r in reqs:  # the model card: one unpadded conversation, read `.score`
        ids = tok.apply_chat_template(prompts.rm_messages(r, True), return_tensors="pt", return_dict=True)["input_ids"]
        card.append(float(model(ids).score.detach().float()[0]))
    np.testing.assert_allclose(ours, card, rtol=0, atol=1e-5)


def _fresh_python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_armorm_remote_code_needs_and_gets_the_compatibility_path(replicas):
    path = replicas["armorm"]
    plain = _fresh_python("from transformers import AutoModelForSequenceClassification as A\n"
                          f"A.from_pretrained({str(path)!r}, trust_remote_code=True)")
    assert plain.returncode != 0 and "LLAMA_INPUTS_DOCSTRING" in plain.stderr  # raw transformers 5 fails
    ours = _fresh_python("import logging; logging.basicConfig(level=logging.WARNING)\n"
                         "from prbench.rms import load_reward_model\n"
                         f"rm = load_reward_model({{'name': 'armo', 'kind': 'classifier', 'path': {str(path)!r}, "
                         "'trust_remote_code': True, 'progress': False})\n"
                         "from prbench.prompts import ScoreRequest\n"
                         "print('SCORE', rm.score([ScoreRequest('Any advice?', 'Cook.')]).scores[0])")
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert "compatibility path" in ours.stderr and "SCORE" in ours.stdout


@pytest.mark.parametrize("which", ["llama3", "llama3_nopad", "qwen3", "internlm2", "armorm"])
def test_scores_do_not_depend_on_batching(replicas, which):
    rm = _rm(replicas[which], trust_remote_code=which in ("internlm2", "armorm"))
    together, alone = _alone_and_together(rm, _requests())
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-5)
    rm.prefix = None  # the full-sequence path too
    np.testing.assert_allclose(rm.score(_requests()).scores, alone, rtol=0, atol=1e-4)


def _card_reading(path, req):
    """Where a sequence classifier's model card reads the score: the last token of the unpadded
    conversation, through the model's own head."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    tok = AutoTokenizer.from_pretrained(path)
    text = tok.apply_chat_template(prompts.rm_messages(req, True), tokenize=False)
    ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        hidden = model.model(input_ids=ids).last_hidden_state[0, -1]
        return float(model.score(hidden)[0])


def test_tokenizer_without_pad_reads_the_last_token(replicas):
    """Llama-3 tokenizers have no pad token; eos (<|eot_id|>) as pad would read one token early."""
    path = replicas["llama3_nopad"]
    rm = _rm(path)
    last = rm.encoder._chat_ids(ScoreRequest("q", "a"), [], 0)[-1]
    assert rm.pad_id != last and rm.tokenizer.pad_token_id == rm.model.config.pad_token_id == rm.pad_id
    reqs = _requests()[:3]
    np.testing.assert_allclose(rm.score(reqs).scores, [_card_reading(path, r) for r in reqs], rtol=0, atol=1e-5)


def test_model_and_tokenizer_pad_ids_are_made_to_agree(replicas, tmp_path):
    import json
    import shutil

    path = tmp_path / "mismatch"
    shutil.copytree(replicas["llama3"], path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["pad_token_id"] = 2  # <|reserved_special_token_0|>, not the tokenizer's pad
    (path / "config.json").write_text(json.dumps(cfg))
    rm = _rm(path)
    assert rm.tokenizer.pad_token_id == rm.model.config.pad_token_id == 2
    together, alone = _alone_and_together(rm, _requests())
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-5)


def test_truncation_drops_posts_then_cuts_the_question_never_the_answer(replicas):
    rm = _rm(replicas["llama3"], max_length=60)
    tok = rm.tokenizer
    answer = "You could try gardening really truly."
    ans_ids = tok(answer, add_special_tokens=False)["input_ids"]
    long_q = "Any hobby advice for me? " * 20 + "What should I do this weekend?"
    feat = rm.encoder.encode(ScoreRequest(long_q, answer, POSTS))
    ids = feat["input_ids"]
    assert len(ids) <= 60
    eot = tok.convert_tokens_to_ids("<|eot_id|>")
    assert ids[-1] == eot and ids[-1 - len(ans_ids):-1] == ans_ids  # the whole answer and its end survive
    assert "What should I do this weekend?" in tok.decode(ids)  # the question's end survives, its start is cut
    assert rm.encoder.n_posts_dropped == len(POSTS) and rm.encoder.n_truncated == 1
    assert 0 < feat["prefix_len"] < len(ids) - len(ans_ids)
    # an answer longer than max_length alone: its end is kept
    feat = rm.encoder.encode(ScoreRequest("Any advice?", "really " * 80 + "THE END", ()))
    assert len(feat["input_ids"]) == 60 and feat["input_ids"][-1] == eot and feat["prefix_len"] == 0


def test_max_length_follows_the_model(replicas):
    from prbench.rms.classifier import DEFAULT_MAX_LENGTH, effective_max_length

    rm = _rm(replicas["qwen3"])
    assert rm.max_length == 4096  # the replica's max_position_embeddings
    assert effective_max_length(None, None, None) == DEFAULT_MAX_LENGTH == 8192
    assert effective_max_length(None, 1000, rm.model) == 1000


def test_adapter_choice_and_errors_name_the_key(replicas, tmp_path):
    key = "reward_models.x"
    assert choose_adapter({"architectures": ["LlamaForSequenceClassification"]}, key).name == "sequence_classifier"
    assert choose_adapter({"auto_map": {"AutoModelForSequenceClassification": "m.C"}}, key).name == "score_output"
    assert choose_adapter({"auto_map": {"AutoModel": "m.C"}, "reward_token_id": 5}, key).name == "reward_token"
    assert choose_adapter({"architectures": ["LlamaForCausalLM"]}, key,
                          "sequence_classifier").name == "sequence_classifier"
    with pytest.raises(ValueError, match=r"reward_models.x.*no RM adapter.*LlamaForCausalLM.*reward_models.x.adapter"):
        choose_adapter({"architectures": ["LlamaForCausalLM"]}, key)
    with pytest.raises(ValueError, match=r"reward_models.x.adapter: unknown adapter"):
        choose_adapter({}, key, "nope")
    # remote code without the opt-in
    with pytest.raises(RuntimeError, match=r"reward_models.r.trust_remote_code"):
        _rm(replicas["internlm2"])
    # pickle-only weights
    import shutil

    import torch
    from safetensors.torch import load_file

    pkl = tmp_path / "pickle_only"
    shutil.copytree(replicas["llama3"], pkl)
    torch.save(load_file(str(pkl / "model.safetensors")), pkl / "pytorch_model.bin")
    (pkl / "model.safetensors").unlink()
    with pytest.raises(RuntimeError, match=r"reward_models.r.use_safetensors.*only pickle"):
        _rm(pkl)
    # remote code that imports something that does not exist (not a docstring): its own message
    broken = tmp_path / "broken"
    shutil.copytree(replicas["armorm"], broken)
    code = (broken / "modeling_custom.py").read_text()
    (broken / "modeling_custom.py").write_text(code.replace("import LLAMA_INPUTS_DOCSTRING",
                                                            "import LLAMA_INPUTS_DOCSTRING, NO_SUCH_THING"))
    with pytest.raises(RuntimeError, match=r"reward_models.r.path: the remote code of .* does not import under "
                                           r"transformers"):
        _rm(broken, trust_remote_code=True)


def _spy_from_pretrained(monkeypatch, auto_cls) -> dict:
    """Record the kwargs `auto_cls.from_pretrained` receives; load on CPU without the GPU placement."""
    seen: dict = {}
    real = auto_cls.from_pretrained.__func__

    def spy(cls, path, **kwargs):
        seen.update(kwargs)
        kwargs.pop("device_map"), kwargs.pop("max_memory")
        return real(cls, path, **kwargs)

    monkeypatch.setattr(auto_cls, "from_pretrained", classmethod(spy))
    return seen


def test_multi_gpu_loads_spread_the_model(replicas, monkeypatch):
    """With several GPUs visible, RMs and judges load with device_map="auto" and max_memory."""
    import torch

    from prbench.models import multi_gpu_kwargs

    assert multi_gpu_kwargs("cpu") == {}
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert multi_gpu_kwargs("cuda") == {}
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)

    class Props:
        total_memory = 80 * 2**30

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    kw = multi_gpu_kwargs("cuda")
    assert kw == {"device_map": "auto", "max_memory": {0: "72GiB", 1: "72GiB"}}

    from transformers import AutoModelForSequenceClassification

    seen = _spy_from_pretrained(monkeypatch, AutoModelForSequenceClassification)
    from prbench.rms.inputs import from_pretrained

    # the RM loader's from_pretrained (no GPU here: the options are checked, the load itself is on CPU)
    model = from_pretrained(AutoModelForSequenceClassification, str(replicas["llama3"]),
                            {"name": "big", "device": "cuda", "dtype": "float32"})
    assert seen["device_map"] == "auto" and seen["max_memory"] == {0: "72GiB", 1: "72GiB"}
    assert model is not None


def test_judge_spreads_over_gpus_and_vllm_takes_the_job_gpus(replicas, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from prbench.judge import TransformersJudge
    from prbench.models import vllm_engine_kwargs

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert vllm_engine_kwargs({}) == {"tensor_parallel_size": 4, "gpu_memory_utilization": 0.9}
    assert vllm_engine_kwargs({"tensor_parallel_size": 2, "max_model_len": 16384, "gpu_memory_utilization": 0.8}) == {
        "tensor_parallel_size": 2, "gpu_memory_utilization": 0.8, "max_model_len": 16384}

    class Props:
        total_memory = 40 * 2**30

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    seen = _spy_from_pretrained(monkeypatch, AutoModelForCausalLM)
    judge = TransformersJudge(str(replicas["qwen25"]), device="cuda", dtype="float32")
    assert seen["device_map"] == "auto" and seen["max_memory"] == {i: "36GiB" for i in range(4)}
    assert judge.device == "cpu"  # inputs go where the (here: CPU-loaded) embeddings are
