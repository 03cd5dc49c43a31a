"""GRPO checkpoints (prbench.downstream.grpo.train, grpo.save_steps): a tiny run interrupted and resumed ends with
exactly the log and weights of an uninterrupted run, saving changes nothing, and a checkpoint of
other settings is discarded."""
import json
import logging

import pytest
import torch
from ppo_tiny import FlakyRM, Interrupt, LengthRM, interrupt_after, make_policy_dir, make_prompt_rows
from safetensors.torch import load_file

from prbench.downstream.checkpoints import list_checkpoints
from prbench.downstream.grpo.train import check_save_steps, resolve_settings, train_grpo
from prbench.io import write_jsonl

# 6 prompts, 2 per step: 3 steps per epoch, so 6 steps cross an epoch boundary (trl's sampler order)
GRPO = {"num_generations": 4, "prompts_per_step": 2, "steps": 6, "max_completion_length": 10, "lr": 1e-3,
        "temperature": 1.0, "top_p": 0.9, "per_device_batch_size": 4, "nan_reward": -1.0}
STEPS = 6


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("grpo_resume")
    policy = make_policy_dir(root / "policy")
    write_jsonl(root / "train.jsonl", make_prompt_rows(6, seed=3))
    return root, policy


def run(root, policy, name, cfg=GRPO, callbacks=()):
    out = root / name
    return out, train_grpo(str(policy), None, root / "train.jsonl", out, out / "model", out / "train_log.csv",
                           dict(cfg), seed=0, rm=FlakyRM(LengthRM()), device="cpu", callbacks=callbacks)


def assert_same_run(a, b):
    assert (a / "train_log.csv").read_bytes() == (b / "train_log.csv").read_bytes()
    wa, wb = load_file(str(a / "model" / "model.safetensors")), load_file(str(b / "model" / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def reference(setup):
    """The uninterrupted run without checkpoints."""
    root, policy = setup
    out, summary = run(root, policy, "ref", dict(GRPO, save_steps=None))
    assert summary["resumed_from"] is None and summary["reward_failures"] > 0
    return out, summary


def test_saving_changes_nothing(setup, reference):
    root, policy = setup
    out, summary = run(root, policy, "saving", dict(GRPO, save_steps=2))
    assert_same_run(out, reference[0])
    assert summary == reference[1]
    assert not (out / "checkpoints").exists()  # removed after the successful run


def test_interrupted_runs_resume_to_the_uninterrupted_result(setup, reference, caplog):
    root, policy = setup
    cfg = dict(GRPO, save_steps=2)
    out = root / "interrupted"
    # killed after step 3: the newest checkpoint is step 2 (epoch 0)
    with pytest.raises(Interrupt):
        run(root, policy, "interrupted", cfg, [interrupt_after(3)])
    ckpts = list_checkpoints(out / "checkpoints")
    assert [c.name for c in ckpts] == ["step-000002"]
    state = json.loads((ckpts[0] / "state.json").read_text())
    assert state["step"] == 2 and state["reward_scored"] == 2 * 2 * 4
    assert len((ckpts[0] / "log.jsonl").read_text().splitlines()) == 2
    assert not (out / "train_log.csv").exists()
    # resumed from step 2, killed again after step 5: the newest checkpoint is step 4 (epoch 1)
    with caplog.at_level(logging.INFO, logger="prbench.downstream.grpo.train"), pytest.raises(Interrupt):
        run(root, policy, "interrupted", cfg, [interrupt_after(5)])
    assert "resuming GRPO from" in caplog.text and "step-000002" in caplog.text
    assert [c.name for c in list_checkpoints(out / "checkpoints")] == ["step-000004"]
    # resumed from step 4: same log (byte for byte), weights (tensor for tensor) and summary
    out, summary = run(root, policy, "interrupted", cfg)
    assert summary["resumed_from"] == 4
    assert_same_run(out, reference[0])
    assert {k: v for k, v in summary.items() if k != "resumed_from"} == \
        {k: v for k, v in reference[1].items() if k != "resumed_from"}
    assert not (out / "checkpoints").exists()


def test_checkpoint_of_other_settings_is_discarded(setup, caplog):
    root, policy = setup
    with pytest.raises(Interrupt):
        run(root, policy, "changed", dict(GRPO, save_steps=2), [interrupt_after(3)])
    assert len(list_checkpoints(root / "changed" / "checkpoints")) == 1
    with caplog.at_level(logging.WARNING, logger="prbench.downstream.checkpoints"):
        _, summary = run(root, policy, "changed", dict(GRPO, save_steps=2, lr=2e-3))
    assert summary["resumed_from"] is None  # started from step 0
    assert "discarding GRPO checkpoints" in caplog.text


def test_save_steps_is_validated():
    s = resolve_settings(dict(GRPO, save_steps=3, num_iterations=2), 6)
    with pytest.raises(ValueError, match="grpo.save_steps"):
        check_save_steps(s)
    with pytest.raises(ValueError, match="grpo.save_steps"):
        check_save_steps(resolve_settings(dict(GRPO, save_steps=0), 6))
    check_save_steps(resolve_settings(dict(GRPO, save_steps=4, num_iterations=2), 6))
    check_save_steps(resolve_settings(dict(GRPO, save_steps=None), 6))
