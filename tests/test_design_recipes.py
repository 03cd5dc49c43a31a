"""docs/DESIGN.md: every file and registry the four recipes of "How to extend" name exists in the code,
and the package map names every module."""
import importlib
import re

import pytest
from helpers import REPO

SECTION = REPO / "docs" / "DESIGN.md"


def recipes() -> str:
    text = SECTION.read_text(encoding="utf-8")
    start = text.index("## How to extend")
    nxt = text.find("\n## ", start + 5)
    return text[start:] if nxt < 0 else text[start:nxt]


def test_four_recipes():
    heads = re.findall(r"^### (.+)$", recipes(), flags=re.M)
    assert heads == ["A reward-model interface (a new `kind`)", "A baseline benchmark", "A downstream method",
                     "A rank coefficient"]


def test_named_files_exist():
    paths = set(re.findall(r"`((?:src|rules|tests|schemas|docs|configs)/[^`\s]+|Snakefile|config\.yaml)`", recipes()))
    concrete = {p for p in paths if "<" not in p}
    assert len(concrete) >= 12
    missing = sorted(p for p in concrete if not (REPO / p).exists())
    assert not missing, missing
    # placeholder paths name a folder that exists
    for p in paths - concrete:
        assert (REPO / p.split("<")[0]).is_dir(), p


@pytest.mark.parametrize("module,names", [
    ("prbench.rms", ["KINDS", "Kind"]),
    ("prbench.rms.base", ["RewardModel", "ScoreOutput", "CompareOutput"]),
    ("prbench.data.baselines", ["KINDS", "BaselineKind"]),
    ("prbench.data.rewardbench", ["load_pairs"]),
    ("prbench.scoring.official", ["rewardbench_components"]),
    ("prbench.downstream", ["register", "Method", "TABLE_PATTERN", "MEASURE_COLUMNS", "write_measures"]),
    ("prbench.analysis.rankmetrics", ["COEFFICIENTS", "snap"]),
])
def test_named_registries_exist(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert hasattr(mod, name), f"{module}.{name}"
        assert name in recipes(), f"the recipes do not name {name}"


def test_registries_hold_what_the_recipes_say():
    from prbench import downstream
    from prbench.analysis.rankmetrics import COEFFICIENTS
    from prbench.data import baselines
    from prbench.downstream import MEASURE_COLUMNS, REGISTRY, TABLE_PATTERN
    from prbench.rms import KINDS

    assert {"classifier", "generative_pairwise", "generative_pointwise", "length"} <= set(KINDS)
    for kind in KINDS.values():  # "<module>:<Class>" under prbench.rms
        module, cls = kind.impl.split(":")
        assert hasattr(importlib.import_module(f"prbench.rms.{module}"), cls)
    assert set(baselines.KINDS) == {"rewardbench", "rmbench", "rewardbench2"}
    for kind in baselines.KINDS:  # "<module>:<attr>" under prbench
        assert callable(baselines.loader(kind)) and callable(baselines.official_components(kind))
    assert TABLE_PATTERN == "results/downstream/{method}.csv"
    assert MEASURE_COLUMNS == ["policy", "rm", "method", "estimator", "measure", "k", "replicate", "question_id",
                               "subset", "value"]
    assert {"bon", "ppo", "grpo"} <= set(REGISTRY) and REGISTRY["grpo"].trained_policy
    assert {"spearman", "kendall_tau_b", "weighted_tau", "ndcg", "rbo"} == set(COEFFICIENTS)
    schema = (REPO / "schemas" / "config.schema.yaml").read_text()
    assert "prbench.rms.KINDS" in schema and "prbench.data.baselines.KINDS" in schema  # no enum copies
    for method in REGISTRY.values():  # built-in hooks: "<module>:<attr>" under prbench.downstream
        for hook in (method.enabled, method.signal):
            assert callable(downstream.resolve(hook))
    assert 'include: "rules/grpo.smk"' in (REPO / "Snakefile").read_text()


def test_every_module_is_named():
    """The package map ("The package by stage") names every module of src/prbench/, by its file name
    or its dotted path, so a module added without a line there fails here (the replicas' remote code,
    `__init__` and `__main__` files aside)."""
    text = SECTION.read_text(encoding="utf-8")
    pkg = REPO / "src" / "prbench"
    unnamed = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg.parent)
        if "remote_code" in rel.parts or path.stem in ("__init__", "__main__"):
            continue
        dotted = ".".join(rel.with_suffix("").parts)
        if not re.search(rf"(?<![\w.]){re.escape(path.name)}\b|{re.escape(dotted)}\b|`{path.stem}`", text):
            unnamed.append(str(rel))
    assert not unnamed, f"docs/DESIGN.md names no line for: {unnamed}"
