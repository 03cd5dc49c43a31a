"""Config loading and validation: JSON schema (with defaults) plus cross-key checks.

The Snakefile calls snakemake.utils.validate with the same schema and then `check_config`,
so a bad config stops the run before any job starts, with a message naming the key.
"""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from .models import check_model_ref as _check_model_ref
from .rms import kind_info

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


def check_model_ref(ref: str, key: str) -> None:
    try:
        _check_model_ref(ref, key)
    except (ValueError, FileNotFoundError) as exc:
        msg = str(exc)
        raise ConfigError(msg if key in msg else f"config key {key}: {msg}") from None


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _validator_with_defaults(schema: dict):
    import jsonschema

    base = jsonschema.Draft202012Validator

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])  # never alias the schema's own object
        yield from base.VALIDATORS["properties"](validator, properties, instance, schema)

    cls = jsonschema.validators.extend(base, {"properties": set_defaults})
    return cls(schema)


def _first_error(validator, instance, prefix: str = "") -> None:
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        key = ".".join([prefix] * bool(prefix) + [str(p) for p in err.absolute_path]) or "<top level>"
        raise ConfigError(f"config key {key}: {err.message}")


@functools.lru_cache(maxsize=None)
def _cached_schema() -> dict:
    return load_schema()


def section_schema(path: str) -> dict:
    """The schema of one config section, by dotted path ("demo_training.policy"; a name under a
    mapping of entries, e.g. "reward_models.x" or "reward_models.*", gives the entry schema)."""
    root = _cached_schema()
    node = root
    for part in path.split("."):
        props = node.get("properties", {})
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            raise KeyError(f"no config section {path!r} in the schema")
    return {"definitions": root.get("definitions", {}), **node}


def with_defaults(section: dict | None, path: str) -> dict:
    """A validated copy of one config section with the schema's defaults filled in: the schema is
    the only source of defaults, so code reads section[key]. Sections of a validated config are
    already complete (a no-op there); this serves callers that pass a partial section (tests, the
    stage functions' direct callers). Raises ConfigError naming the key."""
    out = copy.deepcopy(section) if section is not None else {}
    _first_error(_validator_with_defaults(section_schema(path)), out, path)
    return out


def entry_with_defaults(entry: dict, path: str) -> dict:
    """`entry` with the schema's top-level defaults of `path` added, unvalidated: for job specs
    that carry extra keys beside a config entry (an RM spec's name and resolved path)."""
    props = section_schema(path).get("properties", {})
    return {**{k: copy.deepcopy(v["default"]) for k, v in props.items() if "default" in v}, **entry}


def validate_config(config: dict, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """Validate in place (filling defaults) and run the cross-key checks; returns config."""
    _first_error(_validator_with_defaults(load_schema(schema_path)), config)
    check_config(config)
    return config


def _check_sections(config: dict) -> None:
    """Cross-key checks within the data, demo and demo_training sections."""
    from .data.demo_world import DEMO_PREFIX

    baselines = with_defaults(config["data"], "data")["baselines"]
    if "personalized" in baselines:
        raise ConfigError("config key data.baselines.personalized: the name 'personalized' is reserved")
    for name, b in baselines.items():
        if b["source"].startswith(DEMO_PREFIX) and b["kind"] != "rewardbench":
            raise ConfigError(f"config key data.baselines.{name}.kind: the demo world only generates "
                              f"RewardBench-schema baselines (got {b['kind']!r})")
    pol = with_defaults(config.get("demo_training"), "demo_training")["policy"]
    if pol["hidden_size"] % pol["heads"]:
        raise ConfigError(f"config key demo_training.policy.heads: {pol['heads']} must divide "
                          f"hidden_size {pol['hidden_size']}")
    for name, entry in config["reward_models"].items():
        if "train" in entry and entry["kind"] != "classifier":
            raise ConfigError(f"config key reward_models.{name}.kind: trained demo RMs must be 'classifier'")


def check_config(config: dict) -> None:
    """Checks a JSON schema cannot express. Raises ConfigError naming the key. The sections read
    with defaults are filled here (with_defaults), so an unvalidated config is checked alike."""
    _check_sections(config)
    bon = config["bon"]
    for k in bon["ks"]:
        if k > bon["n"]:
            raise ConfigError(f"config key bon.ks: k={k} is larger than bon.n={bon['n']}")
    ppo = with_defaults(config["ppo"], "ppo")
    if ppo["mini_batch_size"] > ppo["batch_size"]:
        raise ConfigError("config key ppo.mini_batch_size: larger than ppo.batch_size")
    if ppo["batch_size"] % ppo["mini_batch_size"]:
        raise ConfigError("config key ppo.mini_batch_size: must divide ppo.batch_size")
    policies = config["policies"]
    for name, entry in config["reward_models"].items():
        key = f"reward_models.{name}"
        if "path" in entry:
            check_model_ref(entry["path"], f"{key}.path")
        if "train" in entry:
            check_model_ref(entry["train"]["base"], f"{key}.train.base")
        if "from_policy" in entry and entry["from_policy"] not in policies:
            raise ConfigError(
                f"config key {key}.from_policy: no policy named {entry['from_policy']!r} "
                f"(known: {sorted(policies)})"
            )
        info = kind_info(entry["kind"], name)
        if not info.can_read_profile and entry.get("use_profile"):
            raise ConfigError(f"config key {key}.use_profile: a {entry['kind']} RM never reads the profile")
        sources = [k for k in ("path", "train", "from_policy") if k in entry]
        if info.needs_model and len(sources) != 1:
            raise ConfigError(f"config key {key}: RM kind {entry['kind']!r} needs exactly one model source "
                              f"(path, train or from_policy); found {sources or 'none'}")
    for name, entry in policies.items():
        if "path" in entry:
            check_model_ref(entry["path"], f"policies.{name}.path")
    check_model_ref(config["retriever"]["model"], "retriever.model")
    if config["judge"]["backend"] == "minilm":
        check_model_ref(config["judge"]["model"], "judge.model")
    if not with_defaults(config.get("demo"), "demo")["enabled"]:
        for name, entry in config["reward_models"].items():
            if "train" in entry:
                raise ConfigError(f"config key reward_models.{name}.train: only allowed with demo.enabled: true")
        for name, entry in policies.items():
            if entry.get("train"):
                raise ConfigError(f"config key policies.{name}.train: only allowed with demo.enabled: true")


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
