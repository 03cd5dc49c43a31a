"""Cost model of a run: work and H100 GPU-hours per stage, from a config (`perf/paper_cost.py`
prints it for one config; `python -m prbench.plan` per stage and per RM size class).

Reads the config (subsets, RMs, BoN n / batch / tokens, PPO batch, response length, generation
chunk from the memory plan, GRPO group sizes, judge, `ppo.per_subset`, `ppo.seeds`, `grpo.seeds`,
`bon.sample_sets`, and `ppo.rms` / `grpo.rms`: the RMs each trained-policy method runs with) and
returns one row per stage: the work, the unit costs used and the GPU-hours on H100s (GPU-seconds
summed over the GPUs a job holds: the PPO memory plan's GPU count).

Every unit cost has a source (`UNIT`):
- measured: the H100 runs in perf/gpu_runs (perf/README.md): one PPO step of trl's chunked path
  (16 generate calls of 4 rows x 512 tokens at local batch 64, 2,047-token prompts) took 300 s,
  "nearly all of that trl's generate", so one decode step of the 0.5B policy costs at most
  300 / (16 x 512) = 36.6 ms; it is used for every decode step of the policy (PPO, GRPO, BoN
  sampling, base and evaluation answers), whatever the rows per call (an upper bound);
- assumed (no measurement here): the decode step of a generative RM or the judge (`decode_step_s`:
  HF decode at small batch is memory-bandwidth bound, so one step reads every weight once: weight
  bytes at the load dtype / (`decode_bw_gbs` x the GPUs reading at once) + `decode_overhead_s`; a
  device_map model runs its layers on its GPUs one after another, so N GPUs read at the speed of
  one; vLLM tensor parallel over N GPUs reads 1/N of the weights on each at once), its two
  constants fitted to the two ASSUMED steps the cost model used before (`DECODE_ANCHORS`: a 7-8B
  model on one GPU 0.045 s, the 32B judge sharded on 2 GPUs 0.09 s); forward throughput of an RM or
  the retriever as a fraction (MFU) of the H100's 989 TFLOP/s bf16 dense peak; the judge's prompt
  length; and the data sizes not in the config.
The PPO rollout path with one generate call per generation chunk has not been measured on a GPU:
its step cost is ceil(local batch / generation chunk) x response_length decode steps.
"""
from __future__ import annotations

import copy
import math

from ..config import entry_with_defaults
from ..downstream import claim_seeds
from ..downstream.ppo.memory import DTYPE_BYTES, plan_for_config
from .sizing import PROMPT_TOKENS, rm_sizing, shared_sizing

# --- data sizes (not in the config) -------------------------------------------------------------
# Questions per subset of the released Personalized RewardBench test split (perf/bench_judge_cost.py);
# one chosen/rejected pair each, and the same LaMP-QA test questions are the BoN / PPO evaluation prompts.
TEST_QUESTIONS = {"Art_and_Entertainment": 767, "Lifestyle_and_Personal_Development": 989, "Society_and_Culture": 1074}
# LaMP-QA train questions per subset (PPO / GRPO prompts): ASSUMED (recalled from the LaMP-QA
# paper's statistics, not checked offline); perf/paper_cost.py --train-prompts overrides.
TRAIN_QUESTIONS = {"Art_and_Entertainment": 3717, "Lifestyle_and_Personal_Development": 5574,
                   "Society_and_Culture": 5785}
BASELINE_PAIRS = {"rewardbench": 2985, "rmbench": 1327 * 9}  # published sizes (RM-Bench: 9 pairs a prompt)
BASELINE_PAIRS_UNKNOWN = 3000  # ASSUMED: pairs of a configured baseline with no published size above
# PROMPT_TOKENS (question + 10 profile posts) and JUDGE_PROMPT_TOKENS: prbench.plan.sizing, which sizes the jobs' GPUs
ANSWER_TOKENS = 150      # benchmark answers: ~150 tokens (perf/README.md, prefix scoring inputs)
BASELINE_TOKENS = 600    # RewardBench / RM-Bench prompt + answer: ASSUMED
POSTS_PER_USER = 100     # profile posts embedded per question by the retriever: ASSUMED

# --- unit costs ----------------------------------------------------------------------------------
H100_BF16 = 989e12
UNIT = {
    "policy_decode_s": (300 / (16 * 512), "measured: H100 PPO step 300 s = 16 generate calls x 512 tokens "
                                          "(perf/gpu_runs/h100_ppo_memory_p2048.json, perf/README.md)"),
    "decode_bw_gbs": (1100.0, "ASSUMED: GB of weights one H100 reads per second in an HF decode step (33% of the "
                              "H100 SXM's 3.35 TB/s HBM3 peak); step = weight bytes / (this x GPUs of vLLM tensor "
                              "parallel; device_map: 1) + decode_overhead_s, fitted to two ASSUMED steps, not "
                              "measured: 7.5B bf16 (15 GB) 0.045 s, the 32B judge (64 GB) 0.09 s"),
    "decode_overhead_s": (0.031, "ASSUMED: fixed cost of one HF decode step (Python, kernel launches, sampling), "
                                 "fitted with decode_bw_gbs to the same two ASSUMED steps"),
    "mfu_forward": (0.35, "ASSUMED: forward (prefill) throughput = 35% of H100 bf16 peak 989 TFLOP/s"),
    "train_flops_factor": (3.0, "forward + backward = 3x forward FLOPs (standard)"),
}
# The decode-step model's calibration points: the two ASSUMED steps the cost model used before it (no
# measurement of either): (weight bytes, GPUs under device_map, step s). decode_bw_gbs and
# decode_overhead_s reproduce both within 3% (tests/test_paper_cost.py).
DECODE_ANCHORS = {
    "7-8B model, one GPU (7.5B x 2 bytes)": (15e9, 1, 0.045),
    "32B judge, device_map over 2 GPUs (32B x 2 bytes)": (64e9, 2, 0.09),
}
DECODE_UNITS = ["decode_bw_gbs", "decode_overhead_s"]
# RM size classes of the per-class totals (params_b upper bounds, inclusive)
SIZE_CLASSES = ((2.0, "<= 2B"), (10.0, "2-10B"), (35.0, "10-35B"), (math.inf, "> 35B"))


def u(name: str) -> float:
    return UNIT[name][0]


def forward_s(params: float, tokens: float) -> float:
    return 2 * params * tokens / (u("mfu_forward") * H100_BF16)


def decode_step_s(weight_bytes: float, tensor_parallel: int = 1) -> float:
    """Seconds of one decode step of a model of `weight_bytes` (at its load dtype): every weight read
    once per step. `tensor_parallel`: GPUs reading at once (vLLM tensor parallel); a device_map model
    over N GPUs runs its layers one GPU after another: 1."""
    return weight_bytes / (u("decode_bw_gbs") * 1e9 * max(1, int(tensor_parallel))) + u("decode_overhead_s")


def rm_decode_step_s(e: dict) -> float:
    """A generative RM's decode step: its params_b at its load dtype (`dtype`, bf16 by default); the
    RM loaders have no vLLM path (device_map over several GPUs reads at one GPU's speed)."""
    return decode_step_s(DTYPE_BYTES[e.get("dtype") or "auto"] * rm_params(e))


def judge_params(cfg: dict) -> float:
    return float(cfg["judge"].get("params_b") or 1.0) * 1e9


def judge_step_s(cfg: dict, tensor_parallel: int = 1) -> float:
    """The judge's decode step (bf16; `tensor_parallel`: its vLLM tensor parallel size, 1 under transformers)."""
    return decode_step_s(2 * judge_params(cfg), tensor_parallel)


def judge_calls_s(cfg: dict, calls: int, tensor_parallel: int = 1) -> float:
    """Seconds of `calls` judge calls in batches of judge.batch_size, judge.max_new_tokens each."""
    judge = cfg["judge"]
    return decode_calls_s(calls, int(judge.get("batch_size") or 16), int(judge["max_new_tokens"]),
                          judge_step_s(cfg, tensor_parallel))


def decode_calls_s(sequences: int, batch: int, new_tokens: int, step_s: float) -> float:
    return math.ceil(sequences / batch) * new_tokens * step_s


def count(cfg_section: dict, key: str, default=1) -> int:
    """How many repeats a key asks for (a list of seeds / sample sets, or an int); absent = default."""
    v = (cfg_section or {}).get(key, None)
    if v is None:
        return default
    return len(v) if isinstance(v, (list, tuple)) else int(v)


def _run_seeds(section: dict, rm: str) -> int:
    """Training seeds of one RM's run (prbench.downstream.claim_seeds), `seeds` counted as `count` does."""
    return claim_seeds({**section, "seeds": count(section, "seeds")}, rm)


def rm_params(entry: dict) -> float:
    return float(entry.get("params_b") or 1.0) * 1e9


def size_class(params_b) -> str:
    p = float(params_b or 1.0)
    return next(label for top, label in SIZE_CLASSES if p <= top)


def baseline_pairs(cfg: dict) -> int:
    """Pairs of every configured baseline: the published size of its kind, else BASELINE_PAIRS_UNKNOWN."""
    return sum(BASELINE_PAIRS.get(b["kind"], BASELINE_PAIRS_UNKNOWN)
               for name, b in (cfg["data"].get("baselines") or {}).items())


def method_rms(cfg: dict, method: str, down: dict) -> list[str]:
    """The downstream RMs a trained-policy method runs with: `<method>.rms`, else every one."""
    chosen = (cfg.get(method) or {}).get("rms")
    return [r for r in down if chosen is None or r in chosen]


class _Rows(list):
    def add(self, stage, work, gpu_s, units, rm=None, params_b=None):
        self.append({"stage": stage, "work": work, "gpu_h": gpu_s / 3600, "units": units, "rm": rm,
                     "size_class": size_class(params_b) if rm else None})


# ---- one job's work: what a score_benchmark, score_bon, train_ppo or train_grpo job computes --------
# Seconds at one GPU's throughput (a job sharded with device_map runs its layers in sequence over its
# GPUs: no faster than one GPU); the stage rows below sum the jobs, times the GPUs each job holds
# (prbench.plan.sizing), and prbench.plan.resources turns one job's seconds into its SLURM runtime.

def benchmark_sets(cfg: dict, q_test: int) -> dict[str, tuple[int, int]]:
    """Benchmark -> (pairs, tokens per sequence) of each score_benchmark job: personalized (the test
    questions, PROMPT_TOKENS + ANSWER_TOKENS) and each baseline (its published size, else
    BASELINE_PAIRS_UNKNOWN; BASELINE_TOKENS)."""
    out = {"personalized": (q_test, PROMPT_TOKENS + ANSWER_TOKENS)}
    for name, b in sorted((cfg["data"].get("baselines") or {}).items()):
        out[name] = (BASELINE_PAIRS.get(b["kind"], BASELINE_PAIRS_UNKNOWN), BASELINE_TOKENS)
    return out


def benchmark_job(e: dict, pairs: int, seq_tokens: int) -> dict:
    """One RM on one benchmark: {"s": seconds, "calls" (judgements / ratings) or "sequences" +
    "tokens", "units"}."""
    if e["kind"] == "generative_pairwise":
        calls = pairs * (2 if e.get("both_orders") else 1)
        new = int(e.get("max_new_tokens") or 512)
        return {"s": decode_calls_s(calls, 16, new, rm_decode_step_s(e)), "calls": calls, "new": new,
                "units": DECODE_UNITS}
    if e["kind"] == "generative_pointwise":
        calls = 2 * pairs
        return {"s": decode_calls_s(calls, 16, int(e.get("max_new_tokens") or 256), rm_decode_step_s(e)),
                "calls": calls, "units": DECODE_UNITS}
    toks = 2 * pairs * seq_tokens
    return {"s": forward_s(rm_params(e), toks), "sequences": 2 * pairs, "tokens": toks, "units": ["mfu_forward"]}


def bon_samples(cfg: dict, q_test: int) -> int:
    """BoN samples of one sample set of one policy: what one score_bon job scores."""
    return q_test * int(cfg["bon"]["n"])


def bon_scoring_job(cfg: dict, e: dict, samples: int) -> dict:
    """One RM scoring one BoN sample set: {"s", "work", "units"}."""
    reward = entry_with_defaults(cfg.get("reward") or {}, "reward")
    new = int(cfg["bon"]["max_new_tokens"])
    if e["kind"].startswith("generative") and reward["generative"] == "pointwise":
        # reward.generative pointwise (the authors'): each sample rated alone on 0-1, a short reply
        new_r = int(reward["generative_max_new_tokens"])
        return {"s": decode_calls_s(samples, 16, new_r, rm_decode_step_s(e)), "calls": samples,
                "work": f"0-1 ratings x {new_r} tokens", "units": DECODE_UNITS}
    if e["kind"].startswith("generative"):
        calls = samples if e["kind"] == "generative_pointwise" else samples * 2
        return {"s": decode_calls_s(calls, 16, int(e.get("max_new_tokens") or 512), rm_decode_step_s(e)),
                "calls": calls, "work": "judgements", "units": DECODE_UNITS}
    toks = samples * (PROMPT_TOKENS + new)
    return {"s": forward_s(rm_params(e), toks), "calls": samples, "tokens": toks, "units": ["mfu_forward"]}


def ppo_groups(cfg: dict) -> list[list[str]]:
    """The subsets of each PPO run: one per subset (ppo.per_subset), else one pooled run."""
    subsets = cfg["data"]["personalized"]["subsets"]
    return [[s] for s in subsets] if cfg["ppo"].get("per_subset") else [subsets]


def ppo_job(cfg: dict, policy: str, rm: str, group: list[str], train_q: dict) -> dict:
    """One train_ppo job (one run, one seed): {"steps", "calls" (generate calls a step), "step_s",
    "s" (its wall seconds), "plan" (the memory plan: GPUs)}."""
    ppo = entry_with_defaults(cfg["ppo"], "ppo")
    p = plan_for_config(cfg, policy, rm)
    calls = math.ceil(p.local_batch / p.generation_chunk)
    step_s = calls * int(ppo["response_length"]) * u("policy_decode_s")
    steps = math.ceil((ppo["total_episodes"] or sum(train_q[s] for s in group)) / ppo["batch_size"])
    return {"steps": steps, "calls": calls, "step_s": step_s, "s": steps * step_s, "plan": p}


def grpo_job(cfg: dict, train_q: dict) -> dict:
    """One train_grpo job (one seed): {"steps", "step_s", "s"}: one generate call a step."""
    g = entry_with_defaults(cfg["grpo"], "grpo")
    subsets = cfg["data"]["personalized"]["subsets"]
    steps = g["steps"] or math.ceil(sum(train_q[s] for s in subsets) / g["prompts_per_step"])
    step_s = int(g["max_completion_length"]) * u("policy_decode_s")
    return {"steps": steps, "step_s": step_s, "s": steps * step_s}


def _job_gpus(cfg: dict, name: str, stage: str) -> int:
    """GPUs one job of an RM holds at `stage` (prbench.plan.sizing: its memory), at least 1."""
    return max(1, rm_sizing(cfg, name, stage).gpus)


def _benchmark_rows(rows: _Rows, cfg: dict, q_test: int) -> None:
    sets = benchmark_sets(cfg, q_test)
    for name, e in cfg["reward_models"].items():
        stage, pb = f"benchmark scoring: {name}", e.get("params_b")
        jobs = [benchmark_job(e, pairs, seq) for pairs, seq in sets.values()]
        gpus = _job_gpus(cfg, name, "benchmark")
        gpu_s = gpus * sum(j["s"] for j in jobs)
        on = f", {gpus} GPUs" if gpus > 1 else ""
        if "calls" in jobs[0]:
            what = "judgements x {} tokens".format(jobs[0]["new"]) if "new" in jobs[0] else "ratings"
            rows.add(stage, f"{sum(j['calls'] for j in jobs):,} {what}{on}", gpu_s, jobs[0]["units"], name, pb)
        else:
            rows.add(stage, f"{sum(j['sequences'] for j in jobs):,} sequences, "
                     f"{sum(j['tokens'] for j in jobs) / 1e6:.1f}M tokens{on}", gpu_s, jobs[0]["units"], name, pb)


def _bon_rows(rows: _Rows, cfg: dict, q_test: int, down: dict, judge: dict) -> None:
    """judge: the judge_bon job's GPUs and tensor parallel size (prbench.plan.sizing.shared_sizing)."""
    bon = cfg["bon"]
    n_sets = count(bon, "sample_sets")
    samples = q_test * int(bon["n"]) * n_sets
    new = int(bon["max_new_tokens"])
    sample_gpus = max(1, shared_sizing(cfg, "sample_bon").gpus)
    rows.add("BoN sampling", f"{samples:,} answers x {new} tokens ({n_sets} sample set(s))",
             sample_gpus * decode_calls_s(samples, int(bon.get("batch_size") or 32), new, u("policy_decode_s")),
             ["policy_decode_s"])
    for name, e in down.items():
        stage, pb = f"BoN scoring: {name}", e.get("params_b")
        job = bon_scoring_job(cfg, e, bon_samples(cfg, q_test))
        gpus = _job_gpus(cfg, name, "bon")
        on = f", {gpus} GPUs" if gpus > 1 else ""
        if "tokens" in job:
            work = f"{samples:,} sequences, {samples * job['tokens'] / job['calls'] / 1e6:.0f}M tokens{on}"
        else:
            work = f"{job['calls'] * n_sets:,} {job['work']}{on}"
        rows.add(stage, work, gpus * n_sets * job["s"], job["units"], name, pb)
    on = f", {judge['gpus']} GPUs" if judge["gpus"] > 1 else ""
    rows.add("BoN judging", f"{samples:,} judge calls x {cfg['judge']['max_new_tokens']} tokens{on}",
             judge["gpus"] * _judge_s(cfg, samples, judge), DECODE_UNITS)


def _judge_s(cfg: dict, calls: int, judge: dict) -> float:
    return 0.0 if cfg["judge"]["backend"] == "minilm" else judge_calls_s(cfg, calls, judge["tp"])


def _ppo_rows(rows: _Rows, cfg: dict, q_test: int, down: dict, train_q: dict) -> int:
    """PPO per RM of `ppo.rms` (per subset when ppo.per_subset; one run per seed); its evaluation answers."""
    ppo = entry_with_defaults(cfg["ppo"], "ppo")
    groups = ppo_groups(cfg)
    if not ppo["enabled"]:
        return 0
    pol_name = next(iter(cfg["policies"]))
    answers = 0
    for name in method_rms(cfg, "ppo", down):
        seeds = _run_seeds(cfg["ppo"], name)
        jobs = [ppo_job(cfg, pol_name, name, g, train_q) for g in groups]
        p, calls = jobs[0]["plan"], jobs[0]["calls"]
        steps = sum(j["steps"] for j in jobs) * seeds
        rows.add(f"PPO: {name}", f"{steps} steps x {calls} generate call(s) x {ppo['response_length']} tokens "
                 f"({len(groups)} run(s) x {seeds} seed(s), {p.gpus} GPU(s))",
                 seeds * sum(j["s"] for j in jobs) * p.gpus, ["policy_decode_s"], name, down[name].get("params_b"))
        answers += q_test * seeds
    return answers


def _grpo_rows(rows: _Rows, cfg: dict, q_test: int, down: dict, train_q: dict) -> int:
    grpo_cfg = cfg.get("grpo")
    if not (grpo_cfg and grpo_cfg["enabled"]):
        return 0
    g = entry_with_defaults(grpo_cfg, "grpo")
    job = grpo_job(cfg, train_q)
    answers = 0
    for name in method_rms(cfg, "grpo", down):
        seeds = _run_seeds(grpo_cfg, name)
        rows.add(f"GRPO: {name}", f"{job['steps'] * seeds} steps x 1 generate call of "
                 f"{g['prompts_per_step'] * g['num_generations']} x {g['max_completion_length']} tokens "
                 f"({seeds} seed(s))", seeds * job["s"], ["policy_decode_s"], name, down[name].get("params_b"))
        answers += q_test * seeds
    return answers


def stages(cfg: dict, train_q: dict) -> list[dict]:
    """One row per stage: stage, work, gpu_h, units (keys of UNIT), rm and size_class (per-RM rows)."""
    subsets = cfg["data"]["personalized"]["subsets"]
    missing = [s for s in subsets if s not in TEST_QUESTIONS]
    if missing:
        raise SystemExit(f"config data.personalized.subsets: no known size for {missing} (prbench.plan.cost)")
    q_test = sum(TEST_QUESTIONS[s] for s in subsets)
    down = {n: e for n, e in cfg["reward_models"].items() if e["downstream"]}
    # the judge's jobs as the rules request them (prbench.plan.sizing, as prbench.plan.resources): GPUs,
    # tensor parallel
    jp = shared_sizing(cfg, "judge_bon")
    judge = {"gpus": max(1, jp.gpus), "tp": jp.tensor_parallel}
    rows = _Rows()
    posts = q_test * POSTS_PER_USER + sum(train_q[s] for s in subsets) * POSTS_PER_USER
    rows.add("retrieval (contriever)", f"{posts:,} posts x 256 tokens", forward_s(0.11e9, posts * 256),
             ["mfu_forward"])
    _benchmark_rows(rows, cfg, q_test)
    _bon_rows(rows, cfg, q_test, down, judge)
    eval_answers = _ppo_rows(rows, cfg, q_test, down, train_q) + _grpo_rows(rows, cfg, q_test, down, train_q)
    # evaluation: base answers once (base_answers' GPUs), the trained policies' answers and every answer
    # judged in the eval_policy jobs (their GPUs, held while they answer and judge)
    answers = q_test + eval_answers
    ev_tokens = int(entry_with_defaults(cfg["ppo"], "ppo")["eval_max_new_tokens"])
    base_gpus = max(1, shared_sizing(cfg, "base_answers").gpus)
    base_s = base_gpus * decode_calls_s(q_test, 32, ev_tokens, u("policy_decode_s"))
    eval_gpus = max(1, shared_sizing(cfg, "eval_policy").gpus) if cfg["judge"]["backend"] != "minilm" else 1
    eval_s = eval_gpus * (decode_calls_s(eval_answers, 32, ev_tokens, u("policy_decode_s"))
                          + _judge_s(cfg, answers, judge))
    on = f" ({eval_gpus} GPUs a job)" if eval_gpus > 1 else ""
    rows.add("evaluation (answers + judge)", f"{answers:,} answers x {ev_tokens} tokens, {answers:,} judge calls{on}",
             base_s + eval_s, ["policy_decode_s", *DECODE_UNITS])
    return list(rows)


# BoN sample counts whose cost is printed beside the config's (perf/paper_cost.py)
BON_NS = (16, 128)


def bon_totals(cfg: dict, train_q: dict, ns=BON_NS) -> dict[int, tuple[float, float]]:
    """N -> (GPU-hours of the BoN stages, run total) with `bon.n` set to N; the config's N included.
    Only sampling, scoring and judging grow with N (the k list selects among the samples)."""
    out = {}
    for n in sorted({*ns, int(cfg["bon"]["n"])}):
        c = copy.deepcopy(cfg)
        c["bon"]["n"] = n
        rows = stages(c, train_q)
        out[n] = (sum(r["gpu_h"] for r in rows if r["stage"].startswith("BoN ")), sum(r["gpu_h"] for r in rows))
    return out


def stage_group(stage: str) -> str:
    """A row's stage without its RM: 'benchmark scoring', 'BoN scoring', 'PPO', 'GRPO', or the row's own name."""
    return stage.split(":", 1)[0]
