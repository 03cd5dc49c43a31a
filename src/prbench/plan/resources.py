"""Resources of each GPU job class per model (GPUs, host memory, runtime, sharding), from the memory
plans and the cost model; rules/common.smk's resource functions and `python -m prbench.plan` both
call this module, so the Snakefile and the plan cannot disagree. Imports no torch. The inference
jobs' GPU memory and GPU counts are computed in `prbench.plan.sizing` (the cost model reads them there
too); this module adds host memory, runtime and sharding.

Job classes of an RM (`rm_inference`, `ppo_reward`, `grpo_reward`):

* benchmark scoring (`score_benchmark`, one job per RM x benchmark) and BoN scoring (`score_bon`,
  one job per RM x policy x sample set): the RM in inference. GPU memory = its weights at the load
  dtype (bf16 on GPU unless the entry's `dtype` says otherwise: 2 or 4 bytes per parameter) plus one
  batch of `scoring.max_tokens_per_batch` tokens: a classifier's forward activations
  (`RM_ACT_BYTES` per token x (hidden + intermediate), measured on an 8B RM, perf/README.md), a
  generative RM's `generate` call (bf16 KV cache over the batch's tokens, the prefill's activations
  of one layer, the step logits: `prbench.downstream.ppo.memory.generation_activations`), times
  `ALLOCATOR_OVERHEAD`. GPUs: the fewest whole GPUs of `resources.gpu_mem_gb` that hold it, and
  enough that the weights fit under device_map's per-GPU cap (`sizing.DEVICE_MAP_FRACTION`). More
  than one GPU: "device_map over N GPUs" (`prbench.models.multi_gpu_kwargs`: every transformers RM
  load in a job that sees several GPUs); the RM loaders have no vLLM path, so no RM job is tensor
  parallel.
* PPO reward (`train_ppo`): the PPO memory plan (`prbench.downstream.ppo.memory.plan_for_config`,
  calibrated on an H100) gives the GPUs: one GPU holds policy, critic, reference and RM; with more,
  `gpus - 1` DDP training processes and the RM on the last GPU, a whole copy per process
  (`prbench.downstream.ppo.launch`: the RM is loaded on one device, never sharded). An RM whose
  weights alone exceed one GPU cannot be a PPO reward: `check_reward_fits_one_gpu`
  (prbench.downstream.ppo.memory) refuses it, naming `ppo.rms`.
* GRPO reward (`train_grpo`): one process on one GPU with the policy (the GRPO memory plan); the
  same refusal, naming `grpo.rms`.

The judge and policy jobs (`shared_job`: `sample_bon`, `base_answers`, `judge_bon`,
`judge_validity`, `eval_policy`): the same treatment. GPU memory = the weights in bf16 (the policy's
shape as the PPO plan reads it, the judge's from `judge.model` / `judge.params_b`) plus one `generate`
call (`generation_activations`: KV cache, prefill or step logits) of a batch: `bon.batch_size` rows
of `sizing.PROMPT_TOKENS` + `bon.max_new_tokens` (sampling), 32 rows of `ppo.eval_max_new_tokens`
(`generate_answers`' batch: base and evaluation answers), `judge.batch_size` rows of
`sizing.JUDGE_PROMPT_TOKENS` + `judge.max_new_tokens` (judging); `eval_policy` loads the policy and then
the judge: both planned at once (an upper bound). x `ALLOCATOR_OVERHEAD`. GPUs: transformers as an RM
job (device_map over them when more than one); vLLM (`judge.backend` / `bon.backend` vllm) the fewest
GPUs whose `gpu_memory_utilization` share holds it, tensor parallel over `judge.tensor_parallel_size`
of them (null: every GPU the job holds, `prbench.models.vllm_engine_kwargs`). A
`judge.tensor_parallel_size` above the job's GPUs, or too small for the judge to fit, is refused
(`check_judge_engine`, called by rules/judge.smk at parse time). Runtime: the cost model's seconds
(policy steps at the measured `policy_decode_s`, judge steps from `cost.judge_step_s`) x
`RUNTIME_MARGIN`, as for the RMs.

Host memory (`mem_mb`): the weights as loaded (a single-GPU load materialises the checkpoint on the
host before `.to(device)`; a device_map load moves it shard by shard, planned the same way: the
memory-mapped shards count against the job's cgroup) plus `HOST_OVERHEAD_MB`, per process, at least
`resources.cpu_mem_mb`. Runtime (minutes): the cost model's seconds for that one job
(`prbench.plan.cost.benchmark_job`, `bon_scoring_job`, `ppo_job`, `grpo_job`: the unit costs
perf/paper_cost.py prints, mostly ASSUMED) x `RUNTIME_MARGIN`, at least `RUNTIME_FLOOR_MIN`; the
rules multiply it by Snakemake's `attempt`, so a job killed at its time limit is resubmitted with
more (`retries` in profiles/slurm).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..config import entry_with_defaults
from ..downstream.ppo.memory import (
    DEFAULT_RM_B,
    GB,
    check_reward_fits_one_gpu,
    resource_limits,
    rm_kind_info,
    rm_shape,
)
from . import cost
from .sizing import EVAL_BATCH, SHARED_JOBS, Sizing, policy_shape, rm_sizing, shared_sizing, uses_judge

HOST_OVERHEAD_MB = 8000  # ASSUMED: Python, torch, CUDA context, tokenizer and data per process (the old rule's +8 GB)
RUNTIME_MARGIN = 3.0     # ASSUMED: SLURM time limit = 3 x the cost model's estimate (its units are mostly assumed)
RUNTIME_FLOOR_MIN = 60   # ASSUMED: model download from the shared cache, load and startup
# Questions of a subset the cost model has no size for: the largest known (ASSUMED, runtime only)
UNKNOWN_SUBSET = max(cost.TEST_QUESTIONS.values())
UNKNOWN_TRAIN_SUBSET = max(cost.TRAIN_QUESTIONS.values())

MEMORY_SOURCES = {
    "weights": "exact: parameters x bytes of the load dtype (shape: the model's config.json, the built-in table "
               "prbench.downstream.ppo.memory.KNOWN_CONFIGS, or approximate from params_b)",
    "activations": "classifier: RM_ACT_BYTES = 14 per token x (hidden + intermediate), measured on an H100 with an 8B "
                   "RM (perf/README.md); generative: KV cache, prefill and step-logit sizes (not measured)",
    "ppo": "the PPO memory plan, calibrated on an H100 (perf/ppo_memory_gpu.py, perf/README.md); its rollout "
           "path's terms are sizes, not measured",
    "grpo": "the GRPO memory plan: sizes built from the PPO calibration (not measured)",
    "host": f"ASSUMED: weights as loaded + {HOST_OVERHEAD_MB} MB per process",
    "runtime": f"the cost model's seconds for the job (prbench.plan.cost units, mostly ASSUMED) x {RUNTIME_MARGIN:g} "
               f"(ASSUMED margin), at least {RUNTIME_FLOOR_MIN} min; x attempt on a retry",
}


@dataclass
class JobPlan:
    job: str                 # job class
    model: str               # config name of the RM (or the judge / policy)
    params_b: float
    gpus: int                # 0 = no GPU (CPU kinds)
    need_gb: float           # planned GPU memory: in all (inference), peak per GPU (PPO, GRPO)
    mem_mb: int              # host memory
    runtime_min: int | None  # None: not from the cost model (the rule's fixed runtime)
    sharding: str
    fits: bool = True
    why: str = ""            # why it does not fit / cannot be sharded (with the config key)
    shape: str = ""          # config.json | known | approximate
    parts_gb: dict = field(default_factory=dict)
    tensor_parallel: int = 1  # GPUs a vLLM engine reads the weights on at once (1: transformers, device_map)


# ---- small rules, each with its own test ----------------------------------------------------------

def inference_sharding(gpus: int, backend: str = "transformers", tensor_parallel: int | None = None) -> str:
    """How a model in inference uses the job's GPUs."""
    if gpus <= 0:
        return "CPU"
    if backend == "vllm":
        return f"vLLM tensor parallel {tensor_parallel or gpus}"
    return "single GPU" if gpus == 1 else f"device_map over {gpus} GPUs"


def host_mem_mb(load_bytes: float, cpu_mem_mb: int, processes: int = 1) -> int:
    """Host memory: the weights as loaded (bytes, all processes) + HOST_OVERHEAD_MB per process."""
    return int(max(cpu_mem_mb, math.ceil(load_bytes / 1e6) + HOST_OVERHEAD_MB * processes))


def runtime_min(seconds: float) -> int:
    return int(max(RUNTIME_FLOOR_MIN, math.ceil(RUNTIME_MARGIN * seconds / 60)))


def params_rule_gpus(params_b: float, gpu_mem_gb: float, train: bool = False) -> int:
    """The policy and judge jobs' rule (no memory plan yet): bf16 inference ~2.5 GB per billion
    parameters, training ~16 GB, + 4 GB, in whole GPUs."""
    need_gb = params_b * (16.0 if train else 2.5) + 4
    return max(1, int(-(-need_gb // gpu_mem_gb)))


def params_rule_mem_mb(params_b: float, cpu_mem_mb: int, train: bool = False) -> int:
    return int(max(cpu_mem_mb, params_b * (8000 if train else 4000) + 8000))


# ---- the config's models ----------------------------------------------------------------------------

def _q_test(cfg: dict) -> int:
    return sum(cost.TEST_QUESTIONS.get(s, UNKNOWN_SUBSET) for s in cfg["data"]["personalized"]["subsets"])


def _train_q(cfg: dict) -> dict:
    return {s: cost.TRAIN_QUESTIONS.get(s, UNKNOWN_TRAIN_SUBSET) for s in cfg["data"]["personalized"]["subsets"]}


def max_runtime(cfg: dict) -> float | None:
    """resources.max_runtime_min: the partition's time limit in minutes (None: no limit)."""
    v = (cfg.get("resources") or {}).get("max_runtime_min")
    return None if v is None else float(v)


def benchmark_parts(cfg: dict, rm: str, bench: str) -> int:
    """How many parts one RM's job on one benchmark is split into (`prbench.scoring.parts`): the RM
    entry's `benchmark_parts`, else the fewest whose planned time (the cost model's seconds x
    RUNTIME_MARGIN, shared evenly) each fits resources.max_runtime_min; 1 without a limit."""
    e = cfg["reward_models"][rm]
    if e.get("benchmark_parts"):
        return int(e["benchmark_parts"])
    limit = max_runtime(cfg)
    if limit is None:
        return 1
    return max(1, math.ceil(RUNTIME_MARGIN * _rm_seconds(cfg, rm, "benchmark", bench) / 60 / limit))


def rm_inference(cfg: dict, rm: str, stage: str, bench: str | None = None) -> JobPlan:
    """One RM job in inference: stage "benchmark" (a score_benchmark job, or one part of a split one
    (`benchmark_parts`); `bench` one benchmark, None = the longest of its jobs) or "bon" (score_bon, one
    sample set). GPUs and GPU memory: `prbench.plan.sizing.rm_sizing`."""
    s = rm_sizing(cfg, rm, stage)
    e = cfg["reward_models"][rm]
    job = "benchmark scoring" if stage == "benchmark" else "BoN scoring"
    _, cpu_mem = resource_limits(cfg)
    pb = float(e.get("params_b") or DEFAULT_RM_B)
    split = ""
    if stage == "bon":
        minutes = runtime_min(_rm_seconds(cfg, rm, stage, None))
    else:
        benches = [bench] if bench is not None else list(cost.benchmark_sets(cfg, _q_test(cfg)))
        jobs = {b: (_rm_seconds(cfg, rm, stage, b), benchmark_parts(cfg, rm, b)) for b in benches}
        longest = max(jobs, key=lambda b: jobs[b][0] / jobs[b][1])
        minutes = runtime_min(jobs[longest][0] / jobs[longest][1])
        split = f", {longest} in {jobs[longest][1]} parts" if jobs[longest][1] > 1 else ""
    if not s.gpus:
        return JobPlan(job, rm, pb, 0, 0.0, cpu_mem, minutes, "CPU" + split)
    return JobPlan(job, rm, pb, s.gpus, round(s.need_gb, 2), host_mem_mb(s.parts["weights"], cpu_mem), minutes,
                   inference_sharding(s.gpus) + split, shape=s.shapes["rm"].source, parts_gb=_gb(s))


def benchmark_join(cfg: dict, rm: str) -> JobPlan:
    """The job that joins a split benchmark job's parts (no model: CPU, resources.cpu_mem_mb)."""
    _, cpu_mem = resource_limits(cfg)
    pb = float(cfg["reward_models"][rm].get("params_b") or DEFAULT_RM_B)
    return JobPlan("benchmark join", rm, pb, 0, 0.0, cpu_mem, RUNTIME_FLOOR_MIN, "CPU")


def _gb(s: Sizing) -> dict:
    return {k: round(v / GB, 2) for k, v in s.parts.items()}


def _rm_seconds(cfg: dict, rm: str, stage: str, bench: str | None) -> float:
    e = cfg["reward_models"][rm]
    q = _q_test(cfg)
    if stage == "bon":
        return cost.bon_scoring_job(cfg, e, cost.bon_samples(cfg, q))["s"]
    sets = cost.benchmark_sets(cfg, q)
    if bench is not None:
        return cost.benchmark_job(e, *sets[bench])["s"]
    return max(cost.benchmark_job(e, *v)["s"] for v in sets.values())


def ppo_reward(cfg: dict, policy: str, rm: str, subset: str | None = None) -> JobPlan:
    """One train_ppo job (`subset`: a per-subset run, ppo.per_subset; None: the pooled run, or the
    longest subset's when the config trains per subset)."""
    gpu_mem, cpu_mem = resource_limits(cfg)
    e = cfg["reward_models"][rm]
    pb = float(e.get("params_b") or DEFAULT_RM_B)
    why = check_reward_fits_one_gpu(cfg, "ppo", rm)
    if why:
        return JobPlan("PPO reward", rm, pb, 0, 0.0, 0, None,
                       "cannot shard: the RM is held whole on one GPU per training process", fits=False, why=why)
    train_q = _train_q(cfg)
    groups = [[subset]] if subset else cost.ppo_groups(cfg)
    jobs = [cost.ppo_job(cfg, policy, rm, g, train_q) for g in groups]
    p = jobs[0]["plan"]
    if not p.fits:
        from ..downstream.ppo.memory import refusal

        return JobPlan("PPO reward", rm, pb, p.gpus, p.peak_gb, 0, None, "does not fit", fits=False,
                       why=f"train_ppo {policy}/{rm}: {refusal(p)}", parts_gb=p.parts_gb)
    if p.gpus == 1:
        sharding = "single GPU: policy, critic, reference and RM"
    else:
        sharding = (f"DDP over {p.train_processes} training GPU(s), RM on GPU {p.gpus} "
                    f"({p.train_processes} whole cop{'y' if p.train_processes == 1 else 'ies'})")
    rm_bytes = 2 * rm_shape(cfg, rm).params if rm_kind_info(e).uses_gpu else 0.0
    pol = policy_shape(cfg, policy).params
    # per process: policy and critic (fp32), reference (bf16), its RM copy; once: the optimizer state a
    # checkpoint save gathers (2 x 8 bytes per policy parameter)
    load = p.train_processes * (10 * pol + rm_bytes) + 16 * pol
    return JobPlan("PPO reward", rm, pb, p.gpus, p.peak_gb, host_mem_mb(load, cpu_mem, p.train_processes),
                   runtime_min(max(j["s"] for j in jobs)), sharding, parts_gb=p.parts_gb)


def grpo_reward(cfg: dict, policy: str, rm: str) -> JobPlan:
    """One train_grpo job: one process on one GPU, the RM beside the policy."""
    from ..downstream.grpo.memory import grpo_plan_for_config, grpo_refusal

    gpu_mem, cpu_mem = resource_limits(cfg)
    e = cfg["reward_models"][rm]
    pb = float(e.get("params_b") or DEFAULT_RM_B)
    why = check_reward_fits_one_gpu(cfg, "grpo", rm)
    if why:
        return JobPlan("GRPO reward", rm, pb, 0, 0.0, 0, None, "cannot shard: the RM is held whole beside the policy",
                       fits=False, why=why)
    p = grpo_plan_for_config(cfg, policy, rm)
    if not p.fits:
        return JobPlan("GRPO reward", rm, pb, 1, p.peak_gb, 0, None, "does not fit", fits=False,
                       why=f"train_grpo {policy}/{rm}: {grpo_refusal(p)}", parts_gb=p.parts_gb)
    g = entry_with_defaults(cfg.get("grpo") or {}, "grpo")
    pol = policy_shape(cfg, policy).params
    rm_bytes = 2 * rm_shape(cfg, rm).params if rm_kind_info(e).uses_gpu else 0.0
    load = (4 + (2 if float(g["beta"]) > 0 else 0) + 8) * pol + rm_bytes
    return JobPlan("GRPO reward", rm, pb, 1, p.peak_gb, host_mem_mb(load, cpu_mem),
                   runtime_min(cost.grpo_job(cfg, _train_q(cfg))["s"]), "single GPU: policy and RM",
                   parts_gb=p.parts_gb)


# ---- the judge's and the policy's jobs ------------------------------------------------------------------

def shared_job(cfg: dict, job: str, policy: str | None = None, subset: str | None = None) -> JobPlan:
    """One judge or policy job (`job`: a key of SHARED_JOBS; `policy`: the config's first when None;
    `subset`: eval_policy of a per-subset run). GPUs and GPU memory: `prbench.plan.sizing.shared_sizing`,
    which raises ValueError naming judge.tensor_parallel_size when the judge's vLLM tensor parallel size
    does not match the job's GPUs."""
    s = shared_sizing(cfg, job, policy)
    policy = policy or next(iter(cfg["policies"]))
    _, cpu_mem = resource_limits(cfg)
    pol, jshape = s.shapes["policy"], s.shapes.get("judge")
    pb = pol.params / 1e9 if not uses_judge(job) else jshape.params / 1e9 + (pol.params / 1e9 if job == "eval_policy"
                                                                              else 0)
    model = {"sample_bon": policy, "base_answers": policy, "eval_policy": f"{policy} + judge"}.get(job, "judge")
    return JobPlan(SHARED_JOBS[job], model, round(pb, 2), s.gpus, round(s.need_gb, 2),
                   host_mem_mb(s.weights_gb * GB, cpu_mem), runtime_min(_shared_seconds(cfg, job, s, subset)),
                   inference_sharding(s.gpus, s.backend, s.tensor_parallel), shape=(jshape or pol).source,
                   parts_gb=_gb(s), tensor_parallel=s.tensor_parallel)


def _shared_seconds(cfg: dict, job: str, s: Sizing, subset: str | None) -> float:
    """A judge or policy job's seconds: policy decode steps at the measured policy_decode_s, judge steps
    from the decode-step model (at the job's vLLM tensor parallel size)."""
    ppo = entry_with_defaults(cfg["ppo"], "ppo")
    q = _q_test(cfg) if subset is None else cost.TEST_QUESTIONS.get(subset, UNKNOWN_SUBSET)
    ev_new, ev_n = int(ppo["eval_max_new_tokens"]), int(ppo.get("eval_samples") or 1)
    pol_step = cost.u("policy_decode_s")
    if job == "sample_bon":
        bon = cfg["bon"]
        per_shard = math.ceil(q / int(bon["shards"])) * int(bon["n"])
        return cost.decode_calls_s(per_shard, int(bon.get("batch_size") or 32), int(bon["max_new_tokens"]), pol_step)
    if job == "base_answers":
        return cost.decode_calls_s(q * ev_n, EVAL_BATCH, ev_new, pol_step)
    calls = {"judge_bon": q * int(cfg["bon"]["n"]), "judge_validity": 2 * q,
             # its answers and the base policy's (judged here unless the shared cache has them)
             "eval_policy": 2 * q * ev_n}[job]
    seconds = 0.0 if s.backend == "minilm" else cost.judge_calls_s(cfg, calls, s.tensor_parallel)
    if job == "eval_policy":
        seconds += cost.decode_calls_s(q * ev_n, EVAL_BATCH, ev_new, pol_step)
    return seconds


def check_judge_engine(cfg: dict) -> None:
    """Parse-time check of the judge's vLLM engine (rules/judge.smk): raises ValueError naming
    judge.tensor_parallel_size when a judging job cannot run with it."""
    if cfg["judge"]["backend"] == "vllm":
        for job in ("judge_bon", "judge_validity", "eval_policy"):
            shared_job(cfg, job)


def shared_jobs(cfg: dict) -> list[JobPlan]:
    """The judge's and the policy's jobs of the config's first policy (the judge's only with an LLM judge)."""
    jobs = ["sample_bon", "base_answers"]
    if cfg["judge"]["backend"] != "minilm":
        jobs += ["judge_bon", "judge_validity", "eval_policy"]
    return [shared_job(cfg, j) for j in jobs]


def plans(cfg: dict) -> list[JobPlan]:
    """Every RM job class of the config: benchmark scoring per RM, BoN scoring per downstream RM,
    PPO / GRPO reward per RM of ppo.rms / grpo.rms (when enabled), for the config's first policy."""
    rms = cfg["reward_models"]
    down = [r for r, e in rms.items() if entry_with_defaults(e, "reward_models.*")["downstream"]]
    out = [rm_inference(cfg, r, "benchmark") for r in rms]
    out += [rm_inference(cfg, r, "bon") for r in down]
    policy = next(iter(cfg["policies"]))
    for method, fn in (("ppo", ppo_reward), ("grpo", grpo_reward)):
        sec = cfg.get(method) or {}
        if sec.get("enabled"):
            chosen = sec.get("rms")
            out += [fn(cfg, policy, r) for r in down if chosen is None or r in chosen]
    return out


def table(cfg: dict) -> list[dict]:
    """One row per (job class, RM size class): RMs, GPUs, largest host memory and runtime, and the
    sharding modes with their counts; refused entries as rows of their own."""
    rows = []
    groups: dict = {}
    for p in plans(cfg):
        groups.setdefault((p.job, cost.size_class(p.params_b)), []).append(p)
    order = [label for _, label in cost.SIZE_CLASSES]
    for (job, size), ps in sorted(groups.items(), key=lambda kv: (JOB_ORDER.index(kv[0][0]), order.index(kv[0][1]))):
        ok = [p for p in ps if p.fits]
        modes: dict = {}
        for p in ok:
            modes[p.sharding] = modes.get(p.sharding, 0) + 1
        gpus = sorted({p.gpus for p in ok})
        rows.append({"job": job, "size": size, "rms": len(ps), "gpus": gpus,
                     "mem_gb": max((p.mem_mb for p in ok), default=0) / 1000,
                     "runtime_h": max((p.runtime_min or 0 for p in ok), default=0) / 60,
                     "need_gb": max((p.need_gb for p in ok), default=0.0),
                     "sharding": modes, "refused": [p for p in ps if not p.fits],
                     "largest": max(ok, key=lambda p: (p.need_gb, p.params_b)).model if ok else ""})
    return rows


JOB_ORDER = ("benchmark scoring", "BoN scoring", "PPO reward", "GRPO reward")


def outside_methods(cfg: dict) -> dict:
    """The downstream RMs a config leaves out of ppo.rms / grpo.rms, by why they could not be there:
    {"PPO": {"cannot be sharded (weights > one GPU)": [...], "do not fit by the memory plan": [...],
    "fit": [...]}, "GRPO": ...} (methods enabled and with an rms list only)."""
    policy = next(iter(cfg["policies"]))
    out = {}
    for method, fn in (("ppo", ppo_reward), ("grpo", grpo_reward)):
        sec = cfg.get(method) or {}
        if not sec.get("enabled") or sec.get("rms") is None:
            continue
        groups: dict = {}
        for r, e in cfg["reward_models"].items():
            if not entry_with_defaults(e, "reward_models.*")["downstream"] or r in sec["rms"]:
                continue
            p = fn(cfg, policy, r)
            mode = ("cannot be sharded (weights > one GPU)" if p.sharding.startswith("cannot") else
                    "do not fit by the memory plan" if not p.fits else "fit")
            groups.setdefault(mode, []).append(r)
        out[method.upper()] = groups
    return out
