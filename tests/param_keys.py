"""Which jobs each config key reaches: the leaf keys of the schema under one config, a schema-valid
edit of each, and the rules whose job params change under that edit (tests/test_param_keys.py).

A job's params are what Snakemake records and compares (`--rerun-triggers params`): the sorted
reprs of `job.non_derived_params` (`Persistence._params`). Each DAG (the base config and every
edit) is built in this one process through Snakemake's Python API, with every job forced, so no
file needs to exist; a job is identified by its rule and outputs. An edit reaches a rule when one
of the rule's jobs has other params, or the edit adds or removes one of its jobs.

Regenerate the committed map with `PRB_UPDATE_PARAM_MAP=1 pytest tests/test_param_keys.py`.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import io
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from helpers import REPO, SNAKEFILE

# The configs whose maps tests/test_param_keys.py checks (and perf/bench_param_map.py times)
CONFIGS = {"demo": "configs/demo.yaml", "replica": "configs/replica.yaml", "paper": "config.yaml"}
SCHEMA = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())
MISSING = object()
# Where a string is a model or data reference (checked by prbench.validation.check_model_ref): an
# edit points it at another folder under results/, which needs no existence check.
REF_KEYS = {"source", "model", "path", "base", "encoder"}


def _resolve(node: dict) -> dict:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = {**SCHEMA["definitions"][name], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _types(node: dict) -> list[str]:
    t = node.get("type", [])
    return [t] if isinstance(t, str) else list(t)


def _is_section(node: dict) -> bool:
    return "object" in _types(node) and ("properties" in node or isinstance(node.get("additionalProperties"), dict))


@dataclass(frozen=True)
class Leaf:
    path: tuple[str, ...]  # config keys from the top, entry names included
    schema: dict
    value: Any  # the config's value, else the schema default, else MISSING

    @property
    def key(self) -> str:
        return ".".join(self.path)


def leaves(config: dict, node: dict = SCHEMA, path: tuple[str, ...] = ()) -> Iterator[Leaf]:
    """Every leaf key of the schema under `config`: each property (present, or only a schema default,
    or absent without one), the keys inside every entry of a mapping of entries (reward_models,
    policies, data.baselines, replica.models, train.mix, prompts.files), recursing into sections."""
    node = _resolve(node)
    if "properties" in node:
        for name, sub in node["properties"].items():
            sub = _resolve(sub)
            value = config.get(name, sub.get("default", MISSING)) if isinstance(config, dict) else MISSING
            if _is_section(sub) and isinstance(value, dict):
                yield from leaves(value, sub, (*path, name))
            elif not _is_section(sub):  # a section the config leaves out (replica, grpo) has no keys here
                yield Leaf((*path, name), sub, value)
    elif isinstance(node.get("additionalProperties"), dict) and isinstance(config, dict):
        if not config and path:  # a mapping of entries with none (train.mix {}, prompts.files {}): the edit adds one
            yield Leaf(path, node, config)
            return
        sub = _resolve(node["additionalProperties"])
        for name, value in config.items():
            if _is_section(sub) and isinstance(value, dict):
                yield from leaves(value, sub, (*path, name))
            else:
                yield Leaf((*path, name), sub, value)


def _numbers(v: float, node: dict, integer: bool) -> list:
    """Changed numbers within the schema's bounds, nearest first (a cross-key check may refuse some:
    ppo.batch_size must stay a multiple of ppo.mini_batch_size)."""
    lo, hi = node.get("minimum"), node.get("maximum")
    xlo, xhi = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")

    def ok(x):
        return ((lo is None or x >= lo) and (hi is None or x <= hi) and (xlo is None or x > xlo)
                and (xhi is None or x < xhi) and x != v)

    cands = [v + 1, v - 1, v * 2, v / 2] if integer else [v * 2, v / 2, v + 1, v - 1, v + 0.25, v - 0.25]
    out = []
    for x in cands:
        x = int(x) if integer else float(x)
        if ok(x) and x not in out:
            out.append(x)
    if not out:
        raise ValueError(f"no valid edit of {v} under {node}")
    return out


# RMs the shipped configs train with (the first one a config has is the edit's): another RM for an
# RM-naming key (a claim's RM, a method's RM list)
SHIPPED_RMS = ("length_only", "pers_profile", "general_only")


def _strings(leaf: Leaf, v: str | None) -> list[str]:
    """Other strings the key's readers accept: another registered kind, another policy, a model or
    data reference moved under results/ (no existence check there), else the value with a suffix."""
    name, parent = leaf.path[-1], leaf.path[:1]
    if name == "kind" and parent == ("reward_models",):
        from prbench.rms import KINDS
        return [k for k in KINDS if k != v]
    if name == "kind":
        from prbench.data.baselines import KINDS as BASELINE_KINDS
        return [k for k in BASELINE_KINDS if k != v]
    if name == "from_policy":
        return [f"{v}_edited"]  # valid only when the config has a second policy
    if name == "rm" and leaf.path[-2:-1] == ("claim",):  # another RM the method trains with (the first valid)
        return [r for r in SHIPPED_RMS if r != v]
    if leaf.key == "judge.general_reference":  # a baseline name: one the shipped configs have
        return [b for b in ("general", "rewardbench") if b != v]
    if name in REF_KEYS and v and "/" in v and not v.startswith(("results/", "/", ".", "~")):
        return [f"{v}-edited"]  # a hub id: another hub id (nothing is downloaded to build a DAG)
    if name in REF_KEYS or leaf.path[-2:-1] == ("files",):
        return [f"results/edited/{name}"]
    if name == "templates":
        return [t for t in ("default", "compact") if t != v]
    if leaf.path[-2:] == ("remote", "commit"):  # a full 40-hex commit (schema pattern)
        return [c for c in ("e" * 40, "f" * 40) if c != v]
    if leaf.path[-2:] == ("remote", "repo"):  # owner/name (schema pattern)
        return [f"{v}-edited" if v else "owner/edited"]
    return [f"{v} edited" if v else "edited"]


def _fresh(leaf: Leaf) -> list:
    """Valid non-null values for a key that is null or absent, nearest first."""
    node = leaf.schema
    if "enum" in node:
        return list(node["enum"])
    types = [t for t in _types(node) if t != "null"]
    if types[:1] == ["integer"]:  # small first; larger ones for keys a memory plan refuses small
        m = max(node.get("minimum", 1), 1)
        return [x for x in (m, m + 1, m + 2, m + 3, m + 7) if node.get("maximum") is None or x <= node["maximum"]]
    if types[:1] == ["number"]:
        return [1.0, *_numbers(1.0, node, integer=False)]
    if types[:1] == ["boolean"]:
        return [True]
    if types[:1] == ["string"] or not types:
        return _strings(leaf, None)
    if types[:1] == ["array"] and leaf.key == "correlation.confirmatory":  # cells: one per shipped baseline name
        return [[{"downstream": "bon", "baseline": b}] for b in ("general", "rewardbench")]
    if types[:1] == ["array"]:
        return [["edited"]]
    raise ValueError(f"no fresh value for {leaf.key} ({node})")


def edits(leaf: Leaf) -> list[tuple[str, list]]:
    """Schema-valid edits of one leaf: (label, candidate values; the first valid one is used). An
    enum gets another member, a number a changed valid number, a boolean its negation, a list one
    item fewer (or more), a nullable key null and (when null or absent) a value."""
    node, v = leaf.schema, leaf.value
    if v is MISSING or v is None:
        return [("value", _fresh(leaf))]
    out: list[tuple[str, list]] = []
    if "null" in _types(node):
        out.append(("null", [None]))
    if "enum" in node:
        out.append(("value", [e for e in node["enum"] if e != v]))
    elif isinstance(v, bool):
        out.append(("value", [not v]))
    elif isinstance(v, int):
        out.append(("value", _numbers(v, node, integer=True)))
    elif isinstance(v, float):
        out.append(("value", _numbers(v, node, integer=False)))
    elif isinstance(v, str):
        out.append(("value", _strings(leaf, v)))
    elif isinstance(v, list):
        item = _resolve(node.get("items", {}))
        if "integer" in _types(item):
            longer = v + [max(v) + 1]
        elif "number" in _types(item):  # a number within the item's bounds not in the list yet
            lo, hi = item.get("minimum", float("-inf")), item.get("maximum", float("inf"))
            extra = [x for x in (max(v) / 2, (min(v) + max(v)) / 2, min(v) + 0.1, max(v) - 0.1)
                     if lo <= x <= hi and x not in v]
            longer = v + extra[:1]
        elif "enum" in item:  # an enum member not in the list yet
            longer = v + [e for e in item["enum"] if e not in v][:1]
        elif leaf.path[-1] == "rms":  # ppo.rms / grpo.rms: another RM of the shipped configs, not in the list yet
            longer = v + [r for r in SHIPPED_RMS if r not in v][:1]
        else:
            longer = v + ["edited"]
        out.append(("value", [v[:-1], longer] if len(v) > 1 else [longer]))
    elif isinstance(v, dict) and not v:  # an empty mapping of entries: one entry added
        names = _resolve(node.get("propertyNames", {})).get("enum") or ["edited"]
        entry = Leaf((*leaf.path, names[0]), _resolve(node["additionalProperties"]), MISSING)
        out.append(("value", [{n: x} for n in names[:1] for x in _fresh(entry)]))
    else:
        raise ValueError(f"no edit for {leaf.key} = {v!r}")
    return out


def set_key(config: dict, path: tuple[str, ...], value: Any) -> dict:
    cfg = copy.deepcopy(config)
    node = cfg
    for name in path[:-1]:
        node = node.setdefault(name, {})
    node[path[-1]] = value
    return cfg


# ---- params of every job, from one process -------------------------------------------------

JobParams = dict[tuple[str, tuple[str, ...]], list]


@contextlib.contextmanager
def cached_parsing() -> Iterator[None]:
    """Within: Snakemake parses and compiles each Snakefile once per process, not once per DAG (two
    thirds of a build); the schema's YAML, the installed packages' versions and the checkout's git
    state (the manifest rule's params: two git processes a DAG) are read once (the schema once per
    content: each parse copies it to a folder of its own); a config section that passed the schema
    once is filled with its defaults from memory when it comes again (an invalid one is checked
    anew); the jobs' conda environments are skipped; the whole config still goes through validate()
    and the cross-key checks, and the rules' code runs afresh. The cyclic collector runs less often:
    a DAG allocates some 10^5 container objects and about 15,000 of them stay alive after it
    (Snakemake's class-level caches hold some DAGs), so the default thresholds scan a growing heap
    again and again (a fifth of the CPU of config.yaml's map).
    The cwd, sys.path (rules/common.smk prepends src/) and the thresholds are restored on exit."""
    import builtins
    import gc

    import snakemake.api  # noqa: F401 - first: snakemake.workflow imports it back
    import snakemake.dag
    import snakemake.utils
    import snakemake.workflow

    import prbench.config
    import prbench.manifest

    parse, load = snakemake.workflow.parse, snakemake.utils._load_configfile
    parsed: dict = {}
    loaded: dict = {}
    compiled: dict = {}

    def once(fn):
        """fn read once per distinct arguments; each caller gets its own copy."""
        seen: dict = {}

        def wrapper(*args):
            key = tuple(map(str, args))
            if key not in seen:
                seen[key] = fn(*args)
            return copy.deepcopy(seen[key])
        return wrapper

    def cached_compile(source, filename, mode, *args, **kwargs):
        # Workflow.include compiles the parsed code; the Snakefiles' globals are snakemake.workflow's,
        # so this name shadows the builtin there (and in the rules' code, which never calls compile)
        if args or kwargs or not isinstance(source, str):
            return builtins.compile(source, filename, mode, *args, **kwargs)
        key = (source, str(filename), mode)
        if key not in compiled:
            compiled[key] = builtins.compile(source, filename, mode)
        return compiled[key]

    def cached_parse(path, workflow, linemap, overwrite_shellcmd=None, rulecount=0):
        key = (path.get_path_or_uri(secret_free=True), rulecount, overwrite_shellcmd)
        if key not in parsed:
            lines: dict = {}
            parsed[key] = (*parse(path, workflow, linemap=lines, overwrite_shellcmd=overwrite_shellcmd,
                                  rulecount=rulecount), lines)
        code, count, lines = parsed[key]
        linemap |= lines
        return code, count

    def cached_load(source, filetype="Config"):
        if not hasattr(source, "read"):
            return load(source, filetype=filetype)
        text = source.read()
        key = (text, filetype)
        if key not in loaded:
            loaded[key] = load(io.StringIO(text), filetype=filetype)
        return copy.deepcopy(loaded[key])

    load_schema, first_error = prbench.config.load_schema, prbench.config._first_error
    schemas: dict = {}
    checked: dict = {}

    def schema_by_content(path=prbench.config.SCHEMA_PATH):
        # the Snakefile passes a copy of the file in a source cache folder of its own each parse
        text = Path(path).read_bytes()
        if text not in schemas:
            schemas[text] = load_schema(path)
        return copy.deepcopy(schemas[text])

    def memo_first_error(validator, instance, prefix=""):
        # with_defaults validates a config section (filling its defaults) about 90 times a parse, and
        # most sections are the same in every DAG of a map: a section once found valid is filled the
        # same way again; an invalid one raises anew
        if not isinstance(instance, dict):
            return first_error(validator, instance, prefix)
        key = (id(validator), prefix, repr(instance))
        if key not in checked:
            first_error(validator, instance, prefix)
            checked[key] = (validator, copy.deepcopy(instance))  # the validator kept: its id stays unique
        filled = copy.deepcopy(checked[key][1])
        instance.clear()
        instance.update(filled)

    cwd, path, thresholds = os.getcwd(), list(sys.path), gc.get_threshold()
    patches = [(snakemake.workflow, "parse", cached_parse), (snakemake.utils, "_load_configfile", cached_load),
               (snakemake.workflow, "compile", cached_compile),
               (prbench.config, "load_schema", schema_by_content),
               (prbench.config, "_first_error", memo_first_error),
               (prbench.manifest, "package_versions", once(prbench.manifest.package_versions)),
               (prbench.manifest, "git_state", once(prbench.manifest.git_state)),
               (snakemake.dag.DAG, "update_conda_envs", lambda self: None)]  # no job runs here
    saved = [getattr(obj, name, MISSING) for obj, name, _ in patches]
    for obj, name, new in patches:
        setattr(obj, name, new)
    gc.set_threshold(20_000, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        for (obj, name, _), old in zip(patches, saved):
            if old is MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)
        os.chdir(cwd)
        sys.path[:] = path


def job_params(config: dict, workdir: Path) -> JobParams:
    """(rule, outputs) -> the params Snakemake records, for every job of `config` (all forced)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings

    cwd, path = os.getcwd(), list(sys.path)
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
            wf = api.workflow(ResourceSettings(cores=1), ConfigSettings(config=copy.deepcopy(config)),
                              snakefile=SNAKEFILE, workdir=workdir)
            wf.dag(DAGSettings(forceall=True))
            workflow = wf._workflow
            workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            return {(job.rule.name, tuple(sorted(map(str, job.output)))): workflow.persistence._params(job)
                    for job in workflow.dag.jobs if job.rule.name != "all"}
    finally:
        os.chdir(cwd)
        sys.path[:] = path


# Rules that read the whole validated config by design, so every edit reaches them: the run manifest
# records the config's hash (provenance). Counting them would let every key "reach a job".
WHOLE_CONFIG_RULES = frozenset({"manifest"})


def changed_rules(base: JobParams, edited: JobParams) -> list[str]:
    return sorted({rule for rule, out in base.keys() | edited.keys()
                   if rule not in WHOLE_CONFIG_RULES
                   and base.get((rule, out), MISSING) != edited.get((rule, out), MISSING)})


def check_valid(config: dict) -> None:
    """The schema and the cross-key checks, as the Snakefile runs them (raises ConfigError)."""
    from prbench.config import _first_error
    from prbench.validation import check_config

    config = copy.deepcopy(config)
    _first_error(_validator(), config)  # fills the defaults, as the Snakefile's validate() does
    check_config(config)


@functools.lru_cache(maxsize=1)
def _validator():
    from prbench.config import _validator_with_defaults

    return _validator_with_defaults(SCHEMA)


@dataclass
class KeyResult:
    key: str
    rules: list[str]  # union over the key's edits
    edits: dict[str, list[str]]  # label -> rules that edit reaches
    invalid: dict[str, str]  # label -> why the edit is not a valid config


def param_map(config: dict, workdir: Path) -> dict[str, KeyResult]:
    """key -> the rules each schema-valid edit of it reaches, for every leaf key of `config`.
    An edit whose every candidate value is refused (schema, cross-key check or DAG) is recorded in
    KeyResult.invalid with the last refusal."""
    with cached_parsing():
        base = job_params(config, workdir)
        out = {}
        for leaf in leaves(config):
            res = KeyResult(leaf.key, [], {}, {})
            for label, candidates in edits(leaf):
                for value in candidates:
                    cfg = set_key(config, leaf.path, value)
                    try:
                        check_valid(cfg)
                        edited = job_params(cfg, workdir)
                    except Exception as exc:  # noqa: BLE001 - reported by the test, naming the key
                        lines = str(exc).strip().splitlines()
                        res.invalid[label] = f"{type(exc).__name__}: {lines[0] if lines else ''}"
                        continue
                    res.edits[label] = changed_rules(base, edited)
                    res.invalid.pop(label, None)
                    break
            res.rules = sorted({r for rules in res.edits.values() for r in rules})
            out[leaf.key] = res
    return out
