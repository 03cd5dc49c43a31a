"""Demo policy: tokenizer + chat template, seeded sampling independent of batching, SFT training."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from prbench import prompts as P
from prbench.downstream import policy as pol
from prbench.io import write_jsonl
from prbench.training import policy as dp


@pytest.fixture(scope="module")
def tiny():
    from bon_helpers import make_tiny_chat_lm

    return make_tiny_chat_lm(seed=1)


ROWS = [{"question_id": f"S/q{i}", "subset": "S", "question": q, "profile": prof}
        for i, (q, prof) in enumerate([
            ("Any tips for movie nights?", ["I love jazz and quiet evenings."]),
            ("What should I cook tonight?", []),
            ("Where should I hike?", ["Try a long hike in the mountains.", "I love jazz."]),
            ("Which comedy should I watch with friends this weekend?", ["Watch a comedy with friends."]),
        ])]


def test_tokenizer_and_chat_template(tiny):
    _, tok = tiny
    assert tok.pad_token == dp.PAD and tok.eos_token == dp.EOS and tok.pad_token_id != tok.eos_token_id
    text = P.render_chat(tok, P.policy_messages("Any tips?", ["post one"]), add_generation_prompt=True)
    assert text.startswith("<|im_start|>user\nHere are some of my previous posts:\n1. post one")
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text  # byte-level BPE round-trips


def test_tokenizer_keeps_hyphenated_words_whole_and_round_trips():
    texts = ["Prioritize budget-friendly picks; anything low-cost fits you well.",
             "I like old-school films, and well-known ones too!", "Spent 12 dollars on it.\n\nOK"] * 20
    tok = dp.train_tokenizer(texts, 400, 256)
    pieces = tok.convert_ids_to_tokens(tok(texts[0], add_special_tokens=False)["input_ids"])
    assert "Ġbudget-friendly" in pieces and "Ġlow-cost" in pieces  # one token each, not "-friendly" pieces
    for t in texts[:3] + ["Unseen wörds – and symbols: ∑ 42.", "  two  spaces\tand tab"]:
        ids = tok(t, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == t  # still byte-level: any text round-trips


def test_gumbel_sampler_matches_softmax_and_top_p():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 0.5]])
    n = 20000
    seeds = list(range(n))
    proc = pol.GumbelSampler(seeds, prompt_len=3, temperature=1.0, top_p=1.0)
    picks = proc(torch.zeros((n, 3), dtype=torch.long), logits.expand(n, -1)).argmax(-1)
    freq = np.bincount(picks.numpy(), minlength=5) / n
    assert np.abs(freq - torch.softmax(logits[0], -1).numpy()).max() < 0.015
    # temperature 0.5 sharpens to softmax(2 * logits)
    proc = pol.GumbelSampler(seeds, prompt_len=3, temperature=0.5)
    freq = np.bincount(proc(torch.zeros((n, 3), dtype=torch.long), logits.expand(n, -1)).argmax(-1).numpy(),
                       minlength=5) / n
    assert np.abs(freq - torch.softmax(2 * logits[0], -1).numpy()).max() < 0.015
    # top_p 0.6 keeps only the two most likely tokens (p = 0.47, 0.17 cumulative 0.64)
    proc = pol.GumbelSampler(seeds, prompt_len=3, top_p=0.6)
    picks = set(proc(torch.zeros((n, 3), dtype=torch.long), logits.expand(n, -1)).argmax(-1).tolist())
    assert picks == {0, 1}
    # the noise depends on the step: a later step gives different draws for the same seeds
    u3 = pol.hashed_uniform(torch.tensor([5, 6]), 3, 50)
    u4 = pol.hashed_uniform(torch.tensor([5, 6]), 4, 50)
    assert not torch.equal(u3, u4) and float(u3.min()) > 0 and float(u3.max()) < 1


def _mix32_py(x: int) -> int:
    x = ((x >> 16) ^ x) * 0x45D9F3B & 0xFFFFFFFF
    x = ((x >> 16) ^ x) * 0x45D9F3B & 0xFFFFFFFF
    return (x >> 16) ^ x


def test_hashed_uniform_is_the_integer_hash_of_seed_step_and_token():
    """Each noise value is the documented 32-bit hash of (row seed, step, token id), computed here
    one value at a time in Python integers: the tensor path (in place, token hashes cached) agrees."""
    seeds, vocab = [0, 5, 0xFFFFFFFF, 2654435761], 300
    for step in (0, 1, 77, 10**6):
        u = pol.hashed_uniform(torch.tensor(seeds), step, vocab)
        for r, seed in enumerate(seeds):
            row = _mix32_py((seed ^ _mix32_py(step * 0x9E3779B1 & 0xFFFFFFFF)) & 0xFFFFFFFF)
            for t in (0, 1, 123, vocab - 1):
                tok = _mix32_py(t * 0x85EBCA6B & 0xFFFFFFFF)
                x = _mix32_py(_mix32_py(row ^ tok) ^ (row * 0x27D4EB2F & 0xFFFFFFFF))
                assert float(u[r, t]) == (x + 0.5) / 4294967296.0
    assert torch.equal(pol.hashed_uniform(torch.tensor(seeds), 3, 50), pol.hashed_uniform(torch.tensor(seeds), 3, 50))


def test_gumbel_sampler_hashes_only_the_nucleus_candidates_with_the_same_result():
    """The sampler's output equals the whole-vocabulary formula, element for element: float32 of
    float64(logits / T, top-k and top-p dropped to -inf) + -log(-log(noise of every token)). Rows whose
    nucleus lies in the top 64 (peaked), rows sorted in full (flat) and both in one batch; vocabularies
    under, at and over 64; with and without top-k; at several steps."""
    gen = torch.Generator().manual_seed(0)
    peaked = torch.randn(24, 2048, generator=gen) * 6.0
    flat = torch.randn(24, 2048, generator=gen) * 0.3
    cases = (peaked, flat, torch.cat([peaked[:12], flat[:12]]), peaked[:, :50], peaked[:, :64], peaked[:, :65])
    for logits in cases:
        seeds = [(i * 2654435761 + 17) & 0xFFFFFFFF for i in range(logits.shape[0])]
        for temperature, top_p, top_k in ((1.0, 0.9, 0), (0.7, 0.5, 0), (1.0, 0.99, 4), (1.0, 1.0, 0),
                                          (0.7, 1.0, 4), (1.0, 0.9, 100)):
            proc = pol.GumbelSampler(seeds, 5, temperature, top_p, top_k)
            for length in (5, 6, 40):
                got = proc(torch.zeros((logits.shape[0], length), dtype=torch.long), logits)
                ref = logits / temperature
                if 0 < top_k < ref.shape[-1]:
                    ref = ref.masked_fill(ref < torch.topk(ref, top_k, -1).values[..., -1:], float("-inf"))
                if top_p < 1.0:
                    ref = ref.masked_fill(pol.top_p_drop(ref, top_p), float("-inf"))
                u = pol.hashed_uniform(torch.tensor(seeds), length - 5, ref.shape[-1])
                ref = (ref.double() - torch.log(-torch.log(u))).to(torch.float32)
                assert got.dtype == torch.float32 and torch.equal(got, ref)
                assert bool(torch.isfinite(got).any(-1).all())


def test_generate_answers_deterministic_and_batch_independent(tiny):
    model, tok = tiny
    kw = dict(n=3, temperature=1.0, max_new_tokens=12, seed=7, progress=False)
    a = pol.generate_answers(model, tok, ROWS, batch_size=32, **kw)
    assert len(a) == len(ROWS) and all(len(x) == 3 for x in a)
    assert pol.generate_answers(model, tok, ROWS, batch_size=32, **kw) == a
    assert pol.generate_answers(model, tok, ROWS, batch_size=1, **kw) == a  # batch size does not matter
    rev = pol.generate_answers(model, tok, ROWS[::-1], batch_size=5, **kw)[::-1]
    assert rev == a  # nor does the prompt order (shards)
    assert pol.generate_answers(model, tok, ROWS[:1], batch_size=2, **kw) == a[:1]
    other = pol.generate_answers(model, tok, ROWS, batch_size=32, **{**kw, "seed": 8})
    assert other != a
    assert len({s for x in a for s in x}) > 3  # sampling gives different answers
    g = pol.generate_answers(model, tok, ROWS, n=2, greedy=True, max_new_tokens=8, progress=False)
    assert all(x[0] == x[1] for x in g)


def test_save_and_load_policy(tiny, tmp_path):
    model, tok = tiny
    model.save_pretrained(tmp_path / "p")
    tok.save_pretrained(tmp_path / "p")
    assert (tmp_path / "p" / "model.safetensors").exists()
    m2, t2 = pol.load_policy(str(tmp_path / "p"), device="cpu")
    assert t2.padding_side == "left" and t2.pad_token == dp.PAD and t2.chat_template
    kw = dict(n=2, max_new_tokens=8, seed=3, progress=False)
    assert pol.generate_answers(m2, t2, ROWS, **kw) == pol.generate_answers(model, tok, ROWS, **kw)


def _pairs(n=12):
    out = []
    for i in range(n):
        out.append({"pair_id": f"S/p{i}", "question_id": f"S/p{i}", "subset": "S", "section": "S",
                    "question": f"Any tips for movie night number {i}?",
                    "profile": [f"I love quiet jazz evenings, post {j} of many words here." for j in range(4)],
                    "chosen": "Try a quiet jazz film night at home.", "rejected": "Watch a loud action blockbuster."})
    return out


def test_sft_examples_cover_answers_and_both_judge_orders():
    tok = dp.train_tokenizer([json.dumps(p) for p in _pairs()] + [P.PAIRWISE_TEMPLATE], 400, 512)
    ex, stats = dp.build_sft_examples(_pairs(40), tok, max_length=512, seed=0, judge_fraction=0.5,
                                       reference_fraction=0.5)
    assert stats["answer"] == 80 and stats["judge"] + stats["judge_reference"] == 80 and stats["too_long"] == 0
    assert 0 < stats["judge"] < 80
    answers = [e["completion"][0]["content"] for e in ex if "Which answer" not in e["prompt"][0]["content"]]
    assert (answers.count("Try a quiet jazz film night at home.")
            == answers.count("Watch a loud action blockbuster.") == 40)
    judge = [e for e in ex if "Which answer" in e["prompt"][0]["content"]]
    for e in judge:
        text, target = e["prompt"][0]["content"], e["completion"][0]["content"]
        a = text.split("[Answer A]\n")[1].split("\n\n[Answer B]")[0]
        b = text.split("[Answer B]\n")[1].split("\n\n")[0]
        winner = a if target == "Result: A" else b
        loser = b if target == "Result: A" else a
        assert winner == "Try a quiet jazz film night at home." or loser == "Watch a loud action blockbuster."
        assert (winner, loser) != (dp.REFERENCE_ANSWER, "Try a quiet jazz film night at home.")
    targets = [e["completion"][0]["content"] for e in judge]
    assert {"Result: A", "Result: B"} == set(targets)
    # a tight max_length drops the lowest-ranked posts instead of truncating the completion
    ex2, st2 = dp.build_sft_examples(_pairs(4), tok, max_length=120, seed=0, judge_fraction=1.0, reference_fraction=0)
    assert st2["posts_dropped"] > 0
    for e in ex2:
        L = len(tok(P.render_chat(tok, e["prompt"] + e["completion"]), add_special_tokens=False)["input_ids"])
        assert L <= 120 or "previous posts" not in e["prompt"][0]["content"]


def test_train_demo_policy_tiny(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", _pairs(16))
    cfg = {"hidden_size": 32, "layers": 1, "heads": 2, "vocab_size": 400, "epochs": 2, "lr": 3e-3, "batch_size": 8,
           "max_length": 256}
    rep = dp.train_demo_policy(str(tmp_path / "train.jsonl"), str(tmp_path / "model"), cfg, seed=0, threads=1)
    out = Path(tmp_path / "model")
    assert (out / "model.safetensors").exists() and (out / "train_report.json").exists()
    assert rep["examples"]["answer"] == 32 and rep["last_logged_loss"] < rep["first_logged_loss"]
    assert rep["examples"]["judge"] + rep["examples"]["judge_reference"] > 0  # judge_examples: true (default)
    model, tok = pol.load_policy(str(out), device="cpu")
    assert model.config.num_hidden_layers == 1 and tok.chat_template == dp.CHAT_TEMPLATE
    ans = pol.generate_answers(model, tok, ROWS[:2], n=2, max_new_tokens=10, seed=0, progress=False)
    assert all(isinstance(s, str) for x in ans for s in x)


def test_top_p_drop_needs_only_the_top_k_where_the_nucleus_fits():
    """The top-k shortcut drops exactly the tokens the full sort drops: peaked rows (nucleus inside
    the top k), flat rows (the full sort) and a mix of both in one batch."""
    gen = torch.Generator().manual_seed(0)
    peaked = torch.randn(40, 2048, generator=gen) * 6.0
    flat = torch.randn(40, 2048, generator=gen) * 0.3
    for logits in (peaked, flat, torch.cat([peaked[:20], flat[:20]])):
        for p in (0.5, 0.9, 0.99):
            full = pol.top_p_drop(logits, p, k=logits.shape[-1])  # the whole vocabulary sorted, every row
            assert torch.equal(pol.top_p_drop(logits, p, k=64), full)
            probs = torch.softmax(logits, -1)
            kept = probs.masked_fill(full, 0.0).sum(-1)
            smallest_kept = probs.masked_fill(full, 2.0).min(-1).values
            assert bool((kept >= p - 1e-6).all()) and bool((kept - smallest_kept < p + 1e-6).all())
    assert bool(pol.top_p_drop(peaked, 0.9, k=64)[:, :].sum(-1).min() > 1900)  # a peaked row keeps few tokens


def test_top_p_drop_sums_in_float64_and_ignores_the_batch():
    """The nucleus edge is decided by float64 running sums of the (float32) probabilities, as numpy
    computes them here, and a row's mask does not depend on the rows beside it."""
    gen = torch.Generator().manual_seed(1)
    logits = torch.cat([torch.randn(32, 1855, generator=gen) * 6.0, torch.randn(32, 1855, generator=gen) * 0.5])
    probs = torch.softmax(logits, -1).numpy().astype(np.float64)
    for p in (0.8, 0.9, 0.95):
        mask = pol.top_p_drop(logits, p)
        order = np.argsort(-probs, axis=-1, kind="stable")
        top = np.take_along_axis(probs, order, -1)
        ref = np.ones_like(probs, dtype=bool)
        np.put_along_axis(ref, order, (np.cumsum(top, -1) - top) >= p, -1)
        # equal only up to ties at the edge (equal float32 probabilities, which either order may break):
        # each differing token has a tied partner that differs the other way
        for r, c in np.argwhere(mask.numpy() != ref):
            tied = np.flatnonzero((probs[r] == probs[r, c]) & (mask[r].numpy() != ref[r]))
            assert len(tied) >= 2 and ref[r, tied].any() and not ref[r, tied].all()
        assert (mask.numpy() != ref).sum() <= 2
        for r in (0, 17, 40, 63):
            assert torch.equal(pol.top_p_drop(logits[r:r + 1], p)[0], mask[r])
    # a top_p just above a float64 running sum that float32 rounds up past it: float64 keeps the token
    flat = logits[32:]
    top, _ = torch.sort(torch.softmax(flat, -1), descending=True, dim=-1)
    b32, b64 = (top.cumsum(-1) - top).double(), top.double().cumsum(-1) - top.double()
    r, j = np.unravel_index(int(torch.argmax(b32 - b64)), b32.shape)
    assert b32[r, j] - b64[r, j] > 1e-8
    edge = float(b64[r, j] + b32[r, j]) / 2
    kept = int((~pol.top_p_drop(flat[r:r + 1], edge)).sum())
    assert kept == j + 1  # tokens 0..j: the one before which the float64 sum is still below top_p


def test_train_demo_policy_without_judge_examples(tmp_path):
    """demo_training.policy.judge_examples false: answer examples only, the same answers as with them."""
    write_jsonl(tmp_path / "train.jsonl", _pairs(16))
    cfg = {"hidden_size": 16, "layers": 1, "heads": 2, "vocab_size": 400, "epochs": 1, "lr": 3e-3, "batch_size": 8,
           "max_length": 256, "judge_examples": False}
    rep = dp.train_demo_policy(str(tmp_path / "train.jsonl"), str(tmp_path / "model"), cfg, seed=0, threads=1)
    assert rep["examples"]["answer"] == 32 and rep["examples"]["judge"] == rep["examples"]["judge_reference"] == 0
    assert rep["n_examples"] == 32 and rep["steps"] == 4


def test_a_policy_judge_needs_the_policys_judge_examples():
    import copy

    import yaml
    from helpers import REPO

    from prbench.config import ConfigError
    from prbench.validation import check_config

    cfg = yaml.safe_load((REPO / "configs" / "test.yaml").read_text())
    check_config(copy.deepcopy(cfg))
    cfg.setdefault("demo_training", {}).setdefault("policy", {})["judge_examples"] = False
    with pytest.raises(ConfigError, match=r"config key demo_training\.policy\.judge_examples: false, but "
                                          r"reward_models\.policy_judge\.from_policy judges with the trained policy"):
        check_config(cfg)
