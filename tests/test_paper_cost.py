"""perf/paper_cost.py: the paper run's cost table reads the config (runs per subset, seeds, sample
sets) and its total is the sum of its stages."""
import importlib.util
import math
import re

import pytest
from helpers import REPO

from prbench.validation import load_config

spec = importlib.util.spec_from_file_location("paper_cost", REPO / "perf" / "paper_cost.py")
paper_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paper_cost)


@pytest.fixture(scope="module")
def cfg():
    return load_config(REPO / "config.yaml")


def _rows(cfg):
    return {r["stage"]: r for r in paper_cost.stages(cfg, dict(paper_cost.TRAIN_QUESTIONS))}


def test_last_line_is_the_sum_of_the_stages(cfg, capsys):
    assert paper_cost.main(["--config", str(REPO / "config.yaml")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    m = re.fullmatch(r"total: (\d+) GPU-hours on H100", out[-1])
    assert m
    rows = _rows(cfg)
    assert int(m.group(1)) == round(sum(r["gpu_h"] for r in rows.values()))
    for stage in ("retrieval (contriever)", "BoN sampling", "BoN judging", "evaluation (answers + judge)"):
        assert stage in rows
    for rm, e in cfg["reward_models"].items():
        assert f"benchmark scoring: {rm}" in rows
        for prefix in ("BoN scoring", "PPO", "GRPO"):  # downstream false: benchmarks only, no downstream cost
            assert (f"{prefix}: {rm}" in rows) == e.get("downstream", True), (prefix, rm)
    assert not cfg["reward_models"]["qwen25_7b_pointwise"]["downstream"]
    assert not cfg["reward_models"]["skywork_v2_llama8b_profile"]["downstream"]
    assert "policy_decode_s = 0.0366211: measured" in "\n".join(out)


def test_bon_n_16_and_128_are_both_costed(cfg, capsys):
    """The authors' BoN/sample.sh samples N = 16, their README's k sweep reaches 128: both totals
    are printed above the last line, N = 128 costing more in the BoN stages only."""
    assert paper_cost.main(["--config", str(REPO / "config.yaml")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    found = {}
    for line in out[-3:-1]:
        m = re.fullmatch(r"BoN at N = (\d+) \((.+)\): ([\d.]+) GPU-hours in BoN stages, total (\d+) GPU-hours on H100",
                         line)
        assert m, line
        found[int(m.group(1))] = (m.group(2), float(m.group(3)), int(m.group(4)))
    assert set(found) == {16, 128} and cfg["bon"]["n"] == 16
    assert "config bon.n" in found[16][0] and "config bon.n" not in found[128][0]
    totals = paper_cost.bon_totals(cfg, dict(paper_cost.TRAIN_QUESTIONS))
    rows = _rows(cfg)
    assert totals[16][1] == pytest.approx(sum(r["gpu_h"] for r in rows.values()))
    assert found[16][2] == round(totals[16][1]) and found[128][2] == round(totals[128][1])
    bon16, bon128 = totals[16][0], totals[128][0]
    assert bon128 == pytest.approx(8 * bon16, rel=0.01)  # sampling, scoring, judging: linear in N
    assert totals[128][1] - totals[16][1] == pytest.approx(bon128 - bon16)  # nothing else grows with N


def test_ppo_step_cost_follows_the_plans_generate_calls(cfg):
    rows = _rows(cfg)
    ppo = rows["PPO: skywork_v2_llama8b"]
    n = paper_cost.TRAIN_QUESTIONS.values()
    # config.yaml trains per subset (ppo.per_subset: one run per subset), else one pooled run
    steps = sum(-(-k // 128) for k in n) if cfg["ppo"].get("per_subset") else -(-sum(n) // 128)
    # 2 GPUs; local batch 128 in generate calls of 64 rows: 2 x 512 decode steps of 36.6 ms each
    assert ppo["gpu_h"] == pytest.approx(steps * 2 * 512 * 300 / (16 * 512) * 2 / 3600)
    assert "2 generate call(s)" in ppo["work"]


def test_per_subset_runs_seeds_and_sample_sets_are_counted(cfg):
    import copy

    base = _rows(cfg)
    c = copy.deepcopy(cfg)
    c["ppo"]["per_subset"] = True
    c["ppo"]["seeds"] = [0, 1]
    c["grpo"]["seeds"] = 3
    c["bon"]["sample_sets"] = [0, 1]
    rows = _rows(c)
    per_subset_steps = sum(-(-n // 128) for n in paper_cost.TRAIN_QUESTIONS.values())
    assert f"{2 * per_subset_steps} steps" in rows["PPO: skywork_v2_llama8b"]["work"]
    assert "3 run(s) x 2 seed(s)" in rows["PPO: skywork_v2_llama8b"]["work"]
    assert rows["GRPO: armorm_llama3_8b"]["gpu_h"] == pytest.approx(3 * base["GRPO: armorm_llama3_8b"]["gpu_h"])
    assert rows["BoN sampling"]["gpu_h"] == pytest.approx(2 * base["BoN sampling"]["gpu_h"])
    assert rows["BoN judging"]["gpu_h"] == pytest.approx(2 * base["BoN judging"]["gpu_h"])


def test_a_claims_seeds_are_counted_for_its_rm_only(cfg):
    import copy

    base = _rows(cfg)
    c = copy.deepcopy(cfg)
    c["ppo"]["claim"] = {"rm": "skywork_v2_llama8b", "seeds": 3}
    c["grpo"]["claim"] = {"rm": "armorm_llama3_8b"}  # claim.seeds: the schema's default, 3
    rows = _rows(c)
    assert rows["PPO: skywork_v2_llama8b"]["gpu_h"] == pytest.approx(3 * base["PPO: skywork_v2_llama8b"]["gpu_h"])
    assert rows["GRPO: armorm_llama3_8b"]["gpu_h"] == pytest.approx(3 * base["GRPO: armorm_llama3_8b"]["gpu_h"])
    others = [k for k in base if k.startswith(("PPO:", "GRPO:"))
              and k not in ("PPO: skywork_v2_llama8b", "GRPO: armorm_llama3_8b")]
    assert others and all(rows[k]["gpu_h"] == base[k]["gpu_h"] for k in others)


def test_cluster_doc_shows_the_current_table(cfg):
    """docs/CLUSTER.md's cost table is the script's output for config.yaml (rerun the script and
    paste its rows when config.yaml or a unit cost changes)."""
    doc = (REPO / "docs" / "CLUSTER.md").read_text()
    rows = _rows(cfg)
    for stage, r in rows.items():
        assert f"| {stage} | {r['work']} | {r['gpu_h']:.1f} |" in doc, stage
    assert f"| **total** | | **{sum(r['gpu_h'] for r in rows.values()):.0f}** |" in doc


def test_pointwise_generative_rewards_cost_short_ratings(cfg):
    """reward.generative pointwise (config.yaml, the authors'): a generative RM rates each BoN sample
    once with reward.generative_max_new_tokens; round_robin compares samples in pairs."""
    import copy

    rows = _rows(cfg)
    assert "0-1 ratings x 10 tokens" in rows["BoN scoring: qwen25_7b_pairwise"]["work"]
    c = copy.deepcopy(cfg)
    c["reward"]["generative"] = "round_robin"
    rr = _rows(c)
    assert rr["BoN scoring: qwen25_7b_pairwise"]["gpu_h"] > 10 * rows["BoN scoring: qwen25_7b_pairwise"]["gpu_h"]


def test_decode_step_scales_with_the_models_weight_bytes():
    """One decode step = weight bytes / (1,100 GB/s x GPUs reading at once) + 31 ms (both ASSUMED),
    fitted to the two ASSUMED steps it replaces: 7.5B bf16 0.045 s, the 32B judge 0.09 s (within 3%)."""
    from prbench.plan.cost import DECODE_ANCHORS, decode_step_s

    for weight_bytes, _gpus, step in DECODE_ANCHORS.values():  # device_map over N GPUs: one GPU's speed
        assert decode_step_s(weight_bytes) == pytest.approx(step, rel=0.03)
    assert decode_step_s(15e9) == pytest.approx(15 / 1100 + 0.031)          # 0.0446 s
    assert decode_step_s(64e9) == pytest.approx(64 / 1100 + 0.031)          # 0.0892 s
    assert decode_step_s(144e9) == pytest.approx(144 / 1100 + 0.031)        # Qwen2.5-72B bf16: 0.1619 s
    assert decode_step_s(140e9) == pytest.approx(140 / 1100 + 0.031)        # Llama-3.3-70B bf16: 0.1583 s
    assert decode_step_s(144e9, tensor_parallel=4) == pytest.approx(36 / 1100 + 0.031)  # vLLM TP 4: 0.0637 s


def test_the_70b_72b_generative_rms_cost_and_run_longer_by_their_decode_step():
    """The study's 72B and 70B pairwise RMs: benchmark scoring = (pairs x 2 orders / 16 a batch) x 512
    new tokens x their own decode step, x the GPUs they hold; the SLURM runtime x 3 (the margin)."""
    from prbench.plan import load_layered
    from prbench.plan import resources as R
    from prbench.plan.cost import TEST_QUESTIONS, stages

    study = load_layered([REPO / "config.yaml", REPO / "configs" / "study.yaml"])
    rows = {r["stage"]: r for r in stages(study, dict(paper_cost.TRAIN_QUESTIONS))}
    q = sum(TEST_QUESTIONS.values())                    # 2,830 personalized pairs
    pairs = {"personalized": q, "rewardbench": 2985, "rmbench": 1327 * 9, "rewardbench2": 3000}
    for rm, params_b, gpus in (("qwen25_72b_pairwise", 72, 3), ("llama33_70b_pairwise", 70, 2)):
        e = study["reward_models"][rm]
        assert e["kind"] == "generative_pairwise" and float(e["params_b"]) == params_b
        calls = 2 if e.get("both_orders") else 1
        step = 2 * params_b / 1100 + 0.031              # 0.1619 s (72B), 0.1583 s (70B)
        seconds = {b: math.ceil(n * calls / 16) * 512 * step for b, n in pairs.items()}
        assert rows[f"benchmark scoring: {rm}"]["gpu_h"] == pytest.approx(gpus * sum(seconds.values()) / 3600)
        p = R.rm_inference(study, rm, "benchmark")       # the longest benchmark job: RM-Bench
        assert p.gpus == gpus
        # one job above the study's 48-hour partition (resources.max_runtime_min): 2 parts of half the rows each
        assert math.ceil(3 * seconds["rmbench"] / 60) > 48 * 60 and R.benchmark_parts(study, rm, "rmbench") == 2
        assert p.runtime_min == math.ceil(3 * seconds["rmbench"] / 2 / 60) <= 48 * 60
        # the 7-8B step the cost model used for every size before: 3.5x shorter
        assert seconds["rmbench"] / (math.ceil(pairs["rmbench"] * calls / 16) * 512 * 0.045) > 3.5
