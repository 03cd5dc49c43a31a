"""PPO on a tiny policy: training curves, checkpoints, and resume after an interruption."""
import json

import numpy as np
import pandas as pd
import pytest
import torch
from ppo_tiny import FlakyRM, Interrupt, LengthRM, interrupt_after, make_policy_dir, make_prompt_rows
from safetensors.torch import load_file

from prbench.downstream.checkpoints import list_checkpoints
from prbench.downstream.ppo.train import resolve_settings, train_ppo
from prbench.io import write_jsonl

CFG = dict(actor_lr=2e-3, critic_lr=2e-3, batch_size=8, mini_batch_size=4, ppo_epochs=1, total_episodes=40,
           response_length=10, temperature=1.0, kl_coef=0.05, save_steps=2, nan_reward=-1.0)
STEPS = 5  # ceil(40 / 8)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ppo")
    policy = make_policy_dir(root / "policy")
    write_jsonl(root / "train.jsonl", make_prompt_rows(20, seed=1))
    return root, policy


def run(root, policy, name, rm=None, callbacks=(), cfg=CFG):
    out = root / name
    return out, train_ppo(str(policy), None, root / "train.jsonl", out, out / "model", out / "train_log.csv",
                          dict(cfg), seed=0, run_name="tiny", rm=rm or FlakyRM(LengthRM()), callbacks=callbacks)


def weights(model_dir):
    return load_file(str(model_dir / "model.safetensors"))


def test_settings_resolve_and_validate():
    s = resolve_settings(CFG, 20)
    assert s["total_steps"] == STEPS and s["total_episodes"] == 40
    assert resolve_settings(dict(CFG, total_episodes=None), 20)["total_episodes"] == 20
    with pytest.raises(ValueError, match="ppo.batch_size"):
        resolve_settings(CFG, 5)
    with pytest.raises(ValueError, match="ppo.mini_batch_size"):
        resolve_settings(dict(CFG, mini_batch_size=3), 20)


def test_interrupted_run_resumes_and_matches_uninterrupted(setup):
    root, policy = setup
    ref_dir, ref = run(root, policy, "full")
    assert ref["resumed_from"] is None and ref["steps"] == STEPS
    ref_log = pd.read_csv(ref_dir / "train_log.csv")
    assert list(ref_log["step"]) == list(range(1, STEPS + 1))
    for col in ("reward", "kl", "entropy", "reward_failures", "loss_policy_avg", "loss_value_avg"):
        assert col in ref_log and ref_log[col].notna().all()
    # NaN rewards were replaced and counted, never silent
    assert ref["reward_failures"] == ref_log["reward_failures"].sum() > 0
    assert (ref_log["reward_scored"] == 8).all()
    # the policy changed
    base_w, final_w = weights(policy), weights(ref_dir / "model")
    assert any(not torch.equal(base_w[k], final_w[k]) for k in base_w)

    # interrupted after step 3: the newest checkpoint is step 2 (save_steps=2)
    out = root / "interrupted"
    with pytest.raises(Interrupt):
        run(root, policy, "interrupted", callbacks=[interrupt_after(3)])
    ckpts = list_checkpoints(out / "checkpoints")
    assert [c.name for c in ckpts] == ["step-000002"]
    assert not (out / "train_log.csv").exists()
    assert json.loads((ckpts[0] / "state.json").read_text())["step"] == 2

    # rerun: resumes from step 2, runs steps 3..5, same total steps, same curve and weights
    out, res = run(root, policy, "interrupted")
    assert res["resumed_from"] == 2 and res["steps"] == STEPS
    log = pd.read_csv(out / "train_log.csv")
    assert list(log["step"]) == list(range(1, STEPS + 1))
    pd.testing.assert_frame_equal(log.drop(columns=["lr"]), ref_log.drop(columns=["lr"]), check_exact=False, rtol=1e-6)
    np.testing.assert_allclose(log["lr"], ref_log["lr"])  # the LR schedule continued, not restarted
    w = weights(out / "model")
    for k in final_w:
        torch.testing.assert_close(w[k], final_w[k], rtol=1e-5, atol=1e-6)
    assert res["reward_failures"] == ref["reward_failures"]
    assert [c.name for c in list_checkpoints(out / "checkpoints")] == [f"step-{STEPS:06d}"]


class Recording(FlakyRM):
    """FlakyRM that keeps every score it returns, in call order."""

    def __init__(self):
        super().__init__(LengthRM())
        self.scores = []

    def score(self, requests):
        out = super().score(requests)
        self.scores += list(out.scores)
        return out


def test_log_gives_each_steps_reward_spread_over_its_rollouts(setup):
    """reward_sd / reward_n (what the reward rise's interval is over): the SD (ddof 1) and count of
    the rewards the trainer got that step, NaN scores as nan_reward; their mean is trl's `reward`."""
    root, policy = setup
    rm = Recording()
    out, _ = run(root, policy, "spread", rm=rm)
    log = pd.read_csv(out / "train_log.csv")
    got = np.where(np.isnan(rm.scores), CFG["nan_reward"], rm.scores).reshape(STEPS, 8)
    assert (log["reward_n"] == 8).all()
    np.testing.assert_allclose(log["reward"], got.mean(axis=1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(log["reward_sd"], got.std(axis=1, ddof=1), rtol=1e-5, atol=1e-6)  # csv: 6 digits
    assert np.isnan(rm.scores).any() and log["reward_sd"].gt(0).any()


def test_changed_settings_do_not_resume(setup):
    root, policy = setup
    with pytest.raises(Interrupt):
        run(root, policy, "changed", callbacks=[interrupt_after(2)])
    _, res = run(root, policy, "changed", cfg=dict(CFG, kl_coef=0.1))
    assert res["resumed_from"] is None  # stale checkpoint (other kl_coef) discarded
