"""The study on replicas (configs/replica_study.yaml over config.yaml + configs/study.yaml): every model
of the study points at a replica of its own hub model's family, and a dry run of the full study on
them has the study's job counts per rule (prbench.plan.job_counts, what `make plan` prints) plus one
replica_model job per replica."""
import pytest
from helpers import REPO

from prbench.downstream.ppo.memory import REPLICA_MODEL_DIR, planned_ref
from prbench.plan import job_counts, load_layered
from prbench.replica.build import BUILDERS

STUDY = [REPO / "config.yaml", REPO / "configs" / "study.yaml"]
OVERLAY = REPO / "configs" / "replica_study.yaml"

# (text of the hub id, builder, builder option) from the architectures named in configs/study.yaml
ARCHITECTURES = [("deberta-v3", "deberta_seqcls", {}), ("Gemma-2-27B", "gemma_seqcls", {"version": "gemma2"}),
                 ("Gemma-2B", "gemma_seqcls", {"version": "gemma"}), ("Qwen3", "seqcls", {"family": "qwen3"}),
                 ("Tulu-3", "seqcls", {"family": "tulu3"}), ("internlm2", "internlm2_reward", {}),
                 ("ArmoRM", "armorm", {}), ("Qwen/Qwen2.5", "qwen2_chat", {}),
                 ("meta-llama/Llama-3", "llama3_chat", {}), ("Skywork-Reward-V2-Llama", "seqcls", {"family": "llama3"}),
                 ("FsfairX-LLaMA3", "seqcls", {"family": "llama3"}), ("GRM-Llama3", "seqcls", {"family": "llama3"})]


@pytest.fixture(scope="module")
def configs():
    return load_layered(STUDY), load_layered(STUDY + [OVERLAY])


def _replica(cfg, ref):
    assert ref.startswith(REPLICA_MODEL_DIR + "/"), ref
    return cfg["replica"]["models"][ref.removeprefix(REPLICA_MODEL_DIR + "/")]


def test_every_study_model_points_at_a_replica_of_its_own_hub_model(configs):
    base, rep = configs
    assert list(rep["reward_models"]) == list(base["reward_models"]) and len(base["reward_models"]) == 35
    folders: dict[str, str] = {}
    for name, entry in base["reward_models"].items():
        r = rep["reward_models"][name]
        spec = _replica(rep, r["path"])
        assert spec["replicates"] == entry["path"], name  # the replica stands in for this entry's model
        assert folders.setdefault(entry["path"], r["path"]) == r["path"], name  # one folder per hub model
        changed = {k for k in r if r[k] != entry.get(k)}
        assert changed <= {"path", "use_safetensors"}, (name, changed)
        if "use_safetensors" in changed:  # the hub's pickle weights; the replicas are safetensors
            assert entry["use_safetensors"] is False and r["use_safetensors"] is True, name
        # the replica's interface fits the entry's kind and adapter
        if entry["kind"].startswith("generative"):
            assert spec["builder"] in ("qwen2_chat", "llama3_chat"), name
        elif entry.get("adapter") == "reward_token":
            assert spec["builder"] == "internlm2_reward", name
        elif entry.get("trust_remote_code"):
            assert spec["builder"] in ("armorm", "internlm2_reward"), name
        else:
            assert spec["builder"] in ("seqcls", "gemma_seqcls", "deberta_seqcls"), name
        for text, builder, opts in ARCHITECTURES:
            if text in entry["path"]:
                assert spec["builder"] == builder and opts.items() <= spec.items(), (name, spec)
    assert len(set(folders.values())) == len(folders)
    refs = [(rep["policies"][p]["path"], base["policies"][p]["path"]) for p in base["policies"]]
    refs += [(rep["judge"]["model"], base["judge"]["model"]), (rep["retriever"]["model"], base["retriever"]["model"])]
    for ref, hub in refs:
        assert _replica(rep, ref)["replicates"] == hub
    assert "judge_training" in _replica(rep, rep["judge"]["model"])
    # every builder (every family with a replica) is used by the study
    assert {m["builder"] for m in rep["replica"]["models"].values()} == set(BUILDERS)
    # nothing but model references changes: the study's protocol sections are the same
    for key in ("scoring", "reward", "bon", "ppo", "grpo", "correlation", "data", "resources", "prompts"):
        assert rep[key] == base[key], key


def test_replica_is_planned_as_its_hub_model_built_or_not(tmp_path, monkeypatch, configs):
    _, rep = configs
    ref = f"{REPLICA_MODEL_DIR}/skywork_v02_gemma27b"
    monkeypatch.chdir(tmp_path)
    assert planned_ref(rep, ref) == "Skywork/Skywork-Reward-Gemma-2-27B-v0.2"
    (tmp_path / ref).mkdir(parents=True)
    (tmp_path / ref / "config.json").write_text("{}")
    assert planned_ref(rep, ref) == "Skywork/Skywork-Reward-Gemma-2-27B-v0.2"  # built: the same plan (params stable)
    assert planned_ref(rep, "Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert planned_ref({}, f"{REPLICA_MODEL_DIR}/x") == f"{REPLICA_MODEL_DIR}/x"


@pytest.mark.dag
def test_study_dry_run_on_replicas_has_the_plans_job_counts(configs):
    _, rep = configs
    study = job_counts(STUDY)
    on_replicas = job_counts(STUDY + [OVERLAY])
    assert on_replicas.pop("replica_model") == len(rep["replica"]["models"])  # `rule all` builds each replica
    on_replicas["total"] -= len(rep["replica"]["models"])
    assert on_replicas == study
    assert study["score_benchmark"] == 4 * len(rep["reward_models"])  # every RM on every benchmark
    # the jobs above the study's 48-hour partition (resources.max_runtime_min) in parts (prbench.scoring.parts)
    from prbench.plan import resources as R

    base = configs[0]
    benches = ["personalized", *base["data"]["baselines"]]
    parts = [R.benchmark_parts(base, rm, b) for rm in base["reward_models"] for b in benches]
    assert study["score_benchmark_part"] == sum(n for n in parts if n > 1) > 0
    print(f"study on replicas: {study['total']} jobs + {len(rep['replica']['models'])} replica builds")


def test_the_replica_study_requests_the_studys_resources(configs):
    """Every RM, judge and policy job of the replica study is planned as the study's own (the RM's shape
    through planned_ref as well: prbench.downstream.ppo.memory.rm_ref), so the rules request on replicas
    what the real run would."""
    from prbench.plan import resources as R

    base, rep = configs
    assert R.plans(rep) == R.plans(base)
    assert R.shared_jobs(rep) == R.shared_jobs(base)
