"""GPU memory and GPU count of each inference job: an RM scoring (`rm_sizing`), the judge and the
policy generating (`shared_sizing`). prbench.plan.resources turns them into the jobs' requests (adding
host memory and runtime from the cost model) and prbench.plan.cost multiplies each job's seconds by its
GPUs; this module imports neither, so neither imports the other. prbench.plan.resources' docstring
says how the memory is counted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..config import entry_with_defaults, with_defaults
from ..downstream.ppo.memory import (
    ALLOCATOR_OVERHEAD,
    DTYPE_BYTES,
    GB,
    RM_ACT_BYTES,
    ModelShape,
    generation_activations,
    model_shape,
    planned_ref,
    resource_limits,
    rm_kind_info,
    rm_shape,
    shapes_for_config,
)

# device_map's per-GPU cap: multi_gpu_kwargs' max_memory is 90% of each card (prbench.models)
DEVICE_MAP_FRACTION = 0.9
PROMPT_TOKENS = 1800     # question + 10 profile posts: 1,500-2,000 tokens (perf/README.md, prefix scoring)
JUDGE_PROMPT_TOKENS = 1024  # ASSUMED: the judge's rubric prompt (question, aspects, one answer of <= 512 tokens)
EVAL_BATCH = 32  # generate_answers' batch (prbench.downstream.policy): base and evaluation answers
SHARED_JOBS = {  # rule -> job class (the plan's rows)
    "sample_bon": "BoN sampling", "base_answers": "base answers", "judge_bon": "BoN judging",
    "judge_validity": "judge validity", "eval_policy": "policy evaluation",
}


@dataclass
class Sizing:
    gpus: int                # 0 = no GPU (CPU kinds)
    need_gb: float = 0.0     # GPU memory in all, x ALLOCATOR_OVERHEAD
    parts: dict = field(default_factory=dict)  # bytes, before the overhead
    backend: str = "transformers"
    tensor_parallel: int = 1  # GPUs a vLLM engine reads the weights on at once (1: transformers, device_map)
    shapes: dict = field(default_factory=dict)  # "rm" / "policy" / "judge" -> ModelShape

    @property
    def weights_gb(self) -> float:
        return sum(v for k, v in self.parts.items() if k.endswith("weights")) / GB


def gpus_for_need(need_gb: float, weights_gb: float, gpu_mem_gb: float) -> int:
    """Whole GPUs of `gpu_mem_gb` for a job needing `need_gb` in all, its `weights_gb` under
    device_map's cap of DEVICE_MAP_FRACTION of each GPU when spread over more than one."""
    n = max(1, math.ceil(need_gb / gpu_mem_gb - 1e-9))
    if n > 1:
        n = max(n, math.ceil(weights_gb / (DEVICE_MAP_FRACTION * gpu_mem_gb) - 1e-9))
    return n


# ---- an RM in inference ------------------------------------------------------------------------------

def inference_parts(shape, dtype_bytes: int, generates: bool, tokens_per_batch: int, new_tokens: int,
                    prompt_tokens: int) -> dict:
    """Bytes of an RM in inference: weights, and one batch's activations (classifier forward, or
    one generate call of a generative RM: rows x (prompt + reply) <= tokens_per_batch, one row at least)."""
    parts = {"weights": dtype_bytes * shape.params}
    if generates:
        # one generate call: rows of prompt + reply whose tokens sum to at most tokens_per_batch (one row
        # at least): its KV cache and prefill over that many tokens
        total = max(tokens_per_batch, prompt_tokens + new_tokens)
        ga = generation_activations(shape, 1, total - new_tokens, total, kv_bytes=dtype_bytes, act_bytes=dtype_bytes)
        # the step logits of the most rows a batch can hold (one prompt token each): an upper bound
        step = ga["step"] * max(1, tokens_per_batch // (new_tokens + 1))
        parts["generate: KV cache of one batch"] = ga["kv"]
        parts["generate: prefill activations or step logits"] = max(ga["prefill"], step)
    else:
        parts["forward activations of one batch"] = (max(tokens_per_batch, prompt_tokens)
                                                     * (shape.hidden_size + shape.intermediate_size) * RM_ACT_BYTES)
    return parts


def rm_sizing(cfg: dict, rm: str, stage: str) -> Sizing:
    """An RM's job in inference at `stage` "benchmark" (score_benchmark) or "bon" (score_bon): its
    weights and one batch over the fewest GPUs that hold them (device_map over several); 0 GPUs for a
    kind that runs on the CPU."""
    if stage not in ("benchmark", "bon"):
        raise ValueError(f"stage {stage!r}: benchmark or bon")
    e = cfg["reward_models"][rm]
    info = rm_kind_info(e)
    if not info.uses_gpu:
        return Sizing(0)
    spec = entry_with_defaults(e, "reward_models.*")
    shape = rm_shape(cfg, rm)
    scoring = with_defaults(cfg.get("scoring"), "scoring")
    tokens = int(e.get("max_tokens_per_batch") or scoring["max_tokens_per_batch"])
    prompt = int(spec.get("max_length") or scoring["max_length"] or 8192)
    new = int(spec["max_new_tokens"])
    if stage == "bon" and info.generates:
        reward = entry_with_defaults(cfg.get("reward") or {}, "reward")
        if reward["generative"] == "pointwise":
            new = int(reward["generative_max_new_tokens"])
    parts = inference_parts(shape, DTYPE_BYTES[spec["dtype"] or "auto"], info.generates, tokens, new, prompt)
    need = sum(parts.values()) * ALLOCATOR_OVERHEAD / GB
    gpus = gpus_for_need(need, parts["weights"] / GB, resource_limits(cfg)[0])
    return Sizing(gpus, need, parts, shapes={"rm": shape})


# ---- the judge's and the policy's jobs ------------------------------------------------------------------

def judge_shape(cfg: dict) -> ModelShape:
    judge = cfg["judge"]
    try:
        return model_shape(planned_ref(cfg, str(judge["model"])), judge.get("params_b"))
    except ValueError:  # no config.json, not in the table, no params_b: as the rules' old default (1B)
        return model_shape(str(judge["model"]), 1.0)


def policy_shape(cfg: dict, policy: str) -> ModelShape:
    """The policy's shape as the PPO memory plan reads it."""
    return shapes_for_config(cfg, policy, next(iter(cfg["reward_models"])))[0]


def _gen_parts(prefix: str, shape, rows: int, prompt: int, new: int) -> dict:
    """Bytes of a bf16 model generating `rows` rows of `prompt` + `new` tokens: weights, KV cache,
    the larger of the prefill's activations and the step logits."""
    ga = generation_activations(shape, rows, prompt, prompt + new, kv_bytes=2, act_bytes=2)
    return {f"{prefix} weights": 2 * shape.params, f"{prefix} KV cache": ga["kv"],
            f"{prefix} prefill or step logits": max(ga["prefill"], ga["step"])}


def engine(cfg: dict, job: str) -> tuple[str, dict]:
    """(backend, vLLM engine section) of a job: the judge's for the judging jobs and eval_policy, bon's for
    sample_bon (its vLLM engine reads no section: the judge schema's defaults, prbench.models.vllm_engine_kwargs)."""
    if job == "sample_bon":
        return ("vllm" if cfg["bon"].get("backend") == "vllm" else "transformers"), {}
    if job == "base_answers":
        return "transformers", {}
    judge = entry_with_defaults(cfg["judge"], "judge")
    return judge["backend"], judge


def uses_judge(job: str) -> bool:
    return job in ("judge_bon", "judge_validity", "eval_policy")


def _shared_parts(cfg: dict, job: str, shapes: dict, backend: str) -> dict:
    """Bytes of a judge or policy job: the policy generating (sampling: bon.batch_size rows of
    PROMPT_TOKENS + bon.max_new_tokens; answers: EVAL_BATCH rows of ppo.eval_max_new_tokens), the judge
    (judge.batch_size rows of JUDGE_PROMPT_TOKENS + judge.max_new_tokens; minilm: its weights only);
    eval_policy holds both (an upper bound)."""
    parts: dict = {}
    if job in ("sample_bon", "base_answers", "eval_policy"):
        if job == "sample_bon":
            rows, new = int(cfg["bon"].get("batch_size") or 32), int(cfg["bon"]["max_new_tokens"])
        else:
            rows, new = EVAL_BATCH, int(entry_with_defaults(cfg["ppo"], "ppo")["eval_max_new_tokens"])
        parts.update(_gen_parts("policy", shapes["policy"], rows, PROMPT_TOKENS, new))
    if uses_judge(job):
        judge = cfg["judge"]
        if backend == "minilm":  # a sentence encoder: its weights only
            parts["judge weights"] = 2 * shapes["judge"].params
        else:
            parts.update(_gen_parts("judge", shapes["judge"], int(judge.get("batch_size") or 16),
                                    JUDGE_PROMPT_TOKENS, int(judge["max_new_tokens"])))
    return parts


def shared_sizing(cfg: dict, job: str, policy: str | None = None) -> Sizing:
    """One judge or policy job (`job`: a key of SHARED_JOBS; `policy`: the config's first when None):
    transformers over the fewest GPUs that hold it (device_map over several); vLLM over the fewest whose
    gpu_memory_utilization share holds it, tensor parallel over judge.tensor_parallel_size of them (null:
    all). Raises ValueError naming judge.tensor_parallel_size when the judge's size does not fit its job."""
    if job not in SHARED_JOBS:
        raise ValueError(f"job {job!r}: one of {sorted(SHARED_JOBS)}")
    gpu_mem, _ = resource_limits(cfg)
    shapes = {"policy": policy_shape(cfg, policy or next(iter(cfg["policies"])))}
    if uses_judge(job):
        shapes["judge"] = judge_shape(cfg)
    backend, eng = engine(cfg, job)
    parts = _shared_parts(cfg, job, shapes, backend)
    need = sum(parts.values()) * ALLOCATOR_OVERHEAD / GB
    s = Sizing(0, need, parts, backend, shapes=shapes)
    if backend == "vllm":
        util = float(entry_with_defaults(eng, "judge")["gpu_memory_utilization"])
        s.gpus = max(1, math.ceil(need / (util * gpu_mem) - 1e-9))
        s.tensor_parallel = int(eng.get("tensor_parallel_size") or s.gpus)
        if uses_judge(job):
            _check_tp(s.tensor_parallel, s.gpus, need, util, gpu_mem, job)
    else:
        s.gpus = gpus_for_need(need, s.weights_gb, gpu_mem)
    return s


def _check_tp(tp: int, gpus: int, need: float, util: float, gpu_mem: float, job: str) -> None:
    where = (f"the {job} job holds {gpus} GPU(s): the judge's weights and one batch's KV cache, {need:.1f} GB, in "
             f"judge.gpu_memory_utilization {util:g} of resources.gpu_mem_gb {gpu_mem:g} per GPU "
             "(prbench.plan.resources.shared_job)")
    if tp > gpus:
        raise ValueError(f"config key judge.tensor_parallel_size: {tp} exceeds the GPUs of its jobs; {where}. "
                         f"Set it to at most {gpus}, or null (every GPU the job holds)")
    if need / tp > util * gpu_mem:
        raise ValueError(f"config key judge.tensor_parallel_size: {tp} GPU(s) cannot hold the judge "
                         f"({need / tp:.1f} GB each); {where}. Set it to {gpus}, or null")
