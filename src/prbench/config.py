"""The config's schema and defaults: the leaf every stage imports (it imports no other prbench module).

`schemas/config.schema.yaml` is the only source of defaults: `with_defaults` / `entry_with_defaults`
fill a section from it, `validate_schema` checks a whole config against it (filling defaults), and
`ConfigError` names the offending key. The cross-key checks, which consult the registries (RM
kinds, baseline kinds, model references), are in `prbench.validation`.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import tempfile
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    with open(path, encoding="utf-8") as fh:  # libyaml's safe loader where PyYAML has it: ~8x the pure one
        return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@contextlib.contextmanager
def schema_as_json(path: str | Path = SCHEMA_PATH):
    """The YAML schema at `path` as a temporary JSON file (its path; removed on exit), for
    `snakemake.utils.validate`: that reads a schema file through yte's YAML processing, about 0.25 CPU-s
    for this schema on every parse of the workflow (each run, dry run and cluster job), and JSON in
    milliseconds. The same document either way; the YAML stays the one source."""
    fd, tmp = tempfile.mkstemp(prefix="prbench-schema-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(load_schema(path), fh)
        yield tmp
    finally:
        os.unlink(tmp)


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
    _first_error(_section_validator(path), out, path)
    return out


@functools.lru_cache(maxsize=None)
def _section_validator(path: str):
    """One validator per section (building one costs more than validating: the Snakefile's
    cross-key checks call with_defaults for several sections)."""
    return _validator_with_defaults(section_schema(path))


def entry_with_defaults(entry: dict, path: str) -> dict:
    """`entry` with the schema's top-level defaults of `path` added, unvalidated: for job specs
    that carry extra keys beside a config entry (an RM spec's name and resolved path)."""
    props = section_schema(path).get("properties", {})
    return {**{k: copy.deepcopy(v["default"]) for k, v in props.items() if "default" in v}, **entry}


def validate_schema(config: dict, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """Validate `config` against the schema in place, filling its defaults; ConfigError names the key."""
    _first_error(_validator_with_defaults(load_schema(schema_path)), config)
    return config
