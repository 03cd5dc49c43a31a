"""Memory plan of one trl GRPO run (`prbench.downstream.grpo.train`): the peak bytes on its GPU,
before the first step; rules/grpo.smk refuses a run that does not fit `resources.gpu_mem_gb`,
naming the config keys to change (as rules/ppo.smk does for PPO with `prbench.downstream.ppo.memory`).

train_grpo runs one process on one GPU, with the RM beside the policy. trl's GRPOTrainer
generates each step's whole generation batch (`prompts_per_step x num_generations` completions)
in one `generate` call and keeps only the token ids (no per-token scores); the policy is float32
under bf16 autocast (accelerate wraps its forward), so generation's KV cache and activations are
bf16. The terms, with the model shapes and measured per-token constants of
`prbench.downstream.ppo.memory`:

* weights: the policy in float32 with float32 gradients and two AdamW moments (16 bytes per
  parameter); a bf16 reference copy when `grpo.beta` > 0; the RM in bf16;
* generation (one call over the whole generation batch): the bf16 KV cache over prompt +
  completion, the prefill's activations of one layer over every prompt token (3 x intermediate +
  4 x hidden, bf16), and one decode step's float32 logits copies (`GEN_STEP_COPIES`, 4 more for
  top-p's sort and cumulative sum);
* training, per micro-batch of `per_device_batch_size` completions: the stored activations of the
  policy (as PPO's, one backbone) and the completion logits with their softmax and gradients
  (`TRAIN_RESPONSE_BYTES` per completion token and vocabulary entry: trl computes logits for the
  completion positions only);
* the RM's activations of one scoring batch (`max_tokens_per_batch` tokens of its config entry,
  at least one whole row; `RM_ACT_BYTES`).

The largest phase counts, times `ALLOCATOR_OVERHEAD`. None of this is measured on a GPU yet (no
GPU was lent when it was written): the GRPO terms are sizes built from the PPO calibration.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import entry_with_defaults, with_defaults
from ..ppo.memory import (
    ALLOCATOR_OVERHEAD,
    DEFAULT_PROMPT_TOKENS,
    GB,
    GEN_STEP_COPIES,
    RM_ACT_BYTES,
    TRAIN_RESPONSE_BYTES,
    ModelShape,
    check_reward_fits_one_gpu,
    generation_activations,
    shapes_for_config,
)

TUNING_KEYS = ("grpo.prompts_per_step", "grpo.num_generations", "grpo.per_device_batch_size",
               "grpo.gradient_checkpointing", "grpo.max_prompt_tokens", "grpo.max_completion_length",
               "resources.gpu_mem_gb")
TOP_P_COPIES = 4  # top-p: sorted logits, their int64 indices (2 x 4 bytes), the cumulative softmax


@dataclass
class GRPOPlan:
    generation_batch: int
    micro_batch: int
    prompt_tokens: int
    completion_tokens: int
    gradient_checkpointing: bool
    parts_gb: dict
    peak_gb: float
    limit_gb: float

    @property
    def fits(self) -> bool:
        return self.peak_gb <= self.limit_gb


def grpo_plan(policy: ModelShape, rm: ModelShape | None, grpo: dict, limit_gb: float,
              rm_tokens_per_batch: int = 16384) -> GRPOPlan:
    """The GPU peak of one GRPO run (one process, the RM on the same GPU)."""
    g = entry_with_defaults(grpo, "grpo")
    rows = int(g["prompts_per_step"]) * int(g["num_generations"])
    m = int(g["per_device_batch_size"] or rows)
    P = int(g["max_prompt_tokens"] or DEFAULT_PROMPT_TOKENS)
    R = int(g["max_completion_length"])
    T = P + R
    gc = bool(g["gradient_checkpointing"])
    V, h, L = policy.vocab_size, policy.hidden_size, policy.num_hidden_layers
    parts = {"policy weights, grads, AdamW (fp32)": 16 * policy.params}
    if float(g["beta"]) > 0:
        parts["reference policy (bf16)"] = 2 * policy.params
    ga = generation_activations(policy, rows, P, T, kv_bytes=2, act_bytes=2)
    step = ga["step"] * (GEN_STEP_COPIES + (TOP_P_COPIES if float(g["top_p"]) < 1 else 0)) / GEN_STEP_COPIES
    gen_peak = ga["kv"] + max(ga["prefill"], step)
    parts["generation: one generate call over the generation batch (KV cache, prefill, step logits)"] = gen_peak
    acts = L * (2 if gc else 34) * h * T * m + (34 * h * T * m if gc else 0)
    train_peak = acts + m * R * V * TRAIN_RESPONSE_BYTES
    parts["training: activations + completion logits and gradients (one micro-batch)"] = train_peak
    rm_act = 0.0
    if rm is not None:
        parts["reward model (bf16)"] = 2 * rm.params
        rm_act = max(rm_tokens_per_batch, T) * (rm.hidden_size + rm.intermediate_size) * RM_ACT_BYTES
        parts["reward model: one scoring batch"] = rm_act
    resident = sum(v for k, v in parts.items() if k.startswith(("policy", "reference", "reward model (bf16)")))
    peak = (resident + max(gen_peak, train_peak, rm_act)) * ALLOCATOR_OVERHEAD
    return GRPOPlan(generation_batch=rows, micro_batch=m, prompt_tokens=P, completion_tokens=R,
                    gradient_checkpointing=gc, parts_gb={k: round(v / GB, 2) for k, v in parts.items()},
                    peak_gb=round(peak / GB, 2), limit_gb=float(limit_gb))


def grpo_refusal(p: GRPOPlan) -> str:
    return (f"GRPO does not fit: peak {p.peak_gb:.1f} GB > resources.gpu_mem_gb {p.limit_gb:g} on its one GPU "
            "(largest parts: "
            + ", ".join(f"{k} {v:.1f} GB" for k, v in sorted(p.parts_gb.items(), key=lambda kv: -kv[1])[:3])
            + "). Change config keys " + ", ".join(TUNING_KEYS) + " (see prbench.downstream.grpo.memory).")


def grpo_plan_for_config(config: dict, policy: str, rm: str) -> GRPOPlan:
    limit = float(with_defaults(config.get("resources"), "resources")["gpu_mem_gb"])
    pshape, rshape = shapes_for_config(config, policy, rm)
    entry = config["reward_models"][rm]
    tokens = int(entry.get("max_tokens_per_batch") or 16384)
    return grpo_plan(pshape, rshape, config.get("grpo") or {}, limit, rm_tokens_per_batch=tokens)


def check_grpo_runs(config: dict, policies, rms) -> None:
    """Raise ValueError naming the run and the config keys when a GRPO run's plan does not fit
    (called by rules/grpo.smk at parse time; nothing is planned in the demo, which runs on CPU)."""
    if config["demo"]["enabled"]:
        return

    for r in rms:  # an RM no setting fits beside the policy (never sharded): refused by its grpo.rms entry
        why = check_reward_fits_one_gpu(config, "grpo", r)
        if why:
            raise ValueError(why)
    for p in policies:
        for r in rms:
            pl = grpo_plan_for_config(config, p, r)
            if not pl.fits:
                raise ValueError(f"train_grpo {p}/{r}: {grpo_refusal(pl)}")
