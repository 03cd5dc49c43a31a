"""Memory plan of one trl PPO run: the peak bytes per GPU, before the first step.

The estimate follows what trl 1.12's experimental PPOTrainer holds on a training process's GPU,
with the rollout scores released as read (`prbench.downstream.ppo.rollout`), calibrated on an H100
(`perf/ppo_memory_gpu.py`, runs in perf/gpu_runs/, numbers in perf/README.md):

* weights: policy and critic in float32 with float32 gradients and two AdamW moments
  (16 bytes per parameter each; every process holds full copies: plain DDP, no ZeRO), the
  reference policy in bf16 (2 bytes per parameter);
* rollout, the path `train_ppo` runs (`rollout="forward"`, `prbench.downstream.ppo.rollout`): the
  generation chunk (`ppo.rollout_generation_batch_size` rows per `generate` call; null = the
  largest of local batch, local/2, local/4, ... whose plan fits `resources.gpu_mem_gb`) holds its
  float32 KV cache over prompt + response (the policy generates in float32), the prefill's MLP
  activations of one layer over its prompts (3 x intermediate x 4 bytes per token) and a few
  float32 copies of one step's logits (`GEN_STEP_COPIES`); no scores are kept. Then, per chunk of
  `local_rollout_forward_batch_size` rows, the policy forward over the response positions (float32
  logits, scaled in place, and the log-softmax's work, counted as a second copy) and the
  reference forward over the full query + response (bf16 logits over prompt + response tokens
  and a float32 log-softmax of the response slice); the largest of the three phases counts. Not
  yet measured on a GPU (no GPU was lent when it was written): its terms are sizes, not calibrated;
* rollout, today's trl path (`rollout="scores"`, the path of every run in perf/gpu_runs): the
  float32 scores of `generate(output_scores=True)` for the whole local batch (local batch x
  response length x vocab x 4 bytes; one copy: trl's own code keeps up to three, see
  `prbench.downstream.ppo.rollout`) plus one chunk's stacking copy and the KV cache of one
  generation chunk; then the reference forward per chunk, while the scores are still alive;
* training: per micro-batch (`per_device_batch_size` rows) the policy-and-value forward and
  backward over prompt + response: `TRAIN_LOGIT_BYTES` bytes per token and vocabulary entry over
  the whole sequence, `TRAIN_RESPONSE_BYTES` over the response slice (both measured), and the
  stored activations of both backbones (34 bytes x hidden per token and layer, Korthikanti et al.
  2022; with gradient checkpointing 2 bytes x hidden per token and layer plus one layer's full
  activations);
* the reward model in bf16 with the activations of one forward chunk (`RM_ACT_BYTES` bytes per
  token and unit of hidden + intermediate size, measured); with more than one GPU the RM lives on
  its own GPU (the last one), where every training process keeps its copy;
* `ALLOCATOR_OVERHEAD`: PyTorch's caching allocator reserved 3-4% above the allocated peak.

Model shapes come from the model's `config.json` when it is a local folder, else from
`KNOWN_CONFIGS` (the hub models of config.yaml), else from a generic shape scaled from the config
entry's `params_b` (marked approximate). The GPU count of `train_ppo` is `ppo.gpus`, or the smallest
count whose plan fits `resources.gpu_mem_gb` (`gpus_per_run`, called by rules/ppo.smk). `check_plan`
raises with the config keys to change.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from ...config import entry_with_defaults, with_defaults

GB = 1e9
# Calibrated on an NVIDIA H100 (perf/ppo_memory_gpu.py; perf/README.md): Qwen2.5-0.5B
# shape, micro-batch 4, prompts of 2,039-4,092 tokens + 512 response tokens; Llama-3.1-8B RM at
# 2,560 and 8,704 tokens per row.
TRAIN_LOGIT_BYTES = 13.0     # per micro-batch token x vocab entry, whole sequence (measured 12.5)
TRAIN_RESPONSE_BYTES = 12.0  # per micro-batch response token x vocab entry (measured 11.6)
RM_ACT_BYTES = 14.0          # per RM chunk token x (hidden + intermediate) (measured 13.6-13.7)
ALLOCATOR_OVERHEAD = 1.04    # reserved / allocated at the peak (measured 1.034-1.038)
# The authors' prompt limit, assumed when ppo.max_prompt_tokens is null (prompts are not capped).
DEFAULT_PROMPT_TOKENS = 8192
# float32 copies of one decode step's logits alive at once in `generate` with sampling (the logits,
# the temperature-scaled scores, the probabilities, the sampler's exponential draws): a size, not
# measured.
GEN_STEP_COPIES = 4
ROLLOUT_PATHS = ("forward", "scores")
# ppo.rollout_sampler (prbench.downstream.ppo.sampler): GEN_STEP_COPIES planned either way; the
# inverse-CDF decode loop holds 1-2 of them (the logits, their float32 copy under bf16), so its
# plan is an upper bound by up to 3 copies of one step's logits (117 MB at 64 rows of Qwen2.5's vocabulary).
ROLLOUT_SAMPLERS = ("multinomial", "inverse_cdf")

# Shapes of the hub models config.yaml names (from their config.json; parameters counted once).
KNOWN_CONFIGS: dict[str, dict] = {
    "Qwen/Qwen2.5-0.5B-Instruct": dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24,
                                       num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
                                       params=0.494e9),
    # Llama-3.1-8B backbone with a scalar head (no 128256 x 4096 LM head): 8.03B - 0.53B
    "Skywork/Skywork-Reward-V2-Llama-3.1-8B": dict(vocab_size=128256, hidden_size=4096, num_hidden_layers=32,
                                                  num_attention_heads=32, num_key_value_heads=8,
                                                  intermediate_size=14336, params=7.50e9),
}
SHAPE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "intermediate_size")
# Keys a refused plan names.
TUNING_KEYS = ("ppo.gpus", "ppo.per_device_batch_size", "ppo.local_rollout_forward_batch_size",
               "ppo.rollout_generation_batch_size", "ppo.gradient_checkpointing", "ppo.max_prompt_tokens",
               "ppo.response_length", "ppo.batch_size", "resources.gpu_mem_gb")


@dataclass
class ModelShape:
    name: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    params: float
    source: str  # config.json | known | approximate


def _params_from_shape(c: dict) -> float:
    h, L, i, v = c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"], c["vocab_size"]
    kv = c.get("num_key_value_heads") or c["num_attention_heads"]
    head_dim = h // c["num_attention_heads"]
    attn = 2 * h * h + 2 * h * kv * head_dim
    per_layer = attn + 3 * h * i + 2 * h
    emb = v * h * (1 if c.get("tie_word_embeddings", True) else 2)
    return float(L * per_layer + emb)


def model_shape(ref: str, params_b: float | None = None) -> ModelShape:
    """The shape of a model: local config.json, the built-in table, or a generic approximation."""
    p = Path(ref)
    cfg_file = p / "config.json"
    if cfg_file.is_file():
        c = json.loads(cfg_file.read_text())
        c = c.get("text_config", c) if "hidden_size" not in c else c
        missing = [k for k in SHAPE_KEYS[:4] + ("intermediate_size",) if k not in c]
        if missing:
            raise ValueError(f"{cfg_file}: lacks {missing} (needed for the PPO memory plan)")
        c.setdefault("num_key_value_heads", c["num_attention_heads"])
        return ModelShape(ref, *(int(c[k]) for k in SHAPE_KEYS), _params_from_shape(c), "config.json")
    if ref in KNOWN_CONFIGS:
        return ModelShape(ref, **KNOWN_CONFIGS[ref], source="known")
    if params_b is None:
        raise ValueError(f"model {ref!r}: no local config.json, not in prbench.downstream.ppo.memory.KNOWN_CONFIGS "
                         "and no params_b in its config entry; cannot plan PPO memory")
    # generic decoder: 12 L h^2 parameters, 32 layers at >= 4B, vocab 128k
    layers = 32 if params_b >= 4 else 24
    h = int(math.sqrt(params_b * 1e9 / (12 * layers)) // 128 * 128) or 128
    return ModelShape(ref, 128256, h, layers, max(1, h // 128), max(1, h // 512), int(3.5 * h), params_b * 1e9,
                      "approximate")


@dataclass
class Plan:
    gpus: int
    train_processes: int
    rm_own_gpu: bool
    local_batch: int
    per_device_batch_size: int
    gradient_accumulation: int
    rollout_chunk: int
    generation_chunk: int
    rollout: str
    prompt_tokens: int
    response_length: int
    gradient_checkpointing: bool
    parts_gb: dict
    rollout_gb: float  # the rollout phase's peak above the weights (generation, logprob, reference)
    train_gpu_gb: float
    rm_gpu_gb: float
    peak_gb: float
    limit_gb: float

    @property
    def fits(self) -> bool:
        return self.peak_gb <= self.limit_gb


def layout(batch_size: int, mini_batch_size: int, gpus: int, per_device: int | None) -> tuple[int, int, int]:
    """(training processes, per-device micro-batch, gradient accumulation) for `gpus` GPUs.

    One GPU: one process with the RM beside it; more: gpus - 1 training processes, the RM on the
    last GPU. Each optimizer step sees `mini_batch_size` rollouts in all:
    processes x per_device x accumulation."""
    procs = max(1, gpus - 1) if gpus > 1 else 1
    if mini_batch_size % procs or batch_size % procs:
        raise ValueError(f"config keys ppo.gpus / ppo.mini_batch_size: {procs} training processes do not divide "
                         f"ppo.mini_batch_size {mini_batch_size} and ppo.batch_size {batch_size}")
    per_proc = mini_batch_size // procs
    m = per_device or per_proc
    if per_proc % m:
        raise ValueError(f"config key ppo.per_device_batch_size: {m} does not divide the per-process mini-batch "
                         f"{per_proc} (ppo.mini_batch_size {mini_batch_size} / {procs} processes)")
    return procs, m, per_proc // m


def generation_activations(shape: ModelShape, rows: int, prompt: int, total: int, kv_bytes: int,
                           act_bytes: int) -> dict:
    """Bytes of one `generate` call over `rows` rows: KV cache over prompt + response, the
    prefill's activations of one layer (MLP gate/up/act over the prompt tokens, hidden states) and
    GEN_STEP_COPIES float32 copies of one step's logits."""
    head_dim = shape.hidden_size // shape.num_attention_heads
    kv = 2 * shape.num_hidden_layers * shape.num_key_value_heads * head_dim * total * rows * kv_bytes
    prefill = rows * prompt * (3 * shape.intermediate_size + 4 * shape.hidden_size) * act_bytes
    step = GEN_STEP_COPIES * rows * shape.vocab_size * 4
    return {"kv": kv, "prefill": prefill, "step": step}


def check_sampler_path(sampler: str, rollout: str) -> None:
    """ppo.rollout_sampler inverse_cdf needs the forward rollout path (`forward_logprob_rollouts`,
    what train_ppo runs); today's trl path (`rollout="scores"`: `releasing_rollout_scores`, the memory
    plan's scores path) samples inside trl's `generate` with HF's multinomial."""
    if sampler not in ROLLOUT_SAMPLERS:
        raise ValueError(f"config key ppo.rollout_sampler: one of {ROLLOUT_SAMPLERS}, got {sampler!r}")
    if sampler == "inverse_cdf" and rollout != "forward":
        raise ValueError(f"config key ppo.rollout_sampler inverse_cdf: only the forward rollout path "
                         f"(rollout='forward', ids generated, logprobs from a forward) draws with it; the rollout "
                         f"path {rollout!r} (trl's generate with its scores) draws with HF's multinomial")


def plan(policy: ModelShape, rm: ModelShape | None, ppo: dict, gpus: int, limit_gb: float,
         rollout: str = "forward") -> Plan:
    """The per-GPU peak of a PPO run on `gpus` GPUs (0 = CPU: planned as one device), for the
    rollout path `train_ppo` runs (`forward`) or today's trl path (`scores`, the measured runs).
    A null `ppo.rollout_generation_batch_size` is resolved to the largest generation chunk that
    fits `limit_gb` (local batch, then halved)."""
    ppo = entry_with_defaults(ppo, "ppo")  # a partial section (tests, params) gets the schema's defaults
    if rollout not in ROLLOUT_PATHS:
        raise ValueError(f"rollout path {rollout!r}: one of {ROLLOUT_PATHS}")
    check_sampler_path(ppo["rollout_sampler"], rollout)
    g = max(1, int(gpus))
    procs, _, _ = layout(ppo["batch_size"], ppo["mini_batch_size"], g, ppo["per_device_batch_size"])
    local = ppo["batch_size"] // procs
    if rollout == "forward" and not ppo.get("rollout_generation_batch_size"):
        tried, gen = [], local
        while True:
            p = _plan(policy, rm, dict(ppo, rollout_generation_batch_size=gen), g, limit_gb, rollout)
            if p.fits:
                return p
            tried.append(p)
            if gen == 1:
                break
            gen = math.ceil(gen / 2)
        # nothing fits (another phase is too large): the largest chunk that does not raise the peak
        return next(p for p in tried if p.peak_gb <= tried[-1].peak_gb)
    return _plan(policy, rm, ppo, g, limit_gb, rollout)


def _plan(policy: ModelShape, rm: ModelShape | None, ppo: dict, g: int, limit_gb: float, rollout: str) -> Plan:
    procs, m, accum = layout(ppo["batch_size"], ppo["mini_batch_size"], g, ppo["per_device_batch_size"])
    local = ppo["batch_size"] // procs
    chunk = min(local, ppo["local_rollout_forward_batch_size"] or min(local, 64))
    P = int(ppo["max_prompt_tokens"] or DEFAULT_PROMPT_TOKENS)
    R = int(ppo["response_length"])
    T = P + R
    gc = bool(ppo["gradient_checkpointing"])
    V, h, L = policy.vocab_size, policy.hidden_size, policy.num_hidden_layers
    head_dim = h // policy.num_attention_heads
    parts = {}
    parts["policy+critic weights, grads, AdamW (fp32)"] = 2 * 16 * policy.params
    parts["reference policy (bf16)"] = 2 * policy.params
    weights = sum(parts.values())
    ref_chunk = chunk * T * V * 2 + chunk * R * V * 4
    if rollout == "scores":
        gen = chunk
        rollout_logits = local * R * V * 4
        kv_cache = 2 * L * policy.num_key_value_heads * head_dim * T * chunk * 2
        stack_copy = chunk * R * V * 4  # trl's generate stacks one chunk's scores
        rollout_peak = rollout_logits + max(stack_copy + kv_cache, ref_chunk)
        parts["rollout: scores of the local batch (fp32, released as read)"] = rollout_logits
    else:
        gen = min(local, int(ppo["rollout_generation_batch_size"] or local))
        ga = generation_activations(policy, gen, P, T, kv_bytes=4, act_bytes=4)  # float32 policy
        gen_peak = ga["kv"] + max(ga["prefill"], ga["step"])
        logprob_chunk = 2 * chunk * R * V * 4  # response logits (scaled in place) and log-softmax work
        rollout_peak = max(gen_peak, logprob_chunk, ref_chunk)
        parts["rollout: generate of one generation chunk (KV cache, prefill, step logits)"] = gen_peak
        parts["rollout: policy logprob forward of one chunk (response logits, fp32)"] = logprob_chunk
    parts["rollout: reference forward of one chunk"] = ref_chunk
    act_per_layer = (2 if gc else 34) * h * T * m
    acts = 2 * (L * act_per_layer + (34 * h * T * m if gc else 0))  # policy and value backbones
    train_logits = m * T * V * TRAIN_LOGIT_BYTES + m * R * V * TRAIN_RESPONSE_BYTES
    train_peak = acts + train_logits
    parts["training: activations of policy and value (one micro-batch)"] = acts
    parts["training: logits, softmax and their gradients (one micro-batch)"] = train_logits
    rm_gb = 0.0
    rm_gpu = 0.0
    if rm is not None:
        rm_w = 2 * rm.params
        rm_act = chunk * T * (rm.hidden_size + rm.intermediate_size) * RM_ACT_BYTES
        parts["reward model (bf16) + one forward chunk"] = rm_w + rm_act
        rm_gb = rm_w + rm_act
        if g > 1:
            rm_gpu = (procs * rm_w + rm_act) * ALLOCATOR_OVERHEAD  # a copy per training process, one chunk at a time
    train_gpu = (weights + max(rollout_peak, train_peak) + (rm_gb if g == 1 else 0.0)) * ALLOCATOR_OVERHEAD
    peak = max(train_gpu, rm_gpu)
    return Plan(gpus=g, train_processes=procs, rm_own_gpu=g > 1, local_batch=local, per_device_batch_size=m,
                gradient_accumulation=accum, rollout_chunk=chunk, generation_chunk=gen, rollout=rollout,
                prompt_tokens=P, response_length=R,
                gradient_checkpointing=gc, parts_gb={k: round(v / GB, 2) for k, v in parts.items()},
                rollout_gb=round(rollout_peak / GB, 2),
                train_gpu_gb=round(train_gpu / GB, 2), rm_gpu_gb=round(rm_gpu / GB, 2),
                peak_gb=round(peak / GB, 2), limit_gb=float(limit_gb))


def refusal(p: Plan) -> str:
    return (f"PPO does not fit: peak {p.peak_gb:.1f} GB per GPU on {p.gpus} GPU(s) > resources.gpu_mem_gb "
            f"{p.limit_gb:g} (largest parts: "
            + ", ".join(f"{k} {v:.1f} GB" for k, v in sorted(p.parts_gb.items(), key=lambda kv: -kv[1])[:3])
            + "). Change config keys " + ", ".join(TUNING_KEYS) + " (see perf/ppo_memory.py).")


def check_plan(p: Plan) -> Plan:
    if not p.fits:
        raise ValueError(refusal(p))
    return p


REPLICA_MODEL_DIR = "results/replica/models"  # rules/common.smk: the folders rules/replica.smk builds


def planned_ref(config: dict, ref: str) -> str:
    """The model a plan is made for: a replica folder (config `replica`, rules/replica.smk) is planned as
    the hub model it stands in for (`replica.models.<name>.replicates`), built or not. So the plan, and
    the params it sets (GPUs, generation batch), are the same before the DAG builds the replica and after:
    a rerun with nothing changed reruns nothing (tests/test_replica_e2e.py), and the replica run plans
    what the real run would."""
    p = Path(ref)
    if p.parent.as_posix() != REPLICA_MODEL_DIR:
        return ref
    spec = ((config.get("replica") or {}).get("models") or {}).get(p.name) or {}
    return str(spec.get("replicates") or ref)


def shapes_for_config(config: dict, policy: str, rm: str) -> tuple[ModelShape, ModelShape | None]:
    pol = config["policies"][policy]
    entry = config["reward_models"][rm]
    pol_ref = f"results/models/policy/{policy}" if pol.get("train") else planned_ref(config, pol["path"])
    pshape = model_shape(pol_ref, pol.get("params_b"))
    if entry.get("kind") == "length":
        return pshape, None
    if "train" in entry:
        ref = f"results/models/rm/{rm}"
    elif "from_policy" in entry:
        ref = config["policies"][entry["from_policy"]]["path"]
    else:
        ref = planned_ref(config, entry["path"])
    try:
        rshape = model_shape(ref, entry.get("params_b"))
    except ValueError:
        if "train" in entry or "from_policy" in entry:  # built inside the DAG: not there yet at parse time
            rshape = pshape
        else:
            raise
    return pshape, rshape


def plan_for_config(config: dict, policy: str, rm: str, gpus: int | None = None, max_gpus: int = 8) -> Plan:
    """The plan at `gpus` GPUs (default `ppo.gpus`, else the smallest count from 1 to `max_gpus`
    that fits; the last one tried when none does)."""
    ppo = config["ppo"]
    limit = float(with_defaults(config.get("resources"), "resources")["gpu_mem_gb"])
    pshape, rshape = shapes_for_config(config, policy, rm)
    if gpus is None:
        gpus = entry_with_defaults(ppo, "ppo")["gpus"]
    if gpus is not None:
        return plan(pshape, rshape, ppo, gpus, limit)
    last = None
    for g in range(1, max_gpus + 1):
        try:
            last = plan(pshape, rshape, ppo, g, limit)
        except ValueError:
            continue
        if last.fits:
            return last
    if last is None:
        raise ValueError("config keys ppo.mini_batch_size / ppo.per_device_batch_size: no GPU count from 1 to "
                         f"{max_gpus} divides the batch")
    return last


def gpus_per_run(config: dict, policies, rms) -> dict[tuple[str, str], int]:
    """GPUs of each train_ppo job, keyed (policy, rm): 0 in the demo (CPU only), else the GPU count of
    the run's plan (`plan_for_config`: `ppo.gpus`, or the smallest count that fits
    `resources.gpu_mem_gb`). A plan that does not fit raises ValueError naming the run and the config
    keys to change, so the workflow stops at parse time; an RM whose weights alone exceed one GPU
    raises naming `ppo.rms` (`check_reward_fits_one_gpu` below: no tuning key helps)."""
    if config["demo"]["enabled"]:
        return {(p, r): 0 for p in policies for r in rms}

    for r in rms:  # an RM no GPU count can hold (the RM is never sharded here): refused by its ppo.rms entry
        why = check_reward_fits_one_gpu(config, "ppo", r)
        if why:
            raise ValueError(why)
    out = {}
    for p in policies:
        for r in rms:
            run_plan = plan_for_config(config, p, r)
            if not run_plan.fits:
                raise ValueError(f"train_ppo {p}/{r}: {refusal(run_plan)}")
            out[(p, r)] = run_plan.gpus
    return out


def generation_chunk_per_run(config: dict, policies, rms) -> dict[tuple[str, str], int | None]:
    """Rows per rollout `generate` call of each train_ppo job, keyed (policy, rm): the plan's
    generation chunk at the job's GPU count (`ppo.rollout_generation_batch_size`, or the largest
    that fits `resources.gpu_mem_gb`); None in the demo (CPU: the whole local batch)."""
    if config["demo"]["enabled"]:
        return {(p, r): None for p in policies for r in rms}
    return {(p, r): plan_for_config(config, p, r).generation_chunk for p in policies for r in rms}


def format_plan(p: Plan, title: str = "") -> str:
    lines = [f"PPO memory plan {title}".rstrip(),
             f"  layout: {p.gpus} GPU(s), {p.train_processes} training process(es)"
             + (", RM on its own GPU" if p.rm_own_gpu else ", RM on the training GPU"),
             f"  batch: local rollout batch {p.local_batch}, micro-batch {p.per_device_batch_size} x "
             f"gradient accumulation {p.gradient_accumulation}, rollout forward chunk {p.rollout_chunk}, "
             f"generation chunk {p.generation_chunk} ({p.rollout} path), "
             f"gradient checkpointing {'on' if p.gradient_checkpointing else 'off'}",
             f"  tokens: prompt {p.prompt_tokens} + response {p.response_length}"]
    for k, v in p.parts_gb.items():
        lines.append(f"  {v:8.2f} GB  {k}")
    lines.append(f"  training GPU {p.train_gpu_gb:.2f} GB" + (f", RM GPU {p.rm_gpu_gb:.2f} GB" if p.rm_own_gpu else ""))
    return "\n".join(lines)


def plan_dict(p: Plan) -> dict:
    return asdict(p)


# ---- RMs as PPO / GRPO rewards (prbench.plan.resources reads these too) ----------------------------

DTYPE_BYTES = {"auto": 2, "bfloat16": 2, "float16": 2, "float32": 4}  # auto = bf16 on GPU (models.auto_dtype)
DEFAULT_RM_B = 0.5  # an RM with no shape and no params_b: planned as 0.5B (the rules' old default)


def resource_limits(cfg: dict) -> tuple[float, int]:
    r = with_defaults(cfg.get("resources"), "resources")
    return float(r["gpu_mem_gb"]), int(r["cpu_mem_mb"])


def rm_ref(cfg: dict, rm: str) -> str:
    """The model an RM is planned as (as `shapes_for_config` reads it): its weights' folder, a replica
    folder as the hub model it stands in for (`planned_ref`)."""
    e = cfg["reward_models"][rm]
    if "train" in e:
        return f"results/models/rm/{rm}"
    if "from_policy" in e:
        return cfg["policies"][e["from_policy"]]["path"]
    if "path" in e:
        return planned_ref(cfg, str(e["path"]))
    return f"results/models/rm/{rm}"  # a kind with no model folder (length): planned as a trained RM's


def rm_shape(cfg: dict, rm: str):
    e = cfg["reward_models"][rm]
    try:
        return model_shape(rm_ref(cfg, rm), e.get("params_b"))
    except ValueError:  # no config.json, not in the table, no params_b: as the rules' old default
        return model_shape(rm_ref(cfg, rm), DEFAULT_RM_B)


def rm_kind_info(e: dict):
    from ...rms import kind_info

    return kind_info(e["kind"])


def check_reward_fits_one_gpu(cfg: dict, method: str, rm: str) -> str:
    """'' when the RM's weights fit one GPU; else why it cannot be `method`'s reward (ppo, grpo),
    naming the config keys. Both trainers hold the whole RM on one GPU (PPO: one copy per training
    process on the last GPU, prbench.downstream.ppo.launch; GRPO: beside the policy): no device_map,
    no tensor parallel, so no count of GPUs or batch setting helps."""
    e = cfg["reward_models"][rm]
    if not rm_kind_info(e).uses_gpu:
        return ""
    gpu_mem, _ = resource_limits(cfg)
    spec = entry_with_defaults(e, "reward_models.*")
    shape = rm_shape(cfg, rm)
    w = DTYPE_BYTES[spec["dtype"] or "auto"] * shape.params * ALLOCATOR_OVERHEAD / GB
    if w <= gpu_mem:
        return ""
    chosen = (cfg.get(method) or {}).get("rms")
    how = (f"remove it from {method}.rms" if chosen is not None else
           f"{method}.rms is null (every downstream RM): list the RMs without it, or set "
           f"reward_models.{rm}.downstream: false")
    return (f"config key {method}.rms: reward_models.{rm} ({shape.params / 1e9:.1f}B parameters, {w:.1f} GB of "
            f"weights as loaded) cannot be the {method.upper()} reward at resources.gpu_mem_gb {gpu_mem:g}: train_"
            f"{method} holds the whole RM on one GPU ("
            + ("one copy per training process on the job's last GPU, prbench.downstream.ppo.launch"
               if method == "ppo" else "beside the policy, prbench.downstream.grpo.train")
            + "; no device_map, no tensor parallel), and its weights alone exceed one GPU. "
            f"{how[0].upper() + how[1:]} (it is still scored on the benchmarks and as a BoN scorer, "
            "sharded with device_map).")
