"""The PPO settings where the authors' verl and trl differ (ppo.gae_lambda, ppo.cliprange_value,
ppo.lr_scheduler, ppo.weight_decay) reach trl's PPOConfig and the optimizer trl runs; unit level,
no training."""
import pytest
import torch

from prbench.config import entry_with_defaults
from prbench.downstream.ppo.train import TRAIN_KEYS, _PPORun, build_optimizer, resolve_settings

BASE = dict(actor_lr=1e-3, critic_lr=2e-3, batch_size=8, mini_batch_size=4, ppo_epochs=1, total_episodes=40,
            response_length=10, temperature=1.0, kl_coef=0.0)
VERL = dict(gae_lambda=1.0, cliprange_value=0.5, lr_scheduler="constant", weight_decay=0.01)


def _trl_config(cfg):
    s = resolve_settings(cfg, 20)
    return _PPORun("unused", None, [], "unused", s, 0, "fp", False, "cpu")._ppo_config()


def test_schema_defaults_are_trls_own():
    """The schema's defaults equal trl's PPOConfig defaults (the project's behaviour before the keys)."""
    from trl.experimental.ppo import PPOConfig

    d = entry_with_defaults({}, "ppo")
    fields = PPOConfig.__dataclass_fields__
    assert d["gae_lambda"] == fields["lam"].default
    assert d["cliprange_value"] == fields["cliprange_value"].default
    assert d["lr_scheduler"] == fields["lr_scheduler_type"].default
    assert d["weight_decay"] == fields["weight_decay"].default


@pytest.mark.parametrize("keys", [{}, VERL, dict(gae_lambda=0.9, cliprange_value=0.3)])
def test_values_reach_trls_config(keys):
    args = _trl_config({**BASE, **keys})
    want = {**entry_with_defaults({}, "ppo"), **keys}
    assert args.lam == want["gae_lambda"]
    assert args.cliprange_value == want["cliprange_value"]
    assert str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)) == want["lr_scheduler"]
    assert args.weight_decay == want["weight_decay"]


def test_keys_are_part_of_the_checkpoint_fingerprint():
    """A changed value does not resume another value's checkpoint."""
    assert {"gae_lambda", "cliprange_value", "lr_scheduler", "weight_decay"} <= set(TRAIN_KEYS)


def _lrs_after(cfg, steps):
    s = resolve_settings(cfg, 20)  # 5 steps
    policy, value = torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)
    opt, sched = build_optimizer(policy, value, s)
    for _ in range(steps):
        opt.step()
        sched.step()
    return opt, [g["lr"] for g in opt.param_groups]


def test_constant_schedule_keeps_both_rates_and_linear_decays_them():
    opt, lrs = _lrs_after({**BASE, **VERL}, 4)
    assert lrs == [1e-3, 2e-3]
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.01]
    opt, lrs = _lrs_after(BASE, 4)  # trl's linear decay over 5 steps: 1/5 of each rate left
    assert lrs == pytest.approx([1e-3 / 5, 2e-3 / 5])
    assert [g["weight_decay"] for g in opt.param_groups] == [0.0, 0.0]


def test_weight_decay_shrinks_weights_without_gradient():
    """AdamW's decoupled decay acts: with a zero gradient, weights shrink by lr * weight_decay per step."""
    s = resolve_settings({**BASE, **VERL}, 20)
    policy, value = torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)
    w0 = policy.weight.detach().clone()
    opt, _ = build_optimizer(policy, value, s)
    for p in list(policy.parameters()) + list(value.parameters()):
        p.grad = torch.zeros_like(p)
    opt.step()
    torch.testing.assert_close(policy.weight.detach(), w0 * (1 - 1e-3 * 0.01))

