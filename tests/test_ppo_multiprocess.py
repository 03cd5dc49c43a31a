"""PPO with 2 training processes on CPU (torchrun, gloo): trains, checkpoints, is killed (SIGKILL
to the whole process group), resumes, and ends with the same policy and log as an uninterrupted
2-process run. The same launcher runs one process per GPU on a cluster node."""
import os
import signal
import subprocess
import time

import pandas as pd
import pytest
import torch
from ppo_tiny import make_policy_dir, make_prompt_rows
from safetensors.torch import load_file

from prbench.downstream.checkpoints import list_checkpoints
from prbench.downstream.ppo.launch import launch_command, run_ppo_job
from prbench.io import read_json, write_jsonl

# global batch 8 = 2 processes x 4 rollouts; mini-batch 4 = 2 processes x micro-batch 1 x accumulation 2
CFG = dict(actor_lr=2e-3, critic_lr=2e-3, batch_size=8, mini_batch_size=4, ppo_epochs=1, total_episodes=32,
           response_length=6, temperature=1.0, kl_coef=0.05, save_steps=2, nan_reward=-1.0,
           per_device_batch_size=1, local_rollout_forward_batch_size=2)
STEPS = 4


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (torchrun starts its workers in sessions of their own)."""
    out = []
    try:
        children = [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return out
    for c in children:
        out += [c] + _descendants(c)
    return out


def _kill_all(pid: int) -> None:
    for p in _descendants(pid) + [pid]:  # the workers first, then the agent
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _spec(root, policy, name):
    out = root / name
    return dict(policy_path=str(policy), rm_spec={"kind": "length", "name": "length"},
                train_prompts=str(root / "train.jsonl"), out_dir=str(out), model_out=str(out / "model"),
                log_csv=str(out / "train_log.csv"), ppo_cfg=CFG, seed=0, run_name="tiny-2proc")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ppo2")
    policy = make_policy_dir(root / "policy")
    write_jsonl(root / "train.jsonl", make_prompt_rows(20, seed=1))
    return root, policy


def test_two_processes_kill_and_resume_match_uninterrupted(setup):
    root, policy = setup
    full = run_ppo_job(_spec(root, policy, "full"), 2, cpu=True, timeout=300)
    assert full["processes"] == 2 and full["gradient_accumulation"] == 2 and full["micro_batch_size"] == 1
    assert full["steps"] == STEPS and full["reward_scored"] == 32  # both processes' rollouts counted
    ref_log = pd.read_csv(root / "full" / "train_log.csv")
    assert list(ref_log["step"]) == list(range(1, STEPS + 1)) and (ref_log["reward_scored"] == 8).all()
    assert (ref_log["reward_n"] == 8).all() and ref_log["reward_sd"].notna().all()  # both processes summed
    ref_w = load_file(str(root / "full" / "model" / "model.safetensors"))
    base_w = load_file(str(policy / "model.safetensors"))
    assert any(not torch.equal(base_w[k], ref_w[k]) for k in base_w)

    # kill the launcher and both training processes (SIGKILL, no cleanup) once a checkpoint is complete
    spec = _spec(root, policy, "killed")
    cmd, env, _ = launch_command(spec, 2, cpu=True)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt_root = root / "killed" / "checkpoints"
    deadline = time.time() + 240
    try:
        while not list_checkpoints(ckpt_root) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            _kill_all(proc.pid)
        proc.wait()
    time.sleep(1)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    killed_at = read_json(list_checkpoints(ckpt_root)[-1] / "state.json")["step"]
    assert 1 <= killed_at < STEPS
    assert not (root / "killed" / "train_log.csv").exists()

    res = run_ppo_job(spec, 2, cpu=True, timeout=300)
    assert res["resumed_from"] == killed_at and res["steps"] == STEPS
    log = pd.read_csv(root / "killed" / "train_log.csv")
    pd.testing.assert_frame_equal(log.drop(columns=["lr"]), ref_log.drop(columns=["lr"]), check_exact=False,
                                  rtol=1e-6)
    w = load_file(str(root / "killed" / "model" / "model.safetensors"))
    for k in ref_w:
        torch.testing.assert_close(w[k], ref_w[k], rtol=1e-5, atol=1e-6)
    assert res["reward_scored"] == full["reward_scored"]
