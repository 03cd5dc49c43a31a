"""The inverse-CDF rollout sampler (ppo.rollout_sampler inverse_cdf, prbench.downstream.ppo.sampler).

Its draws follow the tempered softmax (chi-square goodness of fit, temperature included), never
take a zero-probability token (the rounding edges forced), the logprobs PPO trains on (the forward
path's) are the log of the probability the sampler drew with, HF's own processors (min_new_tokens)
act before it, a seed gives the same tokens, the key reaches the PPO settings and is refused on
today's trl path, and a short PPO run with it is reproducible."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from ppo_tiny import LengthRM
from safetensors.torch import load_file
from scipy.stats import chisquare
from test_ppo_rollout import (
    CFG,
    LOGPROB_TOL,
    _gen_config,
    _logprobs,
    _model_and_queries,
    _valid,
    setup,  # noqa: F401 (the module fixture: a tiny policy and training prompts)
)

import prbench.downstream.ppo.sampler as sampler_mod
from prbench.config import ConfigError, with_defaults
from prbench.downstream.ppo.memory import KNOWN_CONFIGS, ModelShape, plan
from prbench.downstream.ppo.rollout import ForwardScores, generate_ids, ids_batch_generation, releasing_rollout_scores
from prbench.downstream.ppo.sampler import (
    BLOCK,
    InverseCDFSampler,
    decode_inverse_cdf,
    decode_settings,
    inverse_cdf_generation,
)
from prbench.downstream.ppo.settings import resolve_settings
from prbench.downstream.ppo.train import train_ppo

DRAWS = 20_000


def _draw_counts(logits: torch.Tensor, temperature: float, seed: int = 0) -> np.ndarray:
    """Counts per token of DRAWS rows of `logits`, each drawn once (one decode step of DRAWS rows)."""
    torch.manual_seed(seed)
    scores = logits.expand(DRAWS, -1).clone()
    idx = InverseCDFSampler(temperature).draw(scores).squeeze(1)
    return np.bincount(idx.numpy(), minlength=logits.shape[-1])


def _expected(logits: torch.Tensor, temperature: float) -> np.ndarray:
    return (torch.softmax(logits.double() / temperature, -1) * DRAWS).numpy()


# 8 tokens in one (zero-padded) block, and 8 tokens spread over 3 blocks of a 300-entry vocabulary
# with every other entry at -inf (first and last entries of blocks included)
SPREAD = [0, BLOCK - 1, BLOCK, 200, 2 * BLOCK - 1, 2 * BLOCK, 290, 299]


# and a vocabulary of whole blocks (the weights computed in place over the scores, as for Qwen2.5's)
@pytest.mark.parametrize("vocab, support", [(8, list(range(8))), (300, SPREAD),
                                            (2 * BLOCK, [0, 5, BLOCK - 1, BLOCK, 200, 2 * BLOCK - 1])])
@pytest.mark.parametrize("temperature", [1.0 + 1e-7, 0.5])
def test_draws_follow_the_tempered_softmax(vocab, support, temperature):
    g = torch.Generator().manual_seed(3)
    logits = torch.full((vocab,), -math.inf)
    logits[support] = torch.randn(len(support), generator=g) * 1.5
    counts = _draw_counts(logits, temperature)
    assert counts.sum() == DRAWS and counts[[i for i in range(vocab) if i not in support]].sum() == 0
    assert chisquare(counts[support], _expected(logits, temperature)[support]).pvalue > 0.01
    if temperature != 1.0 + 1e-7:  # the fit has the power to see a temperature left out
        assert chisquare(counts[support], _expected(logits, 1.0)[support]).pvalue < 1e-6


def test_zero_probability_tokens_are_never_drawn_even_at_the_rounding_edges(monkeypatch):
    vocab = 3 * BLOCK + 17  # a padded last block
    logits = torch.randn(vocab)
    first, last = BLOCK + 2, vocab - 51  # a whole first block and the tail at -inf
    logits[:first] = -math.inf
    logits[last + 1:] = -math.inf
    logits[200:210] = -math.inf
    counts = _draw_counts(logits, 1.0)
    assert counts[:first].sum() == counts[last + 1:].sum() == counts[200:210].sum() == 0
    assert counts[first:last + 1].sum() == DRAWS
    # the uniform's edges: 0 draws the first positive token; a uniform that rounds up to the
    # total (rand = 1, which torch.rand never returns) the last one, not a -inf entry past it
    real_rand = torch.rand
    for u, want in ((0.0, first), (1.0, last)):
        monkeypatch.setattr(torch, "rand", lambda *a, u=u, **kw: real_rand(*a, **kw).fill_(u))
        scores = logits.expand(4, -1).clone()
        out = InverseCDFSampler(1.0)(None, scores)
        assert (out.argmax(-1) == want).all() and (out[:, want] == math.inf).all()
        others = torch.arange(vocab) != want
        assert torch.equal(out[:, others], logits.expand(4, -1)[:, others])  # one entry a row written


def test_inverse_cdf_generation_refuses_filters_it_does_not_apply():
    from transformers import GenerationConfig

    for bad in (dict(top_k=50), dict(top_p=0.9), dict(min_p=0.1)):
        with pytest.raises(ValueError, match="ppo.rollout_sampler inverse_cdf"):
            inverse_cdf_generation(GenerationConfig(do_sample=True, temperature=1.0, **bad))
    config, proc = inverse_cdf_generation(_gen_config(True, 0.7))
    assert not config.do_sample and config.temperature is None and config.top_k is None and config.top_p is None
    assert proc.temperature == pytest.approx(0.7 + 1e-7, abs=0)


def _sampled_rollouts(model, queries, pad, gen, seed, chunk=8):
    torch.manual_seed(seed)
    return ids_batch_generation(model, queries, chunk, pad, gen, forward_chunk=3, temperature=gen.temperature - 1e-7,
                                sampler="inverse_cdf")


@torch.no_grad()
def test_rollout_logprobs_are_the_samplers_probabilities_and_a_seed_repeats(setup, monkeypatch):  # noqa: F811
    """(c) the logprobs PPO trains on (the forward path's response logits + trl's log-softmax) are
    the log of the probability the sampler drew each token with; (e) the same seed, the same tokens."""
    _, policy = setup
    model, tok, queries = _model_and_queries(policy)
    temperature = 0.7
    recorders = []

    class Recording(InverseCDFSampler):
        def __init__(self, t, record=False):
            super().__init__(t, record=True)
            recorders.append(self)

    monkeypatch.setattr(sampler_mod, "InverseCDFSampler", Recording)
    qr, fwd = _sampled_rollouts(model, queries, tok.pad_token_id, _gen_config(True, temperature), seed=11)
    ctx = queries.shape[1]
    assert len(recorders) == 1 and isinstance(fwd, ForwardScores)
    drawn = torch.stack(recorders[0].logprobs, 1)  # rows x decode steps
    new = _logprobs(fwd, qr, ctx, 3)
    valid = _valid(qr[:, ctx:], tok.pad_token_id, tok.eos_token_id)
    assert valid.sum() > 40 and (~valid).any()  # some rollouts stop at EOS: finished rows are left out
    diff = (new.double() - drawn[:, :new.shape[1]])[valid].abs().max().item()
    assert diff <= LOGPROB_TOL
    qr_again, _ = _sampled_rollouts(model, queries, tok.pad_token_id, _gen_config(True, temperature), seed=11)
    assert torch.equal(qr_again, qr)
    qr_other, _ = _sampled_rollouts(model, queries, tok.pad_token_id, _gen_config(True, temperature), seed=12)
    assert not torch.equal(qr_other, qr)
    torch.manual_seed(11)  # the multinomial draw of the same seed: other tokens
    qr_multinomial, _ = ids_batch_generation(model, queries, 8, tok.pad_token_id, _gen_config(True, temperature),
                                             forward_chunk=3, temperature=temperature)
    assert not torch.equal(qr_multinomial, qr)


@torch.no_grad()
def test_hf_processors_act_before_the_sampler_and_greedy_is_untouched(setup):  # noqa: F811
    """(d) min_new_tokens: EOS has the highest logit from the first step, yet no row ends before
    min_new_tokens (HF's processor sets it to -inf before the sampler draws); then they end."""
    _, policy = setup
    model, tok, queries = _model_and_queries(policy, n=6)
    eos = tok.eos_token_id
    hook = model.lm_head.register_forward_hook(lambda m, a, out: out.index_add(
        -1, torch.tensor([eos]), torch.full((*out.shape[:-1], 1), 15.0)))
    try:
        gen = _gen_config(True, 1.0, length=10)
        gen.min_new_tokens, gen.eos_token_id = 4, eos
        torch.manual_seed(0)
        qr = generate_ids(model, queries, tok.pad_token_id, gen, "inverse_cdf")
        resp = qr[:, queries.shape[1]:]
        assert (resp[:, :4] != eos).all()
        assert (resp[:, 4] == eos).all()  # nearly all the mass: drawn at the first allowed step
        greedy = _gen_config(False, length=10)
        assert torch.equal(generate_ids(model, queries, tok.pad_token_id, greedy, "inverse_cdf"),
                           generate_ids(model, queries, tok.pad_token_id, greedy))
    finally:
        hook.remove()


def test_the_key_reaches_the_settings_and_is_refused_on_todays_path():
    """(f) schema default multinomial, the value through resolve_settings, an unknown value refused;
    inverse_cdf with today's trl rollout path (the memory plan's `scores`, releasing_rollout_scores)
    refused naming both."""
    assert with_defaults({}, "ppo")["rollout_sampler"] == "multinomial"
    with pytest.raises(ConfigError, match="rollout_sampler"):
        with_defaults({"rollout_sampler": "gumbel"}, "ppo")
    base = dict(CFG)
    assert resolve_settings(base, 16)["rollout_sampler"] == "multinomial"
    assert resolve_settings(dict(base, rollout_sampler="inverse_cdf"), 16)["rollout_sampler"] == "inverse_cdf"
    shape = ModelShape("Qwen/Qwen2.5-0.5B-Instruct", **KNOWN_CONFIGS["Qwen/Qwen2.5-0.5B-Instruct"], source="known")
    cfg = dict(base, rollout_sampler="inverse_cdf")
    assert plan(shape, None, cfg, 0, 80).rollout == "forward"
    for refuse in (lambda: plan(shape, None, cfg, 0, 80, rollout="scores"),
                   lambda: releasing_rollout_scores(sampler="inverse_cdf").__enter__()):
        with pytest.raises(ValueError, match=r"ppo\.rollout_sampler inverse_cdf.*rollout path 'scores'"):
            refuse()


def _run(root, policy, name, sampler):
    out = root / name
    summary = train_ppo(str(policy), None, root / "train.jsonl", out, out / "model", out / "log.csv",
                        dict(CFG, rollout_sampler=sampler), seed=0, rm=LengthRM(), device="cpu")
    return summary, load_file(str(out / "model" / "model.safetensors")), pd.read_csv(out / "log.csv")


def test_a_short_ppo_run_with_inverse_cdf_runs_and_repeats(setup, monkeypatch):  # noqa: F811
    """(g) two runs with the same seed: the same weights and log; the sampler drew every token."""
    root, policy = setup
    draws = []
    real = InverseCDFSampler.draw
    monkeypatch.setattr(InverseCDFSampler, "draw",
                        lambda self, scores: draws.append(scores.shape) or real(self, scores))
    s1, w1, log1 = _run(root, policy, "icdf1", "inverse_cdf")
    n = len(draws)
    assert n >= 3 and all(rows == CFG["batch_size"] for rows, _ in draws)  # one generate call per step
    _, w2, log2 = _run(root, policy, "icdf2", "inverse_cdf")
    assert len(draws) == 2 * n and s1["steps"] == len(log1) == 3
    assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1)
    pd.testing.assert_frame_equal(log1, log2)


def _hf_decode(model, queries, pad, gen):
    """HF's generate under greedy decoding with the sampler as its last logits processor."""
    config, processor = inverse_cdf_generation(gen)
    mask = queries != pad
    out = model.generate(input_ids=torch.masked_fill(queries, ~mask, 0), attention_mask=mask,
                         generation_config=config, logits_processor=[processor])
    return out[:, queries.shape[1]:]


@torch.no_grad()
@pytest.mark.parametrize("temperature, min_new", [(0.7, 0), (1.0, 5)])
def test_the_decode_loop_draws_hfs_tokens_for_the_seed(setup, monkeypatch, temperature, min_new):  # noqa: F811
    """decode_inverse_cdf (what the forward path runs) against HF's generate with the sampler as its
    processor: the same token ids for the same seed, left-padded prompts, rows ending at EOS at
    different steps (then padded), EOS held back before min_new_tokens; and its fallback through HF
    for a model whose forward takes no cache argument."""
    _, policy = setup
    model, tok, queries = _model_and_queries(policy)
    pad, eos = tok.pad_token_id, tok.eos_token_id
    gen = _gen_config(True, temperature)
    gen.min_new_tokens = min_new or None
    mask = queries != pad
    assert (~mask).any()  # left padding
    for seed in (0, 1):
        torch.manual_seed(seed)
        want = _hf_decode(model, queries, pad, gen)
        torch.manual_seed(seed)
        got = decode_inverse_cdf(model, torch.masked_fill(queries, ~mask, 0), mask, gen)
        assert torch.equal(got, want)
        ended = (got == eos).any(1)
        assert ended.any() and (~ended).any() or got.shape[1] < gen.max_new_tokens
        assert not (got[:, :min_new] == eos).any()
        first = torch.where(ended, (got == eos).int().argmax(1), got.shape[1])
        after = torch.arange(got.shape[1]) > first[:, None]
        assert (got[after] == pad).all()  # after its EOS a row holds pads
    monkeypatch.setattr(sampler_mod, "cache_argument", lambda model: None)
    torch.manual_seed(0)
    again = decode_inverse_cdf(model, torch.masked_fill(queries, ~mask, 0), mask, gen)
    torch.manual_seed(0)
    assert torch.equal(again, _hf_decode(model, queries, pad, gen))
    monkeypatch.undo()
    # a forward that takes a cache but leaves it empty: HF's generate too, before any draw
    real_forward, fallbacks = model.forward, []
    monkeypatch.setattr(sampler_mod, "_decode_with_hf", lambda *a: fallbacks.append(a) or "hf")

    def forward(input_ids=None, attention_mask=None, position_ids=None, cache=None, use_cache=None, **kw):
        return real_forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                            use_cache=False, **kw)

    monkeypatch.setattr(model, "forward", forward)
    assert decode_inverse_cdf(model, torch.masked_fill(queries, ~mask, 0), mask, gen) == "hf" and len(fallbacks) == 1


def test_the_decode_loop_keeps_its_cache_under_gradient_checkpointing_in_train_mode(setup, monkeypatch):  # noqa: F811
    """trl's policy generates in train mode with gradient checkpointing on (config.yaml's PPO): the
    loop still fills and uses its KV cache (no fallback to HF's generate) and draws the tokens an
    eval-mode model draws for the seed."""
    _, policy = setup
    model, tok, queries = _model_and_queries(policy)
    mask = queries != tok.pad_token_id
    ids, gen = torch.masked_fill(queries, ~mask, 0), _gen_config(True, 1.0)
    torch.manual_seed(3)
    want = decode_inverse_cdf(model, ids, mask, gen)
    model.gradient_checkpointing_enable()
    model.train()
    assert torch.is_grad_enabled() and model.model.gradient_checkpointing

    def no_fallback(*a):
        raise AssertionError("decode_inverse_cdf fell back to HF's generate")

    monkeypatch.setattr(sampler_mod, "_decode_with_hf", no_fallback)
    torch.manual_seed(3)
    assert torch.equal(decode_inverse_cdf(model, ids, mask, gen), want)


def test_the_decode_loop_refuses_what_it_does_not_apply(setup):  # noqa: F811
    """A processor HF would build (here from the model's own generation_config, which fills the
    fields the rollout config leaves unset) or a missing length is refused, naming the field; so
    is a row with no finite logit."""
    from transformers import GenerationConfig

    _, policy = setup
    model, _, _ = _model_and_queries(policy, n=2)
    gen = _gen_config(True, 1.0)
    assert decode_settings(model, gen)["eos"] == [model.generation_config.eos_token_id]
    model.generation_config.repetition_penalty = 1.1
    with pytest.raises(ValueError, match="ppo.rollout_sampler inverse_cdf.*repetition_penalty"):
        decode_settings(model, gen)
    gen.repetition_penalty = 1.0  # set by the caller: the model's value does not fill it
    assert decode_settings(model, gen)["temperature"] == pytest.approx(1.0 + 1e-7, abs=0)
    model.generation_config.repetition_penalty = None
    for bad in (dict(no_repeat_ngram_size=3), dict(top_k=20), dict(suppress_tokens=[5])):
        with pytest.raises(ValueError, match=next(iter(bad))):
            decode_settings(model, GenerationConfig(max_new_tokens=4, do_sample=True, **bad))
    for length in (dict(max_length=30), dict(max_new_tokens=0)):
        with pytest.raises(ValueError, match="max_new_tokens"):
            decode_settings(model, GenerationConfig(do_sample=True, **length))
    scores = torch.randn(3, 2 * BLOCK)
    scores[1] = -math.inf
    with pytest.raises(ValueError, match=r"rows \[1\] have no finite"):
        InverseCDFSampler(1.0).draw(scores)
