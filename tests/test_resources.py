"""prbench.plan.resources: GPUs, host memory, runtime and sharding of the RM jobs, checked against
memory computed by hand for an 8B classifier, a 27B classifier (Gemma-2-27B) and a 72B generative RM
at benchmark scoring, as BoN scorer and as PPO reward; the rules request the module's numbers."""
import copy
import math
import re

import pytest
from helpers import REPO, dry_run

from prbench.downstream.grpo.memory import check_grpo_runs
from prbench.downstream.ppo.memory import gpus_per_run, plan_for_config
from prbench.plan import load_layered
from prbench.plan import resources as R
from prbench.plan.sizing import gpus_for_need

STUDY = [REPO / "config.yaml", REPO / "configs" / "study.yaml"]
POLICY = "qwen25_05b"
TOKENS = 16384  # scoring.max_tokens_per_batch of config.yaml


@pytest.fixture(scope="module")
def study():
    return load_layered(STUDY)


def test_8b_classifier_one_gpu_at_benchmark_and_bon_its_own_gpu_as_ppo_reward(study):
    # Skywork-Reward-V2-Llama-3.1-8B, built-in shape: 7.50e9 parameters, hidden 4096, intermediate 14336
    weights = 2 * 7.50e9                                # bf16
    acts = TOKENS * (4096 + 14336) * 14                 # RM_ACT_BYTES per token x (hidden + intermediate)
    need = (weights + acts) * 1.04 / 1e9                # allocator overhead: 19.997 GB
    for stage in ("benchmark", "bon"):
        p = R.rm_inference(study, "skywork_v2_llama8b", stage, "personalized" if stage == "benchmark" else None)
        assert p.need_gb == pytest.approx(need, abs=0.01) and p.need_gb == pytest.approx(20.0, abs=0.01)
        assert (p.gpus, p.sharding, p.shape) == (1, "single GPU", "known")
        assert p.mem_mb == 15000 + 8000                 # weights on the host + 8 GB
    # PPO: policy + critic + reference on GPU 1, the RM on GPU 2: 15 GB + one rollout chunk of 4 rows
    # x (8192 + 512) tokens x (4096 + 14336) x 14 bytes, x 1.04 = 24.94 GB
    p = R.ppo_reward(study, POLICY, "skywork_v2_llama8b")
    plan = plan_for_config(study, POLICY, "skywork_v2_llama8b")
    assert plan.rm_gpu_gb == pytest.approx((weights + 4 * 8704 * 18432 * 14) * 1.04 / 1e9, abs=0.01)
    assert p.gpus == plan.gpus == 2
    assert p.sharding == "DDP over 1 training GPU(s), RM on GPU 2 (1 whole copy)"


def test_27b_classifier_fits_one_gpu_for_scoring_and_two_as_ppo_reward(study):
    # Gemma-2-27B, approximate shape from params_b 27: 32 layers, hidden 8320, intermediate 29120
    p = R.rm_inference(study, "skywork_v02_gemma27b", "benchmark", "personalized")
    assert p.shape == "approximate"
    weights = 2 * 27e9
    acts = TOKENS * (8320 + 29120) * 14                 # 8.59 GB
    assert p.need_gb == pytest.approx((weights + acts) * 1.04 / 1e9, abs=0.01)  # 65.09 GB < 80
    assert (p.gpus, p.sharding) == (1, "single GPU")
    assert R.rm_inference(study, "skywork_v02_gemma27b", "bon").gpus == 1
    # as PPO reward: the RM GPU holds 54 GB + 4 x 8704 x 37440 x 14 bytes = 72.25 GB, x 1.04 = 75.14 GB
    ppo = R.ppo_reward(study, POLICY, "skywork_v02_gemma27b")
    assert ppo.fits and ppo.gpus == 2
    assert plan_for_config(study, POLICY, "skywork_v02_gemma27b").rm_gpu_gb == pytest.approx(
        (weights + 4 * 8704 * 37440 * 14) * 1.04 / 1e9, abs=0.01)
    # as GRPO reward it shares one GPU with the policy's generation batch: refused by the GRPO plan
    grpo = R.grpo_reward(study, POLICY, "skywork_v02_gemma27b")
    assert not grpo.fits and "GRPO does not fit" in grpo.why and "grpo.prompts_per_step" in grpo.why


def test_72b_generative_is_sharded_with_device_map_and_refused_as_ppo_reward(study):
    # Qwen2.5-72B, approximate shape: 32 layers, hidden 13568, 106 heads of 128, 26 KV heads, intermediate 47488
    p = R.rm_inference(study, "qwen25_72b_pairwise", "benchmark", "personalized")
    weights = 2 * 72e9
    kv = 2 * 32 * 26 * 128 * TOKENS * 2               # bf16 KV cache over one batch's 16,384 tokens: 6.98 GB
    prefill = (TOKENS - 512) * (3 * 47488 + 4 * 13568) * 2  # one layer's MLP over the prompts: 6.25 GB
    need = (weights + kv + prefill) * 1.04 / 1e9       # 163.5 GB
    assert p.need_gb == pytest.approx(need, abs=0.01)
    assert p.gpus == math.ceil(need / 80) == 3 and p.sharding == "device_map over 3 GPUs"
    assert p.mem_mb == 144000 + 8000
    assert R.rm_inference(study, "qwen25_72b_pairwise", "bon").sharding == "device_map over 3 GPUs"
    for method, fn in (("ppo", R.ppo_reward), ("grpo", R.grpo_reward)):
        q = fn(study, POLICY, "qwen25_72b_pairwise")
        assert not q.fits and q.sharding.startswith("cannot shard")
        assert q.why.startswith(f"config key {method}.rms: reward_models.qwen25_72b_pairwise (72.0B parameters, "
                                "149.8 GB of weights as loaded)")


@pytest.mark.parametrize("gpu_mem,expected", [(80, (1, 1, 3)), (40, (1, 2, 5)), (24, (1, 3, 7))])
def test_a_model_larger_than_one_gpu_gets_device_map_over_ceil_need_gpus(study, gpu_mem, expected):
    cfg = copy.deepcopy(study)
    cfg["resources"]["gpu_mem_gb"] = gpu_mem
    got = []
    for rm in ("skywork_v2_llama8b", "skywork_v02_gemma27b", "qwen25_72b_pairwise"):
        p = R.rm_inference(cfg, rm, "benchmark", "personalized")
        assert p.gpus == math.ceil(p.need_gb / gpu_mem)  # the weights' cap does not bind here
        assert p.sharding == ("single GPU" if p.gpus == 1 else f"device_map over {p.gpus} GPUs")
        got.append(p.gpus)
    assert tuple(got) == expected


def test_device_maps_per_gpu_cap_can_add_a_gpu():
    assert gpus_for_need(79, 70, 40) == 2   # 70 GB of weights <= 0.9 x 2 x 40 = 72
    assert gpus_for_need(79, 75, 40) == 3   # 75 > 72: a third GPU
    assert gpus_for_need(30, 29, 40) == 1   # one GPU: no device_map, no cap
    assert R.inference_sharding(2, "vllm") == "vLLM tensor parallel 2"
    assert R.inference_sharding(0) == "CPU"


def test_unshardable_ppo_and_grpo_rewards_are_refused_naming_the_key(study):
    cfg = copy.deepcopy(study)
    cfg["ppo"]["rms"] = ["skywork_v2_llama8b", "qwen25_72b_pairwise"]
    with pytest.raises(ValueError) as err:
        gpus_per_run(cfg, [POLICY], cfg["ppo"]["rms"])     # what rules/ppo.smk calls at parse time
    msg = str(err.value)
    assert msg.startswith("config key ppo.rms: reward_models.qwen25_72b_pairwise")
    assert "holds the whole RM on one GPU" in msg and "Remove it from ppo.rms" in msg
    cfg["ppo"]["rms"] = None                                 # every downstream RM: the other remedy is named
    assert "reward_models.qwen25_72b_pairwise.downstream: false" in R.check_reward_fits_one_gpu(
        cfg, "ppo", "qwen25_72b_pairwise")
    with pytest.raises(ValueError, match=r"^config key grpo\.rms: reward_models\.llama33_70b_pairwise"):
        check_grpo_runs(cfg, [POLICY], ["llama33_70b_pairwise"])  # rules/grpo.smk


def test_indexed_cuda_device_is_not_spread(monkeypatch):
    """The PPO reward's own GPU ("cuda:N-1", prbench.downstream.ppo.launch) holds the whole RM, as
    the PPO memory plan counts it; only the plain "cuda" of a job spreads over its GPUs."""
    import torch

    from prbench.models import multi_gpu_kwargs

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert multi_gpu_kwargs("cuda:1") == {}


def _resources(job):
    m = re.search(r"resources: (.*)", job.text)
    return dict(kv.split("=", 1) for kv in m.group(1).split(", "))


@pytest.mark.dag
def test_the_rules_request_the_modules_numbers(study, tmp_path):
    """Snakemake's dry run of the study config prints each job's resources: those of score_benchmark,
    score_bon, train_ppo_subset, train_grpo and the judge's and policy's jobs (sample_bon, base_answers,
    judge_bon, judge_validity, eval_policy, eval_policy_subset) are the module's."""
    # the whole DAG (a --until over these rules hits Snakemake's "Out of jobs ready to be started" bug)
    run = dry_run("--configfiles", *STUDY, "-p", workdir=tmp_path)
    seen = set()
    for job in run.jobs:
        w, res = job.wildcards, None
        if job.rule == "score_benchmark":  # a split job's join: no model (prbench.scoring.parts)
            split = R.benchmark_parts(study, w["rm"], w["bench"]) > 1
            res = (R.benchmark_join if split else R.rm_inference)(study, w["rm"], *(() if split else
                                                                                   ("benchmark", w["bench"])))
        elif job.rule == "score_benchmark_part":
            res = R.rm_inference(study, w["rm"], "benchmark", w["bench"])
        elif job.rule == "score_bon":
            res = R.rm_inference(study, w["rm"], "bon")
        elif job.rule == "train_ppo_subset":
            res = R.ppo_reward(study, w["policy"], w["rm"], w["subset"])
        elif job.rule == "train_grpo":
            res = R.grpo_reward(study, w["policy"], w["rm"])
        elif job.rule in ("sample_bon", "base_answers", "judge_bon", "judge_validity"):
            res = R.shared_job(study, job.rule, w.get("policy"))
        elif job.rule in ("eval_policy", "eval_policy_subset"):
            res = R.shared_job(study, "eval_policy", w["policy"], w.get("subset"))
        if res is None:
            continue
        got = _resources(job)
        limit = R.max_runtime(study)  # resources.max_runtime_min caps every request
        assert (int(got["gpu"]), int(got["mem_mb"]), int(got["runtime"])) == (
            res.gpus, res.mem_mb, min(res.runtime_min, int(limit))), (job.rule, w)
        assert int(got["runtime"]) <= limit
        seen.add((job.rule, w.get("rm")))
    assert {("score_benchmark", "qwen25_72b_pairwise"), ("score_benchmark_part", "qwen25_72b_pairwise"),
            ("score_bon", "skywork_v02_gemma27b"),
            ("train_ppo_subset", "skywork_v2_llama8b"), ("train_grpo", "skywork_v2_llama8b"),
            ("sample_bon", None), ("base_answers", None), ("judge_bon", None), ("judge_validity", None),
            ("eval_policy_subset", "skywork_v2_llama8b"), ("eval_policy", "skywork_v2_llama8b")} <= seen
    assert any(int(_resources(j)["gpu"]) == 3 for j in run.jobs if j.rule == "score_benchmark")


def test_plan_prints_the_resource_table(capsys):
    from prbench.plan.report import print_resources

    print_resources(load_layered(STUDY))
    out = capsys.readouterr().out
    assert "5. resources per job" in out
    # the study's 48-hour partition (resources.max_runtime_min): the two 70-72B judges' RM-Bench jobs in parts
    row = re.search(r"benchmark scoring\s+> 35B\s+3\s+2-3\s+\S+\s+\S+\s+(\S+)\s+(.*)", out)
    assert row and float(row.group(1)) <= 48, out
    assert "device_map over 3 GPUs, rmbench in 2 parts (1)" in row.group(2)
    assert "device_map over 2 GPUs, rmbench in 2 parts (1)" in row.group(2)
    assert "resources.max_runtime_min 2880" in out and "other jobs planned above it: none" in out
    assert "outside ppo.rms that cannot be sharded (weights > one GPU): 3" in out
    assert "host: ASSUMED" in out and "measured on an H100" in out


def test_the_32b_judge_and_the_policy_jobs_by_hand(study):
    """judge_bon: Qwen2.5-32B (approximate shape from params_b 32: 32 layers, hidden 9088, 71 heads of
    128, 17 KV heads, intermediate 31808) generating judge.batch_size 16 rows of 1,024 prompt + 32 new
    tokens; runtime 45,280 calls / 16 x 32 steps x its decode step, x 3."""
    p = R.shared_job(study, "judge_bon")
    weights = 2 * 32e9
    kv = 2 * 32 * 17 * 128 * (1024 + 32) * 16 * 2       # 4.71 GB
    prefill = 16 * 1024 * (3 * 31808 + 4 * 9088) * 2     # 4.32 GB (> the step logits, 33 MB)
    need = (weights + kv + prefill) * 1.04 / 1e9          # 75.94 GB: one 80 GB GPU
    assert p.need_gb == pytest.approx(need, abs=0.01)
    assert (p.gpus, p.sharding, p.tensor_parallel) == (1, "single GPU", 1)
    assert p.mem_mb == 64000 + 8000
    step = 64 / 1100 + 0.031                               # 0.0892 s: the decode-step model at 64 GB
    assert p.runtime_min == math.ceil(3 * math.ceil(2830 * 16 / 16) * 32 * step / 60)  # 404 min
    assert R.shared_job(study, "judge_validity").runtime_min == 60  # 5,660 calls: 19 min x 3 < the floor
    # eval_policy: the 0.5B policy's answers (32 rows x (1,800 + 512) tokens) then the judge, planned at once
    e = R.shared_job(study, "eval_policy", POLICY, "Lifestyle_and_Personal_Development")
    assert e.gpus == 2 and e.sharding == "device_map over 2 GPUs" and e.need_gb > 80
    q = 989
    pol = math.ceil(q / 32) * 512 * 300 / (16 * 512)     # the measured policy step
    judge = math.ceil(2 * q / 16) * 32 * step              # its answers and the base policy's
    assert e.runtime_min == max(60, math.ceil(3 * (pol + judge) / 60))
    # sample_bon: one shard of 2,830 / 8 questions x 16 samples in batches of 32
    s = R.shared_job(study, "sample_bon", POLICY)
    assert (s.gpus, s.runtime_min) == (1, math.ceil(3 * math.ceil(354 * 16 / 32) * 512 * 300 / (16 * 512) / 60))


def test_a_judge_tensor_parallel_size_above_the_jobs_gpus_is_refused(study):
    cfg = copy.deepcopy(study)
    cfg["judge"]["backend"] = "vllm"
    R.check_judge_engine(cfg)                               # null: every GPU the job holds
    p = R.shared_job(cfg, "judge_bon")
    assert p.gpus == 2 and p.sharding == "vLLM tensor parallel 2" and p.tensor_parallel == 2  # 75.9 GB > 0.9 x 80
    for tp, why in ((4, "exceeds the GPUs of its jobs"), (1, "cannot hold the judge")):
        cfg["judge"]["tensor_parallel_size"] = tp
        with pytest.raises(ValueError, match=rf"^config key judge\.tensor_parallel_size: {tp} ") as err:
            R.check_judge_engine(cfg)
        assert why in str(err.value)
    cfg["judge"]["tensor_parallel_size"] = 2
    R.check_judge_engine(cfg)
    assert R.shared_job(cfg, "judge_bon").runtime_min < R.shared_job(study, "judge_bon").runtime_min  # TP reads faster


@pytest.mark.dag
def test_the_workflow_refuses_the_judges_tensor_parallel_size_at_parse_time(tmp_path):
    from helpers import SNAKEFILE, snakemake

    over = tmp_path / "tp.yaml"
    over.write_text("judge:\n  backend: vllm\n  tensor_parallel_size: 4\n", encoding="utf-8")
    proc = snakemake("-n", "--cores", "1", "-s", SNAKEFILE, "-d", tmp_path / "w", "--configfiles", *STUDY, over,
                     cwd=REPO)
    assert proc.returncode != 0
    assert "config key judge.tensor_parallel_size: 4 exceeds the GPUs of its jobs" in proc.stdout + proc.stderr
