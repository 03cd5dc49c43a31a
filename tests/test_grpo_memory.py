"""GRPO memory plan (prbench.downstream.grpo.memory): sizes by hand, the paper config fits its one
GPU, and a run that does not fit is refused naming the run and the config keys."""
import pytest
from helpers import REPO

from prbench.downstream.grpo.memory import check_grpo_runs, grpo_plan, grpo_plan_for_config, grpo_refusal
from prbench.downstream.ppo.memory import KNOWN_CONFIGS, ModelShape
from prbench.validation import load_config

QWEN = ModelShape("Qwen/Qwen2.5-0.5B-Instruct", **KNOWN_CONFIGS["Qwen/Qwen2.5-0.5B-Instruct"], source="known")
PAPER = dict(prompts_per_step=16, num_generations=8, per_device_batch_size=4, gradient_checkpointing=True,
             max_prompt_tokens=8192, max_completion_length=512, top_p=0.9, beta=0.0)


def test_generation_of_the_whole_batch_by_hand():
    p = grpo_plan(QWEN, None, PAPER, 80)
    assert p.generation_batch == 128 and p.micro_batch == 4
    kv = 2 * 24 * 2 * 64 * 2 * (8192 + 512) * 128          # bf16 K and V, 24 layers, 2 KV heads of 64
    prefill = 128 * 8192 * (3 * 4864 + 4 * 896) * 2        # one layer's MLP + hidden states, bf16
    gen = p.parts_gb["generation: one generate call over the generation batch (KV cache, prefill, step logits)"]
    assert gen == pytest.approx((kv + prefill) / 1e9, abs=0.01)
    assert p.parts_gb["policy weights, grads, AdamW (fp32)"] == pytest.approx(16 * QWEN.params / 1e9, abs=0.01)
    assert "reference policy (bf16)" not in p.parts_gb  # beta 0: no reference model
    assert "reference policy (bf16)" in grpo_plan(QWEN, None, dict(PAPER, beta=0.04), 80).parts_gb
    assert p.peak_gb == pytest.approx((16 * QWEN.params + kv + prefill) * 1.04 / 1e9, abs=0.01)


def test_whole_batch_micro_batch_without_checkpointing_is_refused_with_the_keys():
    p = grpo_plan(QWEN, None, dict(PAPER, per_device_batch_size=None, gradient_checkpointing=False), 80)
    assert not p.fits and p.micro_batch == 128
    msg = grpo_refusal(p)
    for key in ("grpo.per_device_batch_size", "grpo.gradient_checkpointing", "grpo.prompts_per_step",
                "grpo.num_generations", "grpo.max_prompt_tokens", "resources.gpu_mem_gb"):
        assert key in msg


def test_paper_config_fits_and_a_smaller_gpu_names_the_run():
    cfg = load_config(REPO / "config.yaml")
    for rm in cfg["reward_models"]:
        p = grpo_plan_for_config(cfg, "qwen25_05b", rm)
        assert p.fits, (rm, p)
    check_grpo_runs(cfg, list(cfg["policies"]), list(cfg["reward_models"]))
    cfg["resources"]["gpu_mem_gb"] = 40
    with pytest.raises(ValueError) as err:
        check_grpo_runs(cfg, ["qwen25_05b"], ["skywork_v2_llama8b"])
    assert str(err.value).startswith("train_grpo qwen25_05b/skywork_v2_llama8b: GRPO does not fit: peak ")
    demo = load_config(REPO / "configs" / "demo.yaml")
    check_grpo_runs(demo, list(demo["policies"]), list(demo["reward_models"]))  # CPU: nothing planned
