"""Rollout scores released as trl reads them (prbench.downstream.ppo.rollout): same values, shorter lifetime."""
import pandas as pd
import pytest
import torch
from ppo_tiny import LengthRM, make_policy_dir, make_prompt_rows
from safetensors.torch import load_file

import prbench.downstream.ppo.train as ppo_mod
from prbench.downstream.ppo.rollout import ReleasingScores, releasing_rollout_scores
from prbench.downstream.ppo.train import train_ppo
from prbench.io import write_jsonl

# Responses stop at EOS at different lengths, so chunks have different widths and need padding.
CFG = dict(actor_lr=2e-3, critic_lr=2e-3, batch_size=8, mini_batch_size=4, ppo_epochs=1, total_episodes=24,
           response_length=12, temperature=1.0, kl_coef=0.05, save_steps=10, local_rollout_forward_batch_size=3)


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


def test_context_restores_trls_function():
    from trl.experimental.ppo import ppo_trainer as trl_ppo

    original = trl_ppo.batch_generation
    with releasing_rollout_scores():
        assert trl_ppo.batch_generation is not original
    assert trl_ppo.batch_generation is original
    with releasing_rollout_scores(enabled=False):
        assert trl_ppo.batch_generation is original


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("rollout")
    policy = make_policy_dir(root / "policy")
    write_jsonl(root / "train.jsonl", make_prompt_rows(16, seed=3))
    return root, policy


def _run(root, policy, name):
    out = root / name
    train_ppo(str(policy), None, root / "train.jsonl", out, out / "model", out / "log.csv", dict(CFG), seed=0,
              rm=LengthRM(), device="cpu")
    return load_file(str(out / "model" / "model.safetensors")), pd.read_csv(out / "log.csv")


def test_ppo_run_is_identical_with_trls_own_rollout(setup, monkeypatch):
    root, policy = setup
    w_new, log_new = _run(root, policy, "releasing")
    monkeypatch.setattr(ppo_mod, "releasing_rollout_scores", lambda: releasing_rollout_scores(enabled=False))
    w_old, log_old = _run(root, policy, "trl")
    assert w_new.keys() == w_old.keys()
    for k in w_new:
        assert torch.equal(w_new[k], w_old[k]), k
    cols = [c for c in log_old.columns if c not in ("seconds", "time")]
    pd.testing.assert_frame_equal(log_new[cols], log_old[cols])
    assert len(log_new) == 3
