"""The entry points of the jobs that load no model (tables, figures, analysis, data preparation) import
neither torch nor transformers: a job pays its imports every time it runs, and torch with transformers'
import graph costs several CPU-seconds per job (perf/README.md, "CI time"). Every script in
workflow_scripts/ is checked unless it is named below as a job that loads a model; what is checked is
the script's own module-level `prbench` imports (read with `ast`), not what its functions import
when they run."""
import ast
import json
import subprocess
import sys

from helpers import REPO

SCRIPTS = REPO / "workflow_scripts"
# Jobs that load a model (an RM, a policy, the judge's or the retriever's encoder, a replica to build).
MODEL_JOBS = {"base_answers", "calibrate_judge", "eval_policy", "judge_bon", "judge_validity",
              "prepare_personalized", "replica_model", "rm_family", "sample_bon", "score_benchmark",
              "score_benchmark_part", "score_bon", "score_bon_family", "train_demo_policy", "train_demo_rm",
              "train_grpo", "train_ppo"}

PROBE = """
import importlib, json, sys
out = {}
for name, imports in json.loads(sys.argv[1]).items():
    before = set(sys.modules)
    for module, names in imports:
        mod = importlib.import_module(module)
        for n in names:
            getattr(mod, n) if hasattr(mod, n) else importlib.import_module(f"{module}.{n}")
    out[name] = sorted(m for m in ("torch", "transformers") if m in sys.modules and m not in before)
print(json.dumps(out))
"""


def _prbench_imports(path) -> list[tuple[str, list[str]]]:
    """(module, names) of the script's module-level `from prbench... import ...` statements."""
    tree = ast.parse(path.read_text())
    return [(node.module, [a.name for a in node.names]) for node in tree.body
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "prbench"]


def test_no_model_jobs_import_no_torch():
    names = {p.stem for p in SCRIPTS.glob("*.py")}
    assert MODEL_JOBS <= names, MODEL_JOBS - names  # a renamed script leaves this list
    scripts = {name: _prbench_imports(SCRIPTS / f"{name}.py") for name in sorted(names - MODEL_JOBS)}
    assert len(scripts) >= 15 and all(scripts.values()), {k: v for k, v in scripts.items() if not v}
    # in order, in one process: each script is named with what its own imports brought in
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(scripts)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    heavy = {name: mods for name, mods in json.loads(proc.stdout).items() if mods}
    assert not heavy, f"entry points of jobs without a model that import a model library: {heavy}"
