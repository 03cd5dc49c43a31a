"""Mutation score of the modules that carry the project's claims (`make mutate`, perf/README.md).

mutmut reads its settings from ./pyproject.toml only and mutates everything under its source paths,
so each module runs in its own work folder, .mutate/<module>/: links to src/, tests/ and the data
folders the tests read, and a pyproject.toml that is the project's plus a [tool.mutmut] section
naming that one module and its fast targeted tests (files or test ids, `-m "not slow"`; MODULES
below says which and why). mutmut copies them into
.mutate/<module>/mutants/ and runs the tests there; the repository's files are never edited.

    python perf/mutate.py                 # every module, one after the other
    python perf/mutate.py verdict curves  # some
    python perf/mutate.py --survivors comparison   # list a finished run's surviving mutants

Prints killed/total per module and writes .mutate/summary.json. Not part of CI (all modules: about
16 minutes on 2 cores at nice 19 beside other jobs, perf/README.md).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".mutate"
# the tests read these beside src/ and tests/ (configs, schemas, the rules and the docs they check)
DATA = ["configs", "schemas", "rules", "Snakefile", "config.yaml", "docs", "profiles", "envs", "workflow_scripts",
        "report", "README.md", "CHANGELOG.md", "Makefile"]

# module name -> (source file, its own fast test files or test ids[, functions left unmutated]).
# mutmut reruns a test's fixtures for every mutant the test reaches, so each module gets the fast tests
# that target it: tests whose fixtures train tiny LMs (test_rms_generative, test_rm_protocol) or build
# whole correlation worlds (test_correlation_inference's `opposed`/`saved`, test_wiring_values) are
# left out; perf/README.md, "Mutation score", lists what that leaves unmutated or untested.
_VERDICT_FAST = ["test_decision_test_matches_its_formula", "test_forty_rms_clear_gap_is_personalized",
                 "test_forty_rms_no_gap_is_undecided", "test_under_the_floor_cannot_decide_and_says_so",
                 "test_too_few_rms_cannot_decide_and_min_rms_adds_a_requirement", "test_constant_side_is_undefined",
                 "test_family_bh_and_intervals_agree", "test_confirmatory_mask_default_declared_and_unknown"]
_INFERENCE_FAST = ["test_williams_reproduces_steiger_case_a", "test_williams_separated_from_its_neighbours",
                   "test_exact_null_matches_scipy_permutation_test", "test_ndcg_null_mean_closed_form",
                   "test_monte_carlo_null_when_n_is_large", "test_swap_permutation_matches_scipy_paired_samples",
                   "test_pearson_and_leave_one_out_match_scipy", "test_joint_bootstrap_ci_recomputed_by_a_loop",
                   "test_bh_qvalues_match_scipy_and_statsmodels", "test_exact_permutations_cover_every_ranking",
                   "test_best_benchmark_without_each_rm_matches_a_scipy_loop"]
MODULES = {
    # the power simulation (rule_power, power_rows and their helpers) and the size study (main,
    # size_grid) are tested by the slow tests only (minutes each): not mutated, see perf/README.md
    "verdict": ("src/prbench/analysis/verdict.py", [f"tests/test_verdict.py::{t}" for t in _VERDICT_FAST],
                ["main", "size_grid", "_uncorrected_size", "power_rows", "rule_power", "draw_cell", "possible",
                 "_bisect", "spearman_to_pearson"]),
    "comparison": ("src/prbench/analysis/comparison.py",
                   ["tests/test_comparison.py",
                    "tests/test_verdict.py::test_confirmatory_mask_default_declared_and_unknown"]),
    "rankmetrics": ("src/prbench/analysis/rankmetrics.py", ["tests/test_rankmetrics.py"]),
    "curves": ("src/prbench/downstream/bon/curves.py", ["tests/test_bon.py", "tests/test_bon_values.py"]),
    "official": ("src/prbench/scoring/official.py",
                 ["tests/test_official.py", "tests/test_wiring_values.py::test_baseline_headline_is_its_official_score",
                  "tests/test_wiring_values.py::test_benchmark_scores_are_mean_credit_with_half_for_ties"]),
    "replies": ("src/prbench/rms/replies.py",
                ["tests/test_rms_generative.py::test_parsers"] + [
                    f"tests/test_rm_protocol.py::{t}" for t in (
                        "test_first_result_parse_is_the_authors_rule", "test_the_two_parsers_differ_where_the_rules_do",
                        "test_unit_score_parse", "test_unit_score_parsers_project_and_authors")]),
    "inference": ("src/prbench/analysis/inference.py",
                  [f"tests/test_correlation_inference.py::{t}" for t in _INFERENCE_FAST]),
}


def mutant_globs(name: str) -> list[str]:
    """mutmut's names of the module's functions to mutate: x_<function>, xǁ<Class>ǁ<method>."""
    source, _, *rest = MODULES[name]
    skip = set(rest[0]) if rest else set()
    module = source.removeprefix("src/").removesuffix(".py").replace("/", ".")
    names = []
    for node in ast.parse((ROOT / source).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in skip:
            names.append(f"x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            names += [f"x\u01c1{node.name}\u01c1{f.name}" for f in node.body
                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f"{node.name}.{f.name}" not in skip]
    return [f"{module}.{n}__mutmut_*" for n in names]


def counts(work: Path, name: str) -> dict:
    """Status counts of the selected mutants (mutmut's own exit-code table), survivor names."""
    from mutmut.stats import status_by_exit_code

    meta = json.loads((work / "mutants" / (MODULES[name][0] + ".meta")).read_text())
    globs = mutant_globs(name)
    out: dict = {"killed": 0, "survived": 0, "no tests": 0, "timeout": 0, "other": 0, "survivors": []}
    for key, code in meta["exit_code_by_key"].items():
        if not any(fnmatch.fnmatchcase(key, g) for g in globs):
            continue
        status = status_by_exit_code[code]
        out[status if status in out else "other"] += 1
        if status == "survived":
            out["survivors"].append(key)
    out["total"] = sum(out[k] for k in ("killed", "survived", "no tests", "timeout", "other"))
    return out


def mutmut_section(source: str, tests: list[str]) -> str:
    lines = ["", "[tool.mutmut]",
             'source_paths = ["src/prbench"]',
             f"only_mutate = [{json.dumps(source)}]",
             f"also_copy = {json.dumps(DATA)}",
             f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
             'pytest_add_cli_args = ["-m", "not slow", "-p", "no:cacheprovider", "-q"]',
             "use_git_change_detection = false",
             ""]
    return "\n".join(lines)


def prepare(name: str) -> Path:
    source, tests, *_ = MODULES[name]
    work = WORK / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for entry in ["src", "tests", *DATA]:
        if (ROOT / entry).exists():
            (work / entry).symlink_to(ROOT / entry)
    project = (ROOT / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(project + mutmut_section(source, tests))
    return work


def mutmut(work: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    exe = Path(sys.executable).with_name("mutmut")
    return subprocess.run([str(exe), *args], cwd=work, env=env, check=check, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def run(name: str, max_children: int) -> dict:
    work = prepare(name)
    start = time.time()
    proc = mutmut(work, "run", "--max-children", str(max_children), *mutant_globs(name), check=False)
    seconds = time.time() - start
    (work / "run.log").write_text(proc.stdout)
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        raise SystemExit(f"mutmut failed on {name} (exit {proc.returncode}); log in {work / 'run.log'}")
    stats = counts(work, name)
    stats.update(module=MODULES[name][0], tests=MODULES[name][1], skipped_functions=(MODULES[name][2:] or [[]])[0],
                 seconds=round(seconds))
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="*", choices=[[], *MODULES], default=[])
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--survivors", action="store_true", help="list the survivors of a finished run")
    args = ap.parse_args()
    names = args.modules or list(MODULES)
    if args.survivors:
        for name in names:
            print(name, *counts(WORK / name, name)["survivors"], sep="\n  ")
        return
    summary_file = WORK / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    for name in names:
        stats = run(name, args.max_children)
        summary[name] = stats
        killed = stats["killed"] + stats["timeout"]
        print(f"{name:12s} killed {killed}/{stats['total']} ({100 * killed / max(stats['total'], 1):.0f}%), "
              f"survived {stats['survived']}, no tests {stats['no tests']}, {stats['seconds']} s", flush=True)
        summary_file.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
