"""The package's import direction: no import cycle (module-level or inside a function), the config
module a leaf, shared modules below the stages, each stage importing only the stages before it.
The graph is read with `ast` (tests/import_graph.py), so a function-level import that dodges a
cycle at run time still counts as an edge here."""
from pathlib import Path

from helpers import REPO
from import_graph import cycles, import_graph

SRC = REPO / "src"
# Modules every stage may use; they import only each other.
SHARED = {"prbench", "prbench.config", "prbench.io", "prbench.log", "prbench.seeding", "prbench.stats",
          "prbench.batching", "prbench.encoders", "prbench.generation", "prbench.models", "prbench.prompts",
          "prbench.prompt_source", "prbench.registry", "prbench.job", "prbench.partial", "prbench.manifest",
          "prbench.prefetch", "prbench.protocol", "prbench.revisions"}
# What each stage package may import besides itself and SHARED: the DAG's order.
ALLOWED = {
    "prbench.data": (),
    "prbench.rms": (),
    "prbench.judge": (),
    "prbench.replica": (),
    "prbench.scoring": ("prbench.data.baselines", "prbench.data.rewardbench", "prbench.data.rewardbench2",
                        "prbench.rms"),
    "prbench.training": ("prbench.rms",),
    "prbench.downstream": ("prbench.data", "prbench.rms", "prbench.judge"),
    # the analysis reads the downstream contract (the package itself), never a method's code
    # (and the null worlds, prbench.analysis.null_world: BoN's selection rule, to keep the run's own
    # picks, and the demo world's vocabulary judges)
    "prbench.analysis": ("prbench.data.baselines", "prbench.scoring.official", "prbench.scoring.leaderboard",
                         "=prbench.downstream", "prbench.downstream.bon.curves", "prbench.data.vocab_judge"),
    "prbench.validation": ("prbench.data.baselines", "prbench.data.demo_world", "prbench.rms"),
    # the plan of a config (job counts, cost, power): reads the validation, the downstream registry and
    # PPO memory plan, and the verdict rule's power function; nothing imports it
    "prbench.plan": ("prbench.validation", "=prbench.downstream", "prbench.downstream.ppo.memory",
                     "prbench.downstream.grpo.memory", "prbench.analysis.power", "prbench.analysis.verdict"),
}


def graph():
    return import_graph(SRC, "prbench", exclude=("remote_code",))


def _allowed(target: str, rules) -> bool:
    for rule in rules:
        if rule.startswith("="):
            if target == rule[1:]:
                return True
        elif target == rule or target.startswith(rule + "."):
            return True
    return False


def _stage(module: str) -> str | None:
    return next((s for s in ALLOWED if module == s or module.startswith(s + ".")), None)


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_checker_finds_a_planted_cycle(tmp_path: Path):
    """A package whose cycle hides behind a function-level import and a relative `from . import`."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import c\n    return c\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from pkg.sub.b import f\n")
    g = import_graph(tmp_path, "pkg")
    assert g["pkg.sub.b"] == {"pkg.c"} and g["pkg.d"] == {"pkg.sub.b"}
    assert cycles(g) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (pkg / "c.py").write_text("import os\n")
    assert cycles(import_graph(tmp_path, "pkg")) == []


def test_config_is_a_leaf():
    assert graph()["prbench.config"] == set()


def test_shared_modules_import_only_shared_modules():
    g = graph()
    bad = {m: sorted(g[m] - SHARED) for m in SHARED if g[m] - SHARED}
    assert not bad, bad


def test_every_module_is_shared_or_in_a_stage():
    assert [m for m in graph() if m not in SHARED and _stage(m) is None] == []


def test_stages_import_only_earlier_stages():
    bad = []
    for mod, targets in sorted(graph().items()):
        stage = _stage(mod)
        if stage is None:
            continue
        for t in sorted(targets):
            if t in SHARED or _stage(t) == stage or _allowed(t, ALLOWED[stage]):
                continue
            bad.append(f"{mod} -> {t}")
    assert not bad, bad


# Libraries that take seconds to import. Snakemake imports the package's rule helpers at every parse
# (each `snakemake` command and dry run: hundreds in the test suite); these belong inside the jobs.
HEAVY_AT_PARSE = ("scipy", "torch", "transformers", "sklearn", "matplotlib", "trl", "datasets", "statsmodels")


def test_parsing_the_workflow_imports_no_heavy_library():
    """The DAGs of the demo, paper and replica configs are built (Snakemake's API, in a fresh
    process) without importing any of HEAVY_AT_PARSE: a module-level `from scipy import stats` in a
    module the rules import cost every Snakemake command about 1 CPU-s of its 3-4."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, tempfile, yaml\n"
        "from pathlib import Path\n"
        "from param_keys import job_params\n"
        "for path in sys.argv[1:]:\n"
        "    with tempfile.TemporaryDirectory() as d:\n"
        "        assert job_params(yaml.safe_load(Path(path).read_text()), Path(d)), path\n"
        f"print(sorted(m for m in {HEAVY_AT_PARSE!r} if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code, "configs/demo.yaml", "config.yaml", "configs/replica.yaml"],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO / "tests"), "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout[-2000:]
