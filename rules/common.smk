# Shared by every stage: config validation, names, input functions, resource scaling and the policies
# and RMs as the downstream stages load them. The judge's plumbing is in rules/judge.smk. A stage file
# reads only its own globals and these (tests/test_rules_layout.py).
import functools
import os
import sys
from pathlib import Path

from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from prbench import downstream as DS  # noqa: E402
from prbench.config import schema_as_json  # noqa: E402
from prbench.validation import check_config, check_confirmatory_methods  # noqa: E402
from prbench.rms import kind_info, reward_spec  # noqa: E402
from prbench.seeding import replicate_seed as _replicate_seed  # noqa: E402
from prbench import partial as PARTIAL  # noqa: E402
from prbench.plan import resources as RES  # noqa: E402
from prbench.rms.family import family_members as RM_FAMILIES  # noqa: E402

# the schema file as JSON for validate(): it parses a YAML one through yte, ~0.25 CPU-s per parse
with schema_as_json(workflow.source_path("../schemas/config.schema.yaml")) as _schema_json:
    validate(config, schema=_schema_json)
check_config(config)

SEED = config["seed"]
PROMPTS = config.get("prompts") or {}  # prompt template set + post format (prbench.prompts.configure)
SUBSETS = config["data"]["personalized"]["subsets"]
BASELINES = sorted(config["data"]["baselines"])  # sorted: the config's key order reruns nothing (params carry it)
BENCHMARKS = ["personalized"] + BASELINES
RMS = list(config["reward_models"])  # RM families expanded into their members by check_config
# RM families (prbench.rms.family, rules/family.smk): family -> member names; one job trains and scores each
FAMILIES = RM_FAMILIES(config)
FAMILY_MEMBERS = [m for ms in FAMILIES.values() for m in ms]
SINGLE_RMS = [r for r in RMS if r not in FAMILY_MEMBERS]  # scored by one job per (RM, benchmark)
# RMs with downstream runs (BoN scoring, PPO, GRPO); reward_models.<rm>.downstream false = benchmarks only.
DOWNSTREAM_RMS = [r for r in RMS if config["reward_models"][r].get("downstream", True)]
# A partial run (prbench.partial, docs/DESIGN.md "Partial runs"): the onerror handler's second run
# names the RMs whose jobs failed; the aggregate tables, figures and report then have rows for
# ROW_RMS only and name the MISSING ones. In a normal run MISSING is {} and ROW_RMS is RMS.
MISSING = PARTIAL.load_missing(os.environ.get(PARTIAL.ENV), RMS)
ROW_RMS = [r for r in RMS if r not in MISSING]
ROW_DOWNSTREAM_RMS = [r for r in DOWNSTREAM_RMS if r not in MISSING]
POLICIES = list(config["policies"])
DEMO = config["demo"]["enabled"]
# Downstream methods this config runs, in registry order (prbench.downstream): each stage writes
# its per-question measure table DS.table_path(method); the analysis reads exactly these.
DOWNSTREAM = DS.enabled(config)
check_confirmatory_methods(config, DOWNSTREAM)  # the verdict's declared cells name methods that run
# Methods that train one policy per RM, evaluated by the shared rule eval_policy (rules/evaluation.smk).
TRAINED_METHODS = [m for m in DOWNSTREAM if DS.REGISTRY[m].trained_policy]

# ppo.per_subset (the authors'): one PPO run per (policy, RM, subset) in results/ppo/{policy}/{rm}/{subset}/,
# trained on that subset's prompts and evaluated on its questions; false: one pooled run per (policy, RM) in
# results/ppo/{policy}/{rm}/ (every other trained-policy method is pooled).
PPO_PER_SUBSET = bool(config["ppo"]["per_subset"])


def method_rms(method):
    """The RMs a trained-policy method runs with: `<method>.rms` (null = every downstream RM), in config order."""
    chosen = (config.get(method) or {}).get("rms")
    return [r for r in ROW_DOWNSTREAM_RMS if chosen is None or r in chosen]


def method_runs(method):
    """(policy, rm, subset) of each run of a trained-policy method; subset "" = a pooled run."""
    subsets = SUBSETS if method == "ppo" and PPO_PER_SUBSET else [""]
    return [(p, r, s) for p in POLICIES for r in method_rms(method) for s in subsets]


# Replicates: bon.sample_sets sample sets per policy, ppo.seeds / grpo.seeds training seeds per
# run. Replicate 0 keeps the single-replicate paths and `seed`; replicate r > 0 lives in a subfolder
# (BoN set{r}/, trained seed{r}/) and draws its seed from stable_seed(seed, "<method>-<tag>", r).
REPLICATE_KEY = {"bon": "sample_sets", "ppo": "seeds", "grpo": "seeds"}
REPLICATE_TAG = {"bon": "bon-sample-set", "ppo": "ppo-seed", "grpo": "grpo-seed"}


def replicates(method, rm=None):
    """0..n-1 for the method's replicate key (1 when the section or key is absent); the RM of a
    trained-policy method's claim (ppo.claim, grpo.claim) gets at least claim.seeds."""
    if rm is not None:
        return list(range(DS.claim_seeds(config.get(method), rm)))
    return list(range(int((config.get(method) or {}).get(REPLICATE_KEY[method], 1))))


def claim_rm(method):
    """The RM of a trained-policy method's claim, None without one (or when the RM has no run: a partial run)."""
    rm = ((config.get(method) or {}).get("claim") or {}).get("rm")
    return rm if rm in method_rms(method) else None


def replicate_seed(method, rep):
    """The seed of replicate `rep`: `seed` itself for replicate 0 (single-replicate runs unchanged)."""
    return _replicate_seed(SEED, REPLICATE_TAG[method], rep)


def method_replicate_runs(method):
    """(policy, rm, subset, replicate) of every training of a trained-policy method: each run x seed."""
    return [(p, r, s, k) for p, r, s in method_runs(method) for k in replicates(method, r)]


def claim_runs(method):
    """(policy, rm, subset, replicate) of every training of the claim's RM (`<method>.claim`)."""
    return [run for run in method_replicate_runs(method) if run[1] == claim_rm(method)]


def claim_files(method, name):
    """The claim's runs' files called `name` (eval_judged.jsonl, train_log.csv), as claim_runs orders them."""
    return [f"{run_dir(method, *run)}/{name}" for run in claim_runs(method)]


def run_dir(method, policy, rm, subset="", rep=0):
    """The folder of one run: results/{method}/{policy}/{rm}[/{subset}][/seed{rep} for rep > 0]."""
    return Path("results", method, policy, rm, subset, f"seed{rep}" if int(rep) else "").as_posix()  # "": no part


def bon_dir(policy, rep=0):
    """The folder of one BoN sample set: results/bon/{policy}[/set{rep} for rep > 0]."""
    return Path("results", "bon", policy, f"set{rep}" if int(rep) else "").as_posix()


def judged_files(wildcards):
    """Input function: a trained-policy method's eval_judged.jsonl files, one per run and seed."""
    return [f"{run_dir(wildcards.method, *run)}/eval_judged.jsonl" for run in method_replicate_runs(wildcards.method)]


def training_runs(method):
    """[policy, run label] of each run of a method: rm, or rm/subset (ppo.per_subset)."""
    return [[p, f"{r}/{s}" if s else r] for p, r, s in method_runs(method)]


# Each stage's .smk appends its final products here; `rule all` asks for them.
ALL_TARGETS = []


wildcard_constraints:
    rm="|".join(RMS),
    bench="|".join(BENCHMARKS),
    policy="|".join(POLICIES),
    baseline="|".join(BASELINES) if BASELINES else "__none__",
    method="|".join(DOWNSTREAM) if DOWNSTREAM else "__none__",
    subset="|".join(SUBSETS),
    rep="[1-9][0-9]*",  # replicate r > 0 (replicate 0 has no path part)


def rm_entry(name):
    return config["reward_models"][name]


def rm_model_dir(name):
    """Local folder of a model trained inside the DAG, or None for external (hub/local) models."""
    entry = rm_entry(name)
    if "train" in entry:
        return f"results/models/rm/{name}"
    if "from_policy" in entry:
        return policy_model_dir(entry["from_policy"])
    if name in FAMILY_MEMBERS:
        return f"results/models/rm/{name}"
    return None


def policy_model_dir(name):
    return f"results/models/policy/{name}" if config["policies"][name].get("train") else None


# Replica world (rules/replica.smk): model refs under results/replica/models/ are built in the DAG.
REPLICA = config.get("replica") or {}
REPLICA_MODELS = REPLICA.get("models", {})
REPLICA_MODEL_DIR = "results/replica/models"


def replica_input(ref):
    """[ref] when `ref` is a replica model folder the DAG builds, else [] (hub ids, local paths)."""
    return [ref] if ref in {f"{REPLICA_MODEL_DIR}/{name}" for name in REPLICA_MODELS} else []


# the judge keys a judge replica (replica spec option judge_training) is trained under
REPLICA_JUDGE_KEYS = ["aspect_format", "system_turn"]


def judge_replica(name):
    """True when replica `name` is trained as a rubric judge (prbench.replica.judge)."""
    return "judge_training" in REPLICA_MODELS[name]


def rm_model_input(wildcards):
    """Input function: the RM's model folder when the DAG builds it (demo, replica), else nothing."""
    d = rm_model_dir(wildcards.rm)
    return [d] if d else replica_input(rm_spec(wildcards.rm).get("path", ""))


def policy_model_input(wildcards):
    d = policy_model_dir(wildcards.policy)
    return [d] if d else replica_input(config["policies"][wildcards.policy].get("path", ""))


def rm_spec(name):
    """Everything a job needs to load an RM: the config entry plus the resolved model path.
    Passed through `params:` so editing an RM's entry reruns only that RM's jobs."""
    spec = {k: v for k, v in rm_entry(name).items() if k not in RESOURCE_KEYS}
    spec["name"] = name
    d = rm_model_dir(name)
    if d:
        spec["path"] = d
    elif "from_policy" in spec:
        spec["path"] = config["policies"][spec["from_policy"]]["path"]
        spec["revision"] = config["policies"][spec["from_policy"]].get("revision")
    return canon(spec)


def canon(value):
    """A key-order-free copy of a config value: dicts rebuilt with sorted keys, recursively.
    Snakemake compares `params:` by repr, so two configs that differ only in key order give
    the same params (and rerun nothing)."""
    if isinstance(value, dict):
        return {k: canon(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [canon(v) for v in value]
    return value


def pick(section, keys):
    """The keys of a config section one job reads (absent keys left out), key-order free."""
    return canon({k: section[k] for k in keys if k in section})


# Config keys that are resource hints (params_b) or read by one job only (judge.validity_bootstrap:
# judge_validity) or choose which jobs exist (reward_models.<rm>.downstream: DOWNSTREAM_RMS;
# reward_models.<rm>.benchmark_parts: a split benchmark job's parts), never part of the model entries
# other jobs receive as params.
RESOURCE_KEYS = ("params_b", "validity_bootstrap", "downstream", "benchmark_parts")


def without_resource_keys(entry):
    return canon({k: v for k, v in entry.items() if k not in RESOURCE_KEYS})


def policy_spec(name):
    spec = {k: v for k, v in config["policies"][name].items() if k not in RESOURCE_KEYS}
    spec["name"] = name
    d = policy_model_dir(name)
    if d:
        spec["path"] = d
    return canon(spec)


# ---- resources ---------------------------------------------------------------------------
# GPUs, host memory (mem_mb), runtime (minutes) and sharding of each job come from prbench.plan.resources,
# which `python -m prbench.plan` prints too (one function, two callers): the RM jobs (score_benchmark,
# score_bon, train_ppo, train_grpo) and the judge's and the policy's (sample_bon, base_answers, judge_bon,
# judge_validity, eval_policy: RES.shared_job) from the memory plans and the cost model; the other small GPU
# jobs from the params_b rule. The demo keeps 0 GPUs, cpu_mem_mb and 30 minutes.
GPU_MEM_GB = config["resources"]["gpu_mem_gb"]
CPU_MEM_MB = config["resources"]["cpu_mem_mb"]


def gpus_for(params_b, train=False):
    """GPUs of a policy or judge job of params_b billion parameters (RES.params_rule_gpus)."""
    if DEMO:
        return 0
    return RES.params_rule_gpus(params_b, GPU_MEM_GB, train)


def threads_for(n):
    """Threads for a job: n on a GPU box or cluster, one in the demo and on the replicas (a config
    whose models the DAG builds: replica.models). Their tiny models gain little or nothing from a
    second thread (the demo policy: 397 s on 1 thread, 345 s on 2; a replica RM's benchmark scoring
    took longer on 2), so one-thread jobs side by side keep both cores busy. And one thread makes the
    demo's tables independent of the machine: Snakemake scales `threads` down to `--cores`, and the
    RM trainings' weights depend on the thread count (docs/DESIGN.md, "Threads")."""
    return 1 if DEMO or REPLICA_MODELS else n


def mem_mb_for(params_b, train=False):
    if DEMO:
        return CPU_MEM_MB
    return RES.params_rule_mem_mb(params_b, CPU_MEM_MB, train)


@functools.lru_cache(maxsize=None)
def rm_job_plan(stage, rm, bench=None):
    """The plan of one RM job: stage benchmark (score_benchmark, per benchmark) or bon (score_bon)."""
    return RES.rm_inference(config, rm, stage, bench)


@functools.lru_cache(maxsize=None)
def benchmark_parts(rm, bench):
    """How many parts the RM's job on `bench` is split into (RES.benchmark_parts: the entry's
    benchmark_parts, or resources.max_runtime_min); 1 for an RM family's members (rules/family.smk)."""
    return RES.benchmark_parts(config, rm, bench) if rm in SINGLE_RMS else 1


def benchmark_part_files(kind):
    """Input function of score_benchmark: a split job's parts (kind "pairs" or "info"; none when it
    is one job)."""
    ext = {"pairs": "pairs.jsonl", "info": "json"}[kind]

    def files(wildcards):
        n = benchmark_parts(wildcards.rm, wildcards.bench)
        return [f"results/scores/{wildcards.rm}/parts/{wildcards.bench}.{i}.{ext}" for i in range(n)] if n > 1 else []

    return files


def benchmark_model_input(wildcards):
    """score_benchmark's model: none for a split job's join (its parts load the RM)."""
    return [] if benchmark_parts(wildcards.rm, wildcards.bench) > 1 else rm_model_input(wildcards)


def _rm_plan(stage, wildcards):
    if stage == "benchmark" and benchmark_parts(wildcards.rm, wildcards.bench) > 1:
        return RES.benchmark_join(config, wildcards.rm)  # the join of a split job: no model
    if stage == "benchmark_part":
        return rm_job_plan("benchmark", wildcards.rm, wildcards.bench)  # one part's time
    return rm_job_plan(stage, wildcards.rm, wildcards.bench if stage == "benchmark" else None)


@functools.lru_cache(maxsize=None)
def shared_plan(job, policy=None, subset=None):
    """The plan of one judge or policy job (RES.shared_job): job sample_bon, base_answers, judge_bon,
    judge_validity or eval_policy (subset: a per-subset run's evaluation)."""
    return RES.shared_job(config, job, policy, subset)


def _shared(job, wc):
    return shared_plan(job, getattr(wc, "policy", None), getattr(wc, "subset", None))


@functools.lru_cache(maxsize=None)
def trained_plan(method, policy, rm, subset=None):
    """The plan of one train_ppo (per-subset run: subset) or train_grpo job."""
    if method == "ppo":
        return RES.ppo_reward(config, policy, rm, subset)
    return RES.grpo_reward(config, policy, rm)


def _trained(method, wc):
    return trained_plan(method, wc.policy, wc.rm, getattr(wc, "subset", None))


def _capped(minutes, cap):
    return minutes if cap is None else min(minutes, int(cap))


def plan_resource(plan_of, field):
    """Resource function of one job class: `field` (gpus, mem_mb or runtime) of the plan that
    plan_of(wildcards) gives; the demo's fixed values instead (no GPU, resources.cpu_mem_mb, 30 min).
    runtime: minutes, times the attempt (a job killed at its limit is resubmitted with more)."""
    if field == "runtime":
        cap = RES.max_runtime(config)  # resources.max_runtime_min: the partition's limit, a retry included
        return lambda wc, attempt: 30 if DEMO else _capped(plan_of(wc).runtime_min * attempt, cap)
    demo = {"gpus": 0, "mem_mb": CPU_MEM_MB}[field]
    return lambda wc: demo if DEMO else getattr(plan_of(wc), field)


def rm_gpus(stage):
    """The GPUs of an RM job at `stage` (benchmark: score_benchmark, benchmark_part: one part of a split
    one, bon: score_bon; 0 for CPU kinds and a split job's join)."""
    return plan_resource(functools.partial(_rm_plan, stage), "gpus")


def rm_mem_mb(stage):
    return plan_resource(functools.partial(_rm_plan, stage), "mem_mb")


def rm_runtime(stage):
    return plan_resource(functools.partial(_rm_plan, stage), "runtime")


def shared_gpus(job):
    return plan_resource(functools.partial(_shared, job), "gpus")


def shared_mem_mb(job):
    return plan_resource(functools.partial(_shared, job), "mem_mb")


def shared_runtime(job):
    return plan_resource(functools.partial(_shared, job), "runtime")


def trained_mem_mb(method):
    return plan_resource(functools.partial(_trained, method), "mem_mb")


def trained_runtime(method):
    return plan_resource(functools.partial(_trained, method), "runtime")


# ---- policies and RMs of the downstream stages (BoN, PPO, GRPO, evaluation) ---------------
# Per-run settings precomputed as dicts, looked up by the rules' lambdas.
POLICY_PATH = {p: policy_spec(p)["path"] for p in POLICIES}
POLICY_TRUST = {p: bool(config["policies"][p]["trust_remote_code"]) for p in POLICIES}
# policies.<p>.revision: a changed pin reruns exactly the jobs that load that policy. The revision lock
# (prbench.revisions) is not a param: refreshing it reruns nothing (docs/DESIGN.md, "Revision lock").
POLICY_REVISION = {p: config["policies"][p].get("revision") for p in POLICIES}


# RMs whose input is a tokenized chat read by a classifier head (prbench.rms.classifier): the ones that
# read scoring.add_special_tokens and scoring.truncation, on the benchmark and downstream.
def _reads_classifier_input(rm):
    info = kind_info(rm_entry(rm)["kind"])
    # a frozen head (an `encoder` source) reads sentence embeddings, not a tokenized classifier input
    return info.needs_model and not info.generates and "encoder" not in rm_entry(rm)


CLASSIFIER_INPUT = {r: _reads_classifier_input(r) for r in RMS}


def scoring_params(rm):
    """The `scoring` keys a score_benchmark job reads: the lengths, and for pairwise RMs the judge's
    benchmark rules (order_seed, pairwise_parse, pairwise_failure; prbench.rms.generative)."""
    keys = ["max_length", "max_tokens_per_batch"]
    if CLASSIFIER_INPUT[rm]:
        keys += ["add_special_tokens", "truncation"]
    if kind_info(rm_entry(rm)["kind"]).pairwise:
        keys += ["order_seed", "order_rule", "pairwise_parse", "pairwise_failure"]
    return pick(config["scoring"], keys)


# RM spec plus the runtime keys the benchmark scoring stage passes too (lengths, seed, no progress bars),
# as the downstream reward under the config section `reward` (prbench.rms.reward_spec: keys added only
# where `reward` departs from the benchmark spec, so each RM's params carry what its jobs read), per
# stage: DOWNSTREAM_RM_SPEC[stage][rm], stage bon, ppo or grpo (the generative prompt of the stage:
# reward.generative_prompt_bon, reward.generative_prompt_ppo for PPO and GRPO).
REWARD = config.get("reward") or {}
DOWNSTREAM_RM_SPEC = {
    stage: canon(
        {
            r: reward_spec(
                {
                    "max_length": config["scoring"]["max_length"],
                    "max_tokens_per_batch": config["scoring"]["max_tokens_per_batch"],
                    **(pick(config["scoring"], ["add_special_tokens", "truncation"]) if CLASSIFIER_INPUT[r] else {}),
                    **rm_spec(r),
                    "seed": SEED,
                    "progress": False,
                },
                REWARD,
                stage,
            )
            for r in RMS
        }
    )
    for stage in ("bon", "ppo", "grpo")
}
