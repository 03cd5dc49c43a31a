"""Cost model of the whole paper run: work and H100 GPU-hours per stage, from a config.

    .venv/bin/python perf/paper_cost.py [--config config.yaml] [--train-prompts 3717,5574,5785]

Reads the config (subsets, RMs, BoN n / batch / tokens, PPO batch, response length, generation
chunk from the memory plan, GRPO group sizes, judge, and where present `ppo.per_subset`,
`ppo.seeds`, `grpo.seeds`, `bon.sample_sets`) and prints one row per stage: the work (sequences,
tokens, steps), the unit cost used and the GPU-hours on H100s (GPU-seconds summed over the GPUs a
job holds: `gpus_for` of rules/common.smk, the PPO memory plan). Above its last line it prints
the BoN stages and the run total at N = 16 and N = 128 samples per question (`bon.n`; the config's
own N too when it is neither): the authors' BoN/sample.sh defaults N to 16, while their README and
the K_VALUES of BoN/score.py and BoN/evaluate.py sweep k up to 128, which needs N = 128. Its last line
is `total: <h> GPU-hours on H100` (at the config's N).

Every unit cost has a source, printed under the table:
- measured: the H100 runs in perf/gpu_runs (perf/README.md): one PPO step of trl's chunked path
  (16 generate calls of 4 rows x 512 tokens at local batch 64, 2,047-token prompts) took 300 s,
  "nearly all of that trl's generate", so one decode step of the 0.5B policy costs at most
  300 / (16 x 512) = 36.6 ms; it is used for every decode step of the policy (PPO, GRPO, BoN
  sampling, base and evaluation answers), whatever the rows per call (decode on a GPU is
  latency-bound at these sizes; an upper bound, as the 300 s also hold the forwards and training);
- assumed (no measurement here; change with the options): the decode step of a 7-8B model
  (generative RMs) and of the 32B judge with HF transformers, forward throughput of an RM or the
  retriever as a fraction (MFU) of the H100's 989 TFLOP/s bf16 dense peak, and the data sizes
  that are not in the config (benchmark pairs, LaMP-QA train prompts, token lengths).
The new PPO rollout path (`prbench.downstream.ppo.rollout`: one generate call per generation chunk)
has not been measured on a GPU: its step cost here is ceil(local batch / generation chunk) x
response_length decode steps, the way the 300 s step is 16 x 512 of them.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from prbench.config import entry_with_defaults  # noqa: E402
from prbench.downstream.ppo.memory import plan_for_config  # noqa: E402
from prbench.validation import load_config  # noqa: E402

# --- data sizes (not in the config) -------------------------------------------------------------
# Questions per subset of the released Personalized RewardBench test split (perf/bench_judge_cost.py);
# one chosen/rejected pair each, and the same LaMP-QA test questions are the BoN / PPO evaluation prompts.
TEST_QUESTIONS = {"Art_and_Entertainment": 767, "Lifestyle_and_Personal_Development": 989, "Society_and_Culture": 1074}
# LaMP-QA train questions per subset (PPO / GRPO prompts): ASSUMED (recalled from the LaMP-QA
# paper's statistics, not checked offline); --train-prompts overrides.
TRAIN_QUESTIONS = {"Art_and_Entertainment": 3717, "Lifestyle_and_Personal_Development": 5574,
                   "Society_and_Culture": 5785}
BASELINE_PAIRS = {"rewardbench": 2985, "rmbench": 1327 * 9}  # published sizes (RM-Bench: 9 pairs a prompt)
PROMPT_TOKENS = 1800     # question + 10 profile posts: 1,500-2,000 tokens (perf/README.md, prefix scoring)
ANSWER_TOKENS = 150      # benchmark answers: ~150 tokens (perf/README.md, prefix scoring inputs)
BASELINE_TOKENS = 600    # RewardBench / RM-Bench prompt + answer: ASSUMED
POSTS_PER_USER = 100     # profile posts embedded per question by the retriever: ASSUMED

# --- unit costs ----------------------------------------------------------------------------------
H100_BF16 = 989e12
UNIT = {
    "policy_decode_s": (300 / (16 * 512), "measured: H100 PPO step 300 s = 16 generate calls x 512 tokens "
                                          "(perf/gpu_runs/h100_ppo_memory_p2048.json, perf/README.md)"),
    "decode_7b_s": (0.045, "ASSUMED: HF decode step of a 7-8B model, one GPU, batch <= 32"),
    "decode_32b_s": (0.09, "ASSUMED: HF decode step of the 32B judge sharded on 2 GPUs"),
    "mfu_forward": (0.35, "ASSUMED: forward (prefill) throughput = 35% of H100 bf16 peak 989 TFLOP/s"),
    "train_flops_factor": (3.0, "forward + backward = 3x forward FLOPs (standard)"),
}


def u(name: str) -> float:
    return UNIT[name][0]


def forward_s(params: float, tokens: float) -> float:
    return 2 * params * tokens / (u("mfu_forward") * H100_BF16)


def decode_calls_s(sequences: int, batch: int, new_tokens: int, step_s: float) -> float:
    return math.ceil(sequences / batch) * new_tokens * step_s


def count(cfg_section: dict, key: str, default=1) -> int:
    """How many repeats a key asks for (a list of seeds / sample sets, or an int); absent = default."""
    v = (cfg_section or {}).get(key, None)
    if v is None:
        return default
    return len(v) if isinstance(v, (list, tuple)) else int(v)


def rm_params(entry: dict) -> float:
    return float(entry.get("params_b") or 1.0) * 1e9


def stages(cfg: dict, train_q: dict) -> list[dict]:
    subsets = cfg["data"]["personalized"]["subsets"]
    missing = [s for s in subsets if s not in TEST_QUESTIONS]
    if missing:
        raise SystemExit(f"config data.personalized.subsets: no known size for {missing} (perf/paper_cost.py)")
    q_test = sum(TEST_QUESTIONS[s] for s in subsets)
    rms = cfg["reward_models"]
    down = {n: e for n, e in rms.items() if e.get("downstream", True)}  # downstream false: benchmarks only
    pol_name = next(iter(cfg["policies"]))
    judge = cfg["judge"]
    judge_gpus = 2 if float(judge.get("params_b") or 32) > 30 else 1
    judge_step = u("decode_32b_s") if judge_gpus == 2 else u("decode_7b_s")
    seq = PROMPT_TOKENS + ANSWER_TOKENS
    rows = []

    def add(stage, work, gpu_s, units):
        rows.append({"stage": stage, "work": work, "gpu_h": gpu_s / 3600, "units": units})

    # retrieval: contriever embeds every profile post and question
    ret_params = 0.11e9
    posts = q_test * POSTS_PER_USER + sum(train_q[s] for s in subsets) * POSTS_PER_USER
    add("retrieval (contriever)", f"{posts:,} posts x 256 tokens", forward_s(ret_params, posts * 256),
        ["mfu_forward"])
    # benchmark scoring, per RM: personalized pairs + the two baselines
    for name, e in rms.items():
        pairs = q_test + sum(BASELINE_PAIRS.values())
        if e["kind"] == "generative_pairwise":
            calls = (q_test + sum(BASELINE_PAIRS.values())) * (2 if e.get("both_orders") else 1)
            s = decode_calls_s(calls, 16, int(e.get("max_new_tokens") or 512), u("decode_7b_s"))
            add(f"benchmark scoring: {name}", f"{calls:,} judgements x {e.get('max_new_tokens') or 512} tokens", s,
                ["decode_7b_s"])
        elif e["kind"] == "generative_pointwise":
            calls = 2 * pairs
            s = decode_calls_s(calls, 16, int(e.get("max_new_tokens") or 256), u("decode_7b_s"))
            add(f"benchmark scoring: {name}", f"{calls:,} ratings", s, ["decode_7b_s"])
        else:
            toks = 2 * q_test * seq + 2 * sum(BASELINE_PAIRS.values()) * BASELINE_TOKENS
            add(f"benchmark scoring: {name}", f"{2 * pairs:,} sequences, {toks / 1e6:.1f}M tokens",
                forward_s(rm_params(e), toks), ["mfu_forward"])
    # BoN: sampling with the policy, scoring by every RM, judging every sample once
    bon = cfg["bon"]
    n_sets = count(bon, "sample_sets")
    samples = q_test * int(bon["n"]) * n_sets
    new = int(bon["max_new_tokens"])
    add("BoN sampling", f"{samples:,} answers x {new} tokens ({n_sets} sample set(s))",
        decode_calls_s(samples, int(bon.get("batch_size") or 32), new, u("policy_decode_s")), ["policy_decode_s"])
    reward = entry_with_defaults(cfg.get("reward") or {}, "reward")
    for name, e in down.items():
        if e["kind"].startswith("generative") and reward["generative"] == "pointwise":
            # reward.generative pointwise (the authors'): each sample rated alone on 0-1, a short reply
            new_r = int(reward["generative_max_new_tokens"])
            s = decode_calls_s(samples, 16, new_r, u("decode_7b_s"))
            add(f"BoN scoring: {name}", f"{samples:,} 0-1 ratings x {new_r} tokens", s, ["decode_7b_s"])
        elif e["kind"].startswith("generative"):
            calls = samples if e["kind"] == "generative_pointwise" else samples * 2
            s = decode_calls_s(calls, 16, int(e.get("max_new_tokens") or 512), u("decode_7b_s"))
            add(f"BoN scoring: {name}", f"{calls:,} judgements", s, ["decode_7b_s"])
        else:
            toks = samples * (PROMPT_TOKENS + new)
            add(f"BoN scoring: {name}", f"{samples:,} sequences, {toks / 1e6:.0f}M tokens",
                forward_s(rm_params(e), toks), ["mfu_forward"])
    add("BoN judging", f"{samples:,} judge calls x {judge['max_new_tokens']} tokens",
        judge_gpus * decode_calls_s(samples, int(judge.get("batch_size") or 16), int(judge["max_new_tokens"]),
                                    judge_step), ["decode_32b_s"])
    # PPO per RM (per subset when ppo.per_subset; one run per seed)
    ppo = entry_with_defaults(cfg["ppo"], "ppo")
    ppo_seeds = count(cfg["ppo"], "seeds")
    groups = [[s] for s in subsets] if cfg["ppo"].get("per_subset") else [subsets]
    eval_answers = 0
    if ppo.get("enabled", True):
        for name in down:
            p = plan_for_config(cfg, pol_name, name)
            calls = math.ceil(p.local_batch / p.generation_chunk)
            step_s = calls * int(ppo["response_length"]) * u("policy_decode_s")
            steps = sum(math.ceil((ppo["total_episodes"] or sum(train_q[s] for s in g)) / ppo["batch_size"])
                        for g in groups) * ppo_seeds
            add(f"PPO: {name}", f"{steps} steps x {calls} generate call(s) x {ppo['response_length']} tokens "
                f"({len(groups)} run(s) x {ppo_seeds} seed(s), {p.gpus} GPU(s))",
                steps * step_s * p.gpus, ["policy_decode_s"])
            eval_answers += q_test * ppo_seeds
    # GRPO per RM
    grpo_cfg = cfg.get("grpo")
    grpo_seeds = count(grpo_cfg, "seeds")
    if grpo_cfg and grpo_cfg.get("enabled", True):
        g = entry_with_defaults(grpo_cfg, "grpo")
        steps = (g["steps"] or math.ceil(sum(train_q[s] for s in subsets) / g["prompts_per_step"])) * grpo_seeds
        step_s = int(g["max_completion_length"]) * u("policy_decode_s")
        for name in down:
            add(f"GRPO: {name}", f"{steps} steps x 1 generate call of {g['prompts_per_step'] * g['num_generations']} "
                f"x {g['max_completion_length']} tokens ({grpo_seeds} seed(s))", steps * step_s, ["policy_decode_s"])
            eval_answers += q_test * grpo_seeds
    # evaluation: base answers once, trained policies' answers, every answer judged
    answers = q_test + eval_answers
    ev_tokens = int(ppo["eval_max_new_tokens"])
    gen_s = decode_calls_s(answers, 32, ev_tokens, u("policy_decode_s"))
    judge_s = judge_gpus * decode_calls_s(answers, int(judge.get("batch_size") or 16), int(judge["max_new_tokens"]),
                                          judge_step)
    add("evaluation (answers + judge)", f"{answers:,} answers x {ev_tokens} tokens, {answers:,} judge calls",
        gen_s + judge_s, ["policy_decode_s", "decode_32b_s"])
    return rows


# BoN sample counts whose cost is printed beside the config's (see the module docstring)
BON_NS = (16, 128)


def bon_totals(cfg: dict, train_q: dict, ns=BON_NS) -> dict[int, tuple[float, float]]:
    """N -> (GPU-hours of the BoN stages, run total) with `bon.n` set to N; the config's N included.
    Only sampling, scoring and judging grow with N (the k list selects among the samples)."""
    import copy

    out = {}
    for n in sorted({*ns, int(cfg["bon"]["n"])}):
        c = copy.deepcopy(cfg)
        c["bon"]["n"] = n
        rows = stages(c, train_q)
        out[n] = (sum(r["gpu_h"] for r in rows if r["stage"].startswith("BoN ")), sum(r["gpu_h"] for r in rows))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--train-prompts", default=None,
                    help="LaMP-QA train prompts per subset, comma-separated in the config's subset order")
    a = ap.parse_args(argv)
    cfg = load_config(a.config)
    subsets = cfg["data"]["personalized"]["subsets"]
    train_q = dict(TRAIN_QUESTIONS)
    if a.train_prompts:
        vals = [int(x) for x in a.train_prompts.split(",")]
        if len(vals) != len(subsets):
            raise SystemExit(f"--train-prompts: {len(vals)} values for {len(subsets)} subsets")
        train_q.update(dict(zip(subsets, vals)))
    rows = stages(cfg, train_q)
    used = []
    w = max(len(r["stage"]) for r in rows)
    print(f"{'stage':{w}s}  {'GPU-h':>8s}  work")
    for r in rows:
        print(f"{r['stage']:{w}s}  {r['gpu_h']:8.1f}  {r['work']}")
        used += [x for x in r["units"] if x not in used]
    print("unit costs:")
    for k in used:
        print(f"  {k} = {u(k):g}: {UNIT[k][1]}")
    n_test = sum(TEST_QUESTIONS[s] for s in subsets)
    print(f"  data: personalized test {n_test:,} questions (perf/bench_judge_cost.py); "
          f"LaMP-QA train {sum(train_q[s] for s in subsets):,} prompts"
          + (" (--train-prompts)" if a.train_prompts else " (ASSUMED)"))
    own = int(cfg["bon"]["n"])
    for n, (bon_h, total_h) in bon_totals(cfg, train_q).items():
        why = {16: "BoN/sample.sh's default", 128: "their README's and K_VALUES' k up to 128"}.get(n, "")
        tag = "; ".join(x for x in ("config bon.n" if n == own else "", why) if x)
        print(f"BoN at N = {n} ({tag}): {bon_h:.1f} GPU-hours in BoN stages, total {total_h:.0f} GPU-hours on H100")
    print(f"total: {sum(r['gpu_h'] for r in rows):.0f} GPU-hours on H100")
    return 0


if __name__ == "__main__":
    sys.exit(main())
