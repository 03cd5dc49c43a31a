"""Cross-key config checks: what the JSON schema cannot express, consulting the registries (RM kinds
in `prbench.rms.KINDS`, baseline kinds in `prbench.data.baselines.KINDS`, model references).

The Snakefile calls snakemake.utils.validate with the schema and then `check_config`, so a bad
config stops the run before any job starts, with a message naming the key. `load_config` and
`validate_config` do both for library callers. The schema itself and its defaults are the leaf
module `prbench.config`.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from .config import SCHEMA_PATH, ConfigError, entry_with_defaults, validate_schema, with_defaults
from .data.baselines import ITEM_KINDS
from .data.baselines import kind_info as baseline_kind
from .data.demo_world import DEMO_PREFIX
from .manifest import config_refs
from .models import check_model_ref as _check_model_ref
from .revisions import check_revision_value, is_hub
from .rms import kind_info, reward_spec
from .rms.family import GRID_KEYS, expand_families


def check_model_ref(ref: str, key: str) -> None:
    try:
        _check_model_ref(ref, key)
    except (ValueError, FileNotFoundError) as exc:
        msg = str(exc)
        raise ConfigError(msg if key in msg else f"config key {key}: {msg}") from None


def _registered(lookup, kind, name):
    """A registry entry for `kind`; the registry's ValueError (naming the key) as a ConfigError."""
    try:
        return lookup(kind, name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def validate_config(config: dict, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """Validate in place (filling defaults) and run the cross-key checks; returns config."""
    validate_schema(config, schema_path)
    check_config(config)
    return config


DEMO_BASELINE_KINDS = ("rewardbench", "rewardbench2")  # the schemas prbench.data.demo_world writes


def _check_sections(config: dict) -> None:
    """Cross-key checks within the data, demo and demo_training sections."""
    baselines = with_defaults(config["data"], "data")["baselines"]
    if "personalized" in baselines:
        raise ConfigError("config key data.baselines.personalized: the name 'personalized' is reserved")
    for name, b in baselines.items():
        _registered(baseline_kind, b["kind"], name)
        if b["source"].startswith(DEMO_PREFIX) and b["kind"] not in DEMO_BASELINE_KINDS:
            raise ConfigError(f"config key data.baselines.{name}.kind: the demo world only generates "
                              f"RewardBench- and RewardBench 2-schema baselines (got {b['kind']!r})")
        if b["kind"] in ITEM_KINDS and b.get("train_split"):
            raise ConfigError(f"config key data.baselines.{name}.train_split: a {b['kind']} baseline holds "
                              "best-of-n items, not training pairs; use null")
    pol = with_defaults(config.get("demo_training"), "demo_training")["policy"]
    if pol["hidden_size"] % pol["heads"]:
        raise ConfigError(f"config key demo_training.policy.heads: {pol['heads']} must divide "
                          f"hidden_size {pol['hidden_size']}")
    for name, entry in config["reward_models"].items():
        if "train" in entry and entry["kind"] != "classifier":
            raise ConfigError(f"config key reward_models.{name}.kind: trained demo RMs must be 'classifier'")


def _check_prompts(config: dict) -> None:
    """`prompts.remote.files`: paths inside the repository. Reads the mapping only, never a file."""
    from .prompt_source import remote_files

    try:
        remote_files(config.get("prompts"))
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _check_reward(config: dict) -> None:
    """`reward.generative: pointwise` with a generating RM needs the 0-1 scoring prompt (reward_user)
    in the configured template set: refused here, before any job starts, not in the first BoN job."""
    reward = with_defaults(config.get("reward"), "reward")
    generating = [n for n, e in config["reward_models"].items() if _registered(kind_info, e["kind"], n).generates]
    if reward["generative"] != "pointwise" or not generating:
        return
    from .prompt_source import remote_files
    from .prompts import load_templates

    try:  # the folder only: validation never fetches (a role mapped by prompts.remote is read by the jobs)
        tpl = load_templates(config.get("prompts"), remote=False)
        mapped = remote_files(config.get("prompts"))
    except (FileNotFoundError, ValueError):
        return  # the template set's own error is raised by the jobs that read it, naming its key
    if tpl.get("reward_user") is None and "reward_user" not in mapped:
        raise ConfigError(f"config key reward.generative: pointwise needs the 0-1 scoring prompt reward_user.txt, "
                          f"absent from prompts.templates {tpl.origin!r} (RMs {generating}; name the file with "
                          "prompts.files.reward_user, or use reward.generative: round_robin)")


# Keys of an RM entry that never change what its downstream reward computes: bookkeeping, resource
# hints and placement, and the prefix cache (the same scores up to float rounding, rms/prefix.py).
_NOT_REWARD_KEYS = frozenset({"name", "downstream", "params_b", "device", "prefix_cache"})
# The model source: compared as one resolved model (`_rm_model`), not key by key.
_SOURCE_KEYS = frozenset({"path", "revision", "train", "from_policy"})
# Keys a kind never reads when it scores downstream (the classifier-only adapter, the generative
# reply budget and pairwise tournament, the length RM's unit).
_GENERATIVE_ONLY = frozenset({"both_orders", "max_new_tokens", "score_opponents", "reference_answer"})
_UNREAD_BY_KIND = {
    "classifier": _GENERATIVE_ONLY | {"length_unit"},
    "generative_pairwise": frozenset({"adapter", "length_unit"}),
    "generative_pointwise": frozenset({"adapter", "length_unit", "both_orders", "score_opponents",
                                       "reference_answer"}),
}


def _rm_model(entry: dict, policies: dict) -> tuple:
    """The model an RM entry scores with: a hub id or folder at a revision (a `from_policy` entry
    resolves to its policy's), or a demo RM by its training spec (mix without zero shares, base,
    revision, and the input it is trained on: use_profile, top_k; its name only reseeds which pairs
    are drawn)."""
    if "train" in entry:
        t = entry["train"]
        mix = tuple(sorted((k, float(v)) for k, v in (t.get("mix") or {}).items() if float(v) > 0))
        return ("trained", mix, t["base"], t.get("revision"), bool(entry.get("use_profile")), entry.get("top_k"))
    if "from_policy" in entry:
        pol = policies.get(entry["from_policy"], {})
        if "path" in pol:
            return ("model", pol["path"], pol.get("revision"))
        return ("trained policy", entry["from_policy"])
    if "path" in entry:
        return ("model", entry["path"], entry.get("revision"))
    if "encoder" in entry:  # a frozen_head member: its training spec (its name reseeds the pairs drawn)
        return ("frozen head", entry["encoder"], entry.get("family"), entry.get("profile_posts"),
                entry.get("personalized_share"), entry.get("train_pairs"), entry.get("label_noise"))
    return ("no model",)


def downstream_reward(name: str, entry: dict, config: dict) -> tuple[tuple, dict]:
    """What an RM entry's downstream reward (BoN scores, PPO and GRPO rewards) computes: (its model,
    `_rm_model`; the keys that decide its input and scoring). The keys are those of the spec the
    stages load (`prbench.rms.reward_spec` under the config's `reward` section: `profile: always`
    shows every classifier the profile, so `use_profile` no longer tells two of them apart;
    `generative: pointwise` scores every generative kind alone on 0-1, so the pairwise/pointwise kind,
    its benchmark reply budget and tournament keys drop out), without the keys no stage reads for the
    kind. Two entries with equal values give the same reward, seed for seed: the stages' seeds come
    from the config seed, not the entry's name."""
    spec = reward_spec({**entry_with_defaults(entry, "reward_models.*"), "name": name}, config.get("reward"))
    model = _rm_model(spec if "train" not in entry else {**spec, "use_profile": entry.get("use_profile")},
                      config.get("policies") or {})
    kind = spec["kind"]
    if kind == "length":
        return model, {"kind": kind, "length_unit": spec.get("length_unit")}
    unread = set(_UNREAD_BY_KIND.get(kind, ()))
    if spec.get("reward_generative") == "pointwise":
        unread |= _GENERATIVE_ONLY | {"adapter"}
        spec["kind"] = "generative (reward.generative: pointwise)"
    drop = _NOT_REWARD_KEYS | _SOURCE_KEYS | unread
    return model, {k: v for k, v in spec.items() if k not in drop}


def _why_same(a: dict, b: dict, config: dict) -> str:
    """Why two entries with different config text give one downstream reward."""
    reward = with_defaults(config.get("reward"), "reward")
    a, b = entry_with_defaults(a, "reward_models.*"), entry_with_defaults(b, "reward_models.*")
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and k not in {"params_b", "downstream"})
    if not differ:
        return "their entries are the same"
    reasons = []
    if reward["profile"] == "always" and "use_profile" in differ:
        reasons.append("reward.profile: always shows every classifier RM the profile downstream")
    if reward["generative"] == "pointwise" and set(differ) & (_GENERATIVE_ONLY | {"kind"}):
        reasons.append("reward.generative: pointwise scores every generative RM alone on a 0-1 scale with "
                       "reward.generative_max_new_tokens, whatever its kind")
    if set(differ) & _NOT_REWARD_KEYS:
        reasons.append(f"{sorted(set(differ) & _NOT_REWARD_KEYS)} place or batch the model, not the score")
    if set(differ) & {"path", "from_policy", "train"}:
        reasons.append("both resolve to the same model")
    if not reasons:
        reasons.append("no downstream stage reads those keys for this kind")
    return f"their entries differ only in {differ}, and " + "; ".join(reasons)


def _check_downstream_unique(config: dict) -> None:
    """No RM counted twice downstream: two entries that take part downstream (`downstream` not false)
    with the same downstream reward (`downstream_reward`) would give the same BoN scores and the same
    PPO and GRPO runs (the same seeds), and every downstream correlation would count one RM twice."""
    seen: dict = {}
    for name, entry in config["reward_models"].items():
        if entry.get("downstream") is False:
            continue
        model, keys = downstream_reward(name, entry, config)
        ident = repr((model, sorted(keys.items(), key=lambda kv: kv[0])))
        if ident in seen:
            first = seen[ident]
            raise ConfigError(
                f"config key reward_models.{name}: the same downstream reward as reward_models.{first} "
                f"({_why_same(config['reward_models'][first], entry, config)}); BoN, PPO and GRPO would count "
                f"one RM twice in every downstream correlation. Set `downstream: false` on one of them (it "
                "stays on the benchmarks)")
        seen[ident] = name


def _check_revisions(config: dict) -> None:
    """A `revision` names a hub commit, branch or tag, and only on an entry whose model or dataset is
    a hub id: a local folder, `pkg:` model or a folder the workflow builds is its own pin."""
    def orphans(node, key):  # a revision on an entry that names no model or dataset (train, from_policy)
        if isinstance(node, dict):
            if node.get("revision") is not None and not any(isinstance(node.get(k), str)
                                                            for k in ("path", "model", "base", "source")):
                raise ConfigError(f"config key {key}.revision: the entry names no hub model or dataset "
                                  "(path, model, base or source) to pin; remove it")
            for k, v in node.items():
                orphans(v, f"{key}.{k}" if key else str(k))

    orphans(config, "")
    for key, ref in config_refs(config).items():
        if ref["revision"] is None:
            continue
        rev_key = key.rsplit(".", 1)[0] + ".revision"
        try:
            check_revision_value(ref["revision"], rev_key)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not is_hub(ref["ref"]):
            raise ConfigError(f"config key {rev_key}: {key} = {ref['ref']!r} is a local folder or package model, "
                              "which has no hub revision; remove the revision (the folder is the pin)")


def _check_confirmatory(config: dict, methods: list[str] | None = None) -> None:
    """Each declared verdict cell names a configured baseline (and policy) and, given the methods
    this config runs (`prbench.downstream.enabled`; rules/common.smk passes them), one of those."""
    cells = (config.get("correlation") or {}).get("confirmatory")
    if cells is None:
        return
    if not cells:
        raise ConfigError("config key correlation.confirmatory: an empty family decides nothing; "
                          "use null for the default (every method's headline measure against every baseline)")
    baselines = list((config["data"].get("baselines") or {}))
    policies = list(config.get("policies") or {})
    for i, cell in enumerate(cells):
        key = f"correlation.confirmatory[{i}]"
        if methods is not None and cell["downstream"] not in methods:
            raise ConfigError(f"config key {key}.downstream: {cell['downstream']!r} is not a method this config runs "
                              f"({methods})")
        if cell["baseline"] not in baselines:
            raise ConfigError(f"config key {key}.baseline: {cell['baseline']!r} is not in data.baselines ({baselines})")
        if cell.get("policy") is not None and cell["policy"] not in policies:
            raise ConfigError(f"config key {key}.policy: {cell['policy']!r} is not in policies ({policies})")


def check_confirmatory_methods(config: dict, methods: list[str]) -> None:
    _check_confirmatory(config, methods)


def _check_frozen_encoder(key: str, entry: dict, info) -> None:
    """`encoder` is the model source of a frozen-encoder kind (frozen_head) and of no other; such an RM is
    a member of a family (its entry expanded from a `grid`)."""
    if ("encoder" in entry) != info.frozen_encoder:
        raise ConfigError(f"config key {key}: `encoder` is the source of a frozen-encoder kind and only of one "
                          f"(kind {entry['kind']!r})")
    member_keys = [k for k in ("family", *GRID_KEYS) if k in entry]
    if member_keys and not info.frozen_encoder:
        raise ConfigError(f"config key {key}: {', '.join(member_keys)} are an RM family member's keys (kind "
                          f"{entry['kind']!r} has no family)")
    if info.frozen_encoder and len(member_keys) != 1 + len(GRID_KEYS):
        raise ConfigError(f"config key {key}: a {entry['kind']} RM is a member of a family: give the entry a `grid` "
                          f"(an expanded member has family, {', '.join(GRID_KEYS)}; found {member_keys or 'none'})")


def _check_method_rms(config: dict) -> None:
    """ppo.rms / grpo.rms name downstream RMs of the config; a claim (ppo.claim, grpo.claim) names one of the
    method's RMs."""
    downstream = [n for n, e in config["reward_models"].items()
                  if entry_with_defaults(e, "reward_models.*")["downstream"]]
    for method in ("ppo", "grpo"):
        names = (config.get(method) or {}).get("rms")
        for name in names or []:
            if name not in downstream:
                raise ConfigError(f"config key {method}.rms: {name!r} is not a downstream RM of reward_models "
                                  f"(known: {', '.join(downstream)})")
        claim = (config.get(method) or {}).get("claim")
        # a claim of a method that does not run decides nothing
        if claim and with_defaults(config.get(method) or {}, method)["enabled"]:
            runs = [n for n in downstream if names is None or n in names]
            if claim["rm"] not in runs:
                raise ConfigError(f"config key {method}.claim.rm: {claim['rm']!r} is not one of the RMs {method} "
                                  f"trains with (known: {', '.join(runs)}; {method}.rms)")


def _check_rm_entries(config: dict, policies: dict) -> None:
    """Each reward_models entry: its model source (one, of a kind that needs one), its references,
    and the profile only where its kind can read one."""
    judges = with_defaults((config.get("demo_training") or {}).get("policy") or {},
                           "demo_training.policy")["judge_examples"]
    for name, entry in config["reward_models"].items():
        key = f"reward_models.{name}"
        if "path" in entry:
            check_model_ref(entry["path"], f"{key}.path")
        if "train" in entry:
            check_model_ref(entry["train"]["base"], f"{key}.train.base")
        if "encoder" in entry:
            check_model_ref(entry["encoder"], f"{key}.encoder")
        if "from_policy" in entry and entry["from_policy"] not in policies:
            raise ConfigError(
                f"config key {key}.from_policy: no policy named {entry['from_policy']!r} "
                f"(known: {sorted(policies)})"
            )
        if "from_policy" in entry and (policies[entry["from_policy"]] or {}).get("train") and not judges:
            raise ConfigError(
                f"config key demo_training.policy.judge_examples: false, but {key}.from_policy judges with the "
                f"trained policy {entry['from_policy']!r}, which then never learns to judge; set it true"
            )
        info = _registered(kind_info, entry["kind"], name)
        if not info.can_read_profile and entry.get("use_profile"):
            raise ConfigError(f"config key {key}.use_profile: a {entry['kind']} RM never reads the profile")
        sources = [k for k in ("path", "train", "from_policy", "encoder") if k in entry]
        if info.needs_model and len(sources) != 1:
            raise ConfigError(f"config key {key}: RM kind {entry['kind']!r} needs exactly one model source "
                              f"(path, train, from_policy or encoder); found {sources or 'none'}")
        _check_frozen_encoder(key, entry, info)


def check_config(config: dict) -> None:
    """Checks a JSON schema cannot express. Raises ConfigError naming the key. The sections read
    with defaults are filled here (with_defaults), so an unvalidated config is checked alike. RM families
    (entries with a `grid`) are expanded into their members first, in place (prbench.rms.family)."""
    try:
        expand_families(config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _check_sections(config)
    _check_method_rms(config)
    _check_confirmatory(config)
    bon = config["bon"]
    for k in bon["ks"]:
        if k > bon["n"]:
            raise ConfigError(f"config key bon.ks: k={k} is larger than bon.n={bon['n']}")
    ppo = with_defaults(config["ppo"], "ppo")
    if ppo["mini_batch_size"] > ppo["batch_size"]:
        raise ConfigError("config key ppo.mini_batch_size: larger than ppo.batch_size")
    if ppo["batch_size"] % ppo["mini_batch_size"]:
        raise ConfigError("config key ppo.mini_batch_size: must divide ppo.batch_size")
    if ppo["eval_greedy"] and ppo["eval_samples"] > 1:
        raise ConfigError(f"config key ppo.eval_samples: {ppo['eval_samples']} answers per question, but "
                          "ppo.eval_greedy is true (greedy decoding gives one answer); set eval_greedy: false")
    top_k = config["retriever"]["top_k"]
    if ppo["eval_posts"] is not None and ppo["eval_posts"] > top_k:
        raise ConfigError(f"config key ppo.eval_posts: {ppo['eval_posts']} posts, but the prompts hold only "
                          f"retriever.top_k = {top_k}")
    policies = config["policies"]
    _check_rm_entries(config, policies)
    _check_prompts(config)
    _check_reward(config)
    _check_downstream_unique(config)
    _check_revisions(config)
    for name, entry in policies.items():
        if "path" in entry:
            check_model_ref(entry["path"], f"policies.{name}.path")
        elif not entry.get("train"):
            raise ConfigError(f"config key policies.{name}: a policy needs a path unless train is true")
    check_model_ref(config["retriever"]["model"], "retriever.model")
    if config["judge"]["backend"] == "minilm":
        check_model_ref(config["judge"]["model"], "judge.model")
    judge = with_defaults(config["judge"], "judge")
    if judge.get("aggregate") == "mean_found" and judge.get("aspect_format") != "joined":
        raise ConfigError("config key judge.aggregate: mean_found needs judge.aspect_format: joined (a numbered "
                          "reply names the aspect numbers, which mean_found would average)")
    _check_general_reference(config, judge)
    if not with_defaults(config.get("demo"), "demo")["enabled"]:
        for name, entry in config["reward_models"].items():
            if "train" in entry:
                raise ConfigError(f"config key reward_models.{name}.train: only allowed with demo.enabled: true")
        for name, entry in policies.items():
            if entry.get("train"):
                raise ConfigError(f"config key policies.{name}.train: only allowed with demo.enabled: true")


def _check_general_reference(config: dict, judge: dict) -> None:
    """judge.general_reference names a baseline with a train split, under the minilm judge."""
    ref = judge.get("general_reference")
    if ref is None:
        return
    key = "config key judge.general_reference"
    if judge["backend"] != "minilm":
        raise ConfigError(f"{key}: only the minilm judge rates general quality (judge.backend is {judge['backend']!r})")
    baselines = config["data"].get("baselines") or {}
    if ref not in baselines:
        raise ConfigError(f"{key}: {ref!r} is not a data.baselines entry (known: {sorted(baselines)})")
    b = baselines[ref]
    if not b.get("train_split"):
        raise ConfigError(f"{key}: baseline {ref!r} needs a train_split (data.baselines.{ref}.train_split): the "
                          "judge's references and thresholds come from its train pairs (rules/judge.smk: a local one)")


def load_config(path: str | Path) -> dict:
    path = Path(path)
    with open(path, encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: config must be a mapping")
    try:
        return validate_config(cfg)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
