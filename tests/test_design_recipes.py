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


def package_map() -> str:
    """The package map's bullets: "The package by stage" from its first list ("### Shared modules") on,
    without the section's opening paragraph (which names modules only to state the import rule)."""
    text = SECTION.read_text(encoding="utf-8")
    start = text.index("### Shared modules", text.index("## The package by stage"))
    return text[start:text.index("\n## ", start)]


def package_bullets(section: str) -> dict[str, str]:
    """Each top-level bullet of the package map, by the module it opens with (`prbench.x`), with its
    sub-bullets."""
    bullets: dict[str, str] = {}
    for block in re.split(r"\n(?=- |### )", section):
        m = re.match(r"- `(prbench\.\w+)", block)
        if m:
            bullets[m.group(1)] = bullets.get(m.group(1), "") + block
    return bullets


def named_in_map(rel: tuple[str, ...], section: str, bullets: dict[str, str]) -> bool:
    """A module (its path parts under src/, e.g. ("prbench", "downstream", "bon", "curves.py")) is named
    by its dotted path anywhere in the map, or by its file name inside its package's bullet (and,
    below a subpackage, inside the sub-bullet that opens with that subpackage's folder)."""
    dotted = ".".join(rel)[: -len(".py")]
    if re.search(rf"{re.escape(dotted)}(?![\w])", section):
        return True
    if len(rel) < 3:
        return False
    text = bullets.get(f"{rel[0]}.{rel[1]}", "")
    if len(rel) > 3:  # a subpackage's module: its sub-bullet, "  - `<folder>/`: ..."
        sub = re.search(rf"^  - `{re.escape(rel[2])}/`.*?(?=^  - |\Z)", text, flags=re.M | re.S)
        text = sub.group(0) if sub else ""
    return re.search(rf"`{re.escape(rel[-1])}`", text) is not None


def test_every_module_is_named():
    """The package map ("The package by stage") names every module of src/prbench/, so a module added
    without a line there fails here (the replicas' remote code, `__init__` and `__main__` files aside)."""
    section = package_map()
    bullets = package_bullets(section)
    pkg = REPO / "src" / "prbench"
    modules = [p.relative_to(pkg.parent).parts for p in sorted(pkg.rglob("*.py"))
               if "remote_code" not in p.parts and p.stem not in ("__init__", "__main__")]
    assert len(modules) >= 90
    unnamed = ["/".join(rel) for rel in modules if not named_in_map(rel, section, bullets)]
    assert not unnamed, f"docs/DESIGN.md's package map names no line for: {unnamed}"


def test_module_check_needs_the_right_bullet():
    """The check above is no looser than it says: a file name counts only inside its own package's
    bullet and subpackage's sub-bullet."""
    section = ("- `prbench.rms`: `length.py` (one kind).\n- `prbench.downstream`:\n  - `bon/`: `curves.py` (curves).\n"
               "  - `ppo/`: `train.py` (PPO).\n- `prbench.io`: reading and writing.\n")
    bullets = package_bullets(section)
    assert named_in_map(("prbench", "rms", "length.py"), section, bullets)
    assert named_in_map(("prbench", "downstream", "bon", "curves.py"), section, bullets)
    assert named_in_map(("prbench", "io.py"), section, bullets)
    assert not named_in_map(("prbench", "scoring", "length.py"), section, bullets)  # another package's file
    assert not named_in_map(("prbench", "downstream", "grpo", "train.py"), section, bullets)  # another sub-bullet
    assert not named_in_map(("prbench", "downstream", "ppo", "curves.py"), section, bullets)
    assert not named_in_map(("prbench", "stats.py"), section, bullets)
