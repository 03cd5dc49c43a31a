"""PPO rollouts (prbench.downstream.ppo.rollout).

Today's path (trl's `batch_generation`: the float32 scores of `generate` kept per chunk, released
as read) and the new one (token ids generated in full chunks, logprobs from a policy forward per
forward chunk): same token ids under greedy decoding, same logprobs for the same sampled tokens
(max |diff| <= 1e-5), and a short greedy PPO run that trains to the same weights and stats."""
import pandas as pd
import pytest
import torch
from ppo_tiny import LengthRM, make_policy_dir, make_prompt_rows
from safetensors.torch import load_file

import prbench.downstream.ppo.train as ppo_mod
from prbench.downstream.ppo.rollout import (
    ForwardScores,
    ReleasingScores,
    forward_logprob_rollouts,
    ids_batch_generation,
    releasing_rollout_scores,
)
from prbench.downstream.ppo.train import train_ppo
from prbench.io import write_jsonl

# Responses stop at EOS at different lengths, so chunks have different widths and need padding.
CFG = dict(actor_lr=2e-3, critic_lr=2e-3, batch_size=8, mini_batch_size=4, ppo_epochs=1, total_episodes=24,
           response_length=12, temperature=1.0, kl_coef=0.05, save_steps=10, local_rollout_forward_batch_size=3)
LOGPROB_TOL = 1e-5  # float32: a cached decode step and a full forward differ by rounding only


def test_chunks_are_trls_padded_slices_and_released_once():
    from trl.trainer.utils import pad

    g = torch.Generator().manual_seed(0)
    chunks = [torch.randn(3, 5, 7, generator=g), torch.randn(3, 2, 7, generator=g), torch.randn(2, 4, 7, generator=g)]
    trl_view = pad(chunks, padding_value=0, padding_side="right")
    trl_view = trl_view.view(-1, *trl_view.shape[2:])[:8]
    scores = ReleasingScores(chunks, chunk_size=3, batch_size=8)
    assert scores.shape == (8, 5, 7) and len(scores) == 8
    for i in range(0, 8, 3):
        got = scores[i:i + 3]
        assert torch.equal(got, trl_view[i:i + 3])
    assert scores.released == 3
    with pytest.raises(RuntimeError, match="already read"):
        scores[0:3]
    with pytest.raises(TypeError, match="one chunk"):
        ReleasingScores(chunks, 3, 8)[1:4]


def test_context_managers_restore_trls_function():
    from trl.experimental.ppo import ppo_trainer as trl_ppo

    original = trl_ppo.batch_generation
    with releasing_rollout_scores():
        assert trl_ppo.batch_generation is not original
    assert trl_ppo.batch_generation is original
    with releasing_rollout_scores(enabled=False):
        assert trl_ppo.batch_generation is original
    with forward_logprob_rollouts(4, 1.0):
        assert trl_ppo.batch_generation is not original
    assert trl_ppo.batch_generation is original


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("rollout")
    policy = make_policy_dir(root / "policy")
    write_jsonl(root / "train.jsonl", make_prompt_rows(16, seed=3))
    return root, policy


def _model_and_queries(policy, n=8):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from prbench.generation import neutralize

    tok = AutoTokenizer.from_pretrained(policy)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32).eval()
    neutralize(model)
    model.generation_config.pad_token_id = tok.pad_token_id
    # the random tiny policy is near-uniform over its vocabulary: make EOS likely (a few % a step),
    # so rollouts stop at different lengths and the padding paths are exercised
    eos = tok.eos_token_id

    def eos_bias(module, args, out):
        out = out.clone()
        out[..., eos] += 2.5
        return out

    model.lm_head.register_forward_hook(eos_bias)
    texts = [tok.apply_chat_template([{"role": "user", "content": r["question"]}], tokenize=False,
                                     add_generation_prompt=True) for r in make_prompt_rows(n, seed=5)]
    queries = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)["input_ids"]
    return model, tok, queries


def _gen_config(do_sample, temperature=1.0, length=24):
    from transformers import GenerationConfig

    return GenerationConfig(max_new_tokens=length, temperature=temperature + 1e-7, top_k=0.0, top_p=1.0,
                            do_sample=do_sample)


def _valid(responses, pad_id, eos_id):
    """trl's mask of the positions PPO trains on: up to and including the first EOS."""
    from trl.experimental.ppo.ppo_trainer import first_true_indices, truncate_response

    post = truncate_response(eos_id, pad_id, responses)
    seq = first_true_indices(post == pad_id) - 1
    return torch.arange(responses.shape[1]).repeat(responses.shape[0], 1) <= seq.unsqueeze(1)


def _logprobs(scores, query_responses, context, chunk):
    from trl.trainer.utils import selective_log_softmax

    return torch.cat([selective_log_softmax(scores[i:i + chunk], query_responses[i:i + chunk, context:])
                      for i in range(0, query_responses.shape[0], chunk)])


@torch.no_grad()
def test_sampled_logprobs_from_a_forward_equal_generates_scores(setup):
    """The same sampled rollouts: logprobs from generate's scores (today) and from a forward pass (new)."""
    from trl.experimental.ppo.ppo_trainer import batch_generation

    _, policy = setup
    model, tok, queries = _model_and_queries(policy)
    torch.manual_seed(1)
    temperature = 0.7
    qr, scores = batch_generation(model, queries, 3, tok.pad_token_id, _gen_config(True, temperature))
    ctx = queries.shape[1]
    old = _logprobs(scores, qr, ctx, 3)
    fwd = ForwardScores(model, qr, ctx, tok.pad_token_id, temperature, chunk_size=3)
    new = _logprobs(fwd, qr, ctx, 3)
    assert fwd.forwards == 3 and new.shape == old.shape
    valid = _valid(qr[:, ctx:], tok.pad_token_id, tok.eos_token_id)
    assert valid.sum() > 40 and (~valid).any()  # some rollouts stop early: padding is exercised
    diff = (new - old).abs()[valid].max().item()
    assert diff <= LOGPROB_TOL
    # computed from the policy's logits, not copied: the raw logits (a forward at temperature 1),
    # divided by 0.7 by hand, give the same logprobs; undivided they give other ones
    at_one = ForwardScores(model, qr, ctx, tok.pad_token_id, 1.0, chunk_size=3)
    raw = torch.cat([at_one[i:i + 3] for i in range(0, qr.shape[0], 3)])
    tokens = qr[:, ctx:].unsqueeze(-1)
    by_hand = torch.log_softmax(raw / (temperature + 1e-7), -1).gather(-1, tokens).squeeze(-1)
    assert (new - by_hand).abs()[valid].max().item() <= LOGPROB_TOL
    untempered = torch.log_softmax(raw, -1).gather(-1, tokens).squeeze(-1)
    assert (untempered - old).abs()[valid].max().item() > 100 * LOGPROB_TOL
    with pytest.raises(TypeError, match="one chunk"):
        fwd[1:4]


@torch.no_grad()
def test_greedy_rollouts_in_one_generate_call_equal_todays_chunks(setup):
    from trl.experimental.ppo.ppo_trainer import batch_generation

    _, policy = setup
    model, tok, queries = _model_and_queries(policy)
    qr_old, scores = batch_generation(model, queries, 3, tok.pad_token_id, _gen_config(False))
    qr_new, fwd = ids_batch_generation(model, queries, 8, tok.pad_token_id, _gen_config(False), forward_chunk=3,
                                       temperature=1.0)
    assert torch.equal(qr_new, qr_old)
    ctx = queries.shape[1]
    valid = _valid(qr_old[:, ctx:], tok.pad_token_id, tok.eos_token_id)
    diff = (_logprobs(fwd, qr_new, ctx, 3) - _logprobs(scores, qr_old, ctx, 3)).abs()[valid].max().item()
    assert diff <= LOGPROB_TOL


def _greedy(monkeypatch):
    """trl's PPO always samples; for the equality run its GenerationConfig decodes greedily."""
    from transformers import GenerationConfig
    from trl.experimental.ppo import ppo_trainer as trl_ppo

    monkeypatch.setattr(trl_ppo, "GenerationConfig", lambda **kw: GenerationConfig(**{**kw, "do_sample": False}))


def _run(root, policy, name):
    out = root / name
    train_ppo(str(policy), None, root / "train.jsonl", out, out / "model", out / "log.csv", dict(CFG), seed=0,
              rm=LengthRM(), device="cpu")
    return load_file(str(out / "model" / "model.safetensors")), pd.read_csv(out / "log.csv")


# A greedy run trains on the same tokens both ways (one generate call of 8 rows against chunks of 3);
# its logprobs differ by rounding (<= 1e-5), which moves the weights by far less than training does
# (measured: max |weight diff| 2.2e-7 after 3 steps, max |update| 7.9e-3).
WEIGHT_ATOL = 1e-5
STAT_RTOL, STAT_ATOL = 1e-3, 1e-4


def test_greedy_ppo_run_trains_the_same_as_todays_path(setup, monkeypatch):
    root, policy = setup
    _greedy(monkeypatch)
    w_new, log_new = _run(root, policy, "forward")
    monkeypatch.setattr(ppo_mod, "forward_logprob_rollouts",
                        lambda chunk, temperature, sampler: releasing_rollout_scores(sampler=sampler))
    w_old, log_old = _run(root, policy, "scores")
    assert w_new.keys() == w_old.keys() and len(log_new) == 3
    base = load_file(str(policy / "model.safetensors"))
    moved = max((w_old[k] - base[k]).abs().max().item() for k in base if k in w_old)
    assert moved > 100 * WEIGHT_ATOL  # training moved the weights: the comparison below is not vacuous
    for k in w_new:
        torch.testing.assert_close(w_new[k], w_old[k], atol=WEIGHT_ATOL, rtol=0, msg=k)
    assert list(log_new.columns) == list(log_old.columns)
    for c in log_old.columns:
        if pd.api.types.is_numeric_dtype(log_old[c]):
            torch.testing.assert_close(torch.tensor(log_new[c].to_numpy()), torch.tensor(log_old[c].to_numpy()),
                                       rtol=STAT_RTOL, atol=STAT_ATOL, equal_nan=True, msg=c)
        else:
            assert list(log_new[c]) == list(log_old[c]), c


@torch.no_grad()
def test_response_logits_without_logits_to_keep_are_the_same(setup):
    """A policy class whose forward has no `logits_to_keep` gets logits over every position, sliced
    to the same response logits."""
    from prbench.downstream.ppo.rollout import response_logits

    _, policy = setup
    model, tok, queries = _model_and_queries(policy, n=3)

    class NoKeep(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.calls = inner, 0

        def forward(self, input_ids, attention_mask, position_ids, return_dict):
            self.calls += 1
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)

    qr, _ = ids_batch_generation(model, queries, 3, tok.pad_token_id, _gen_config(False), forward_chunk=3,
                                 temperature=1.0)
    ctx = queries.shape[1]
    wrapped = NoKeep(model)
    got = response_logits(wrapped, qr, ctx, tok.pad_token_id, 0.5)
    want = response_logits(model, qr, ctx, tok.pad_token_id, 0.5)
    assert wrapped.calls == 1 and got.shape == (3, qr.shape[1] - ctx, model.config.vocab_size)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@torch.no_grad()
def test_sampled_rollouts_in_the_same_chunks_equal_todays_for_the_same_seed(setup):
    """What holds for sampled rollouts: with the generation chunk equal to trl's chunk the new path
    draws the same random numbers in the same order, so the same seed gives the same token ids (a
    larger generation chunk draws them in another order: other, equally distributed, tokens)."""
    from trl.experimental.ppo.ppo_trainer import batch_generation

    _, policy = setup
    model, tok, queries = _model_and_queries(policy)
    torch.manual_seed(7)
    qr_old, _ = batch_generation(model, queries, 3, tok.pad_token_id, _gen_config(True))
    torch.manual_seed(7)
    qr_new, _ = ids_batch_generation(model, queries, 3, tok.pad_token_id, _gen_config(True), forward_chunk=3,
                                     temperature=1.0)
    assert torch.equal(qr_new, qr_old)
    torch.manual_seed(7)
    qr_one_call, _ = ids_batch_generation(model, queries, 8, tok.pad_token_id, _gen_config(True), forward_chunk=3,
                                          temperature=1.0)
    assert not torch.equal(qr_one_call, qr_old)  # sampling is live: another draw order gives other tokens
