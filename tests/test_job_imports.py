"""The entry points of the jobs that load no model (tables, figures, analysis, data preparation) import
neither torch nor transformers: a job pays its imports every time it runs, and torch with transformers'
import graph costs several CPU-seconds per job (perf/README.md, "CI time")."""
import json
import re
import subprocess
import sys

from helpers import REPO

NO_MODEL = ["accuracy_table", "benchmark_reports", "bon_measures", "bon_table", "correlations", "demo_world",
            "figures", "judged_measures", "leaderboard", "manifest", "merge_samples", "missing_rms", "null_world",
            "policy_table", "prepare_baseline"]
IMPORT = re.compile(r"^from prbench[\w.]* import [\w, ]+$", re.M)

PROBE = """
import json, sys
out = {}
for name, lines in json.loads(sys.argv[1]).items():
    before = set(sys.modules)
    for line in lines:
        exec(line, {})
    out[name] = sorted(m for m in ("torch", "transformers") if m in sys.modules and m not in before)
print(json.dumps(out))
"""


def test_no_model_jobs_import_no_torch():
    scripts = {name: IMPORT.findall((REPO / "workflow_scripts" / f"{name}.py").read_text()) for name in NO_MODEL}
    assert all(scripts.values()), {k: v for k, v in scripts.items() if not v}
    # in order, in one process: each script is named with what its own imports brought in
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(scripts)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    heavy = {name: mods for name, mods in json.loads(proc.stdout).items() if mods}
    assert not heavy, f"entry points that import a model library: {heavy}"
