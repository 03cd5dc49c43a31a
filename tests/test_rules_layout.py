"""The rules files share plumbing only through rules/common.smk and rules/judge.smk: every global
name a stage file (or the Snakefile) reads is defined in that file, in a shared file, or is a
Python or Snakemake builtin, so no stage file depends on another one's globals or on include order
among the stage files. common.smk reads only its own names; judge.smk also those of common.smk.

Each file is compiled to Python by Snakemake's own parser (what Snakemake executes) and its scopes
are read with `symtable`: a name counts as read when module-level code references it, or a function
or lambda (rule params, resources, input functions) reads it as a global. Definitions are a file's
module-level bindings: assignments, imports, `def`, and the `rule` functions Snakemake generates.
"""
import builtins
import symtable
from pathlib import Path
from types import SimpleNamespace

import snakemake.api  # noqa: F401 (snakemake.workflow needs it imported first)
import snakemake.ioflags
import snakemake.ioutils
import snakemake.workflow
from helpers import REPO
from snakemake.parser import parse
from snakemake.sourcecache import LocalSourceFile

RULES = REPO / "rules"
# Files every other one may read from, each after the ones before it (the Snakefile's include order).
SHARED = ("common.smk", "judge.smk")


def _snakemake_names() -> set[str]:
    """Names Snakemake puts in the namespace a Snakefile runs in (snakemake.workflow.Workflow)."""
    names = dict(vars(snakemake.workflow))
    snakemake.ioutils.register_in_globals(names)
    snakemake.ioflags.register_in_globals(names)
    return set(names) | {"workflow", "rules", "checkpoints", "scatter", "gather", "github", "gitlab", "gitfile",
                         "storage", "from_queue", "access", "config", "pep", "shell"}


BUILTINS = set(dir(builtins)) | _snakemake_names()


def compile_smk(path: Path) -> str:
    """The Python that Snakemake executes for one Snakefile or .smk file."""
    # The parser's only use of the workflow object is reading the file through its source cache.
    wf = SimpleNamespace(sourcecache=SimpleNamespace(open=lambda _source: open(path, encoding="utf-8")))
    code, _ = parse(LocalSourceFile(str(path)), wf, {})
    return code


def _module_table(path: Path) -> symtable.SymbolTable:
    return symtable.symtable(compile_smk(path), str(path), "exec")


def reads_and_defs(path: Path) -> tuple[set[str], set[str]]:
    """(global names the file reads, names it binds at module level)."""
    top = _module_table(path)
    defs = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    reads = set()

    def walk(table):
        for s in table.get_symbols():
            if s.is_referenced() and (table is top or s.is_global()):
                reads.add(s.get_name())
        for child in table.get_children():
            walk(child)

    walk(top)
    return reads, defs


def foreign_reads(rules_dir: Path, shared=SHARED, extra=()) -> dict[str, list[str]]:
    """Per file, the global names it reads that neither it, a shared file before it, nor a builtin
    defines. `extra`: more files (the Snakefile) checked like a stage file."""
    defs = {}
    reads = {}
    for path in sorted(rules_dir.glob("*.smk")) + [Path(p) for p in extra]:
        reads[path.name], defs[path.name] = reads_and_defs(path)
    missing = [name for name in shared if name not in defs]
    assert not missing, f"shared rules files not found: {missing}"
    out = {}
    for name in reads:
        visible = set(defs[name]) | BUILTINS
        for s in shared[: shared.index(name)] if name in shared else shared:
            visible |= defs[s]
        bad = sorted(reads[name] - visible)
        if bad:
            out[name] = bad
    return out


def test_no_rules_file_reads_another_stage_files_globals():
    assert foreign_reads(RULES, extra=[REPO / "Snakefile"]) == {}


def test_no_global_is_assigned_in_two_rules_files():
    """Shared settings (the judge config, the RM specs) are defined once: no two files assign the
    same global (imports aside)."""
    owners = {}
    for path in sorted(RULES.glob("*.smk")):
        for s in _module_table(path).get_symbols():
            if s.is_assigned() and not s.is_imported() and not s.get_name().startswith("__rule_"):
                owners.setdefault(s.get_name(), []).append(path.name)
    assert {name: files for name, files in owners.items() if len(files) > 1} == {}


def test_the_check_finds_a_planted_cross_file_read(tmp_path: Path):
    """A stage file reading another stage file's global, at module level, in a rule's params and in a
    lambda, is reported; reads of shared names, builtins and its own names are not."""
    (tmp_path / "common.smk").write_text("SEED = 1\n\n\ndef helper(x):\n    return x\n")
    (tmp_path / "judge.smk").write_text("JUDGE_CFG = {'seed': SEED}\n")
    (tmp_path / "a.smk").write_text("A_SPEC = helper(SEED)\nA_B = {'x': 1.0}\n")
    (tmp_path / "b.smk").write_text(
        "import os\n\n"
        "B_TRAIN = dict(A_SPEC)\n\n\n"
        "rule b:\n"
        "    output:\n        expand('{x}.txt', x=range(2)),\n"
        "    resources:\n        mem_mb=lambda wc: int(A_B[wc.x]),\n"
        "    params:\n        judge=JUDGE_CFG,\n        train=B_TRAIN,\n        path=os.sep,\n"
        "    run:\n        print(input, output, config)\n"
    )
    assert foreign_reads(tmp_path) == {"b.smk": ["A_B", "A_SPEC"]}
    (tmp_path / "common.smk").write_text("SEED = 1\nA_SPEC = {}\nA_B = {}\n\n\ndef helper(x):\n    return x\n")
    assert foreign_reads(tmp_path) == {}
    # a shared file may read only the shared files before it
    (tmp_path / "common.smk").write_text("SEED = JUDGE_CFG\nA_SPEC = {}\nA_B = {}\n\n\ndef helper(x):\n    return x\n")
    assert foreign_reads(tmp_path) == {"common.smk": ["JUDGE_CFG"]}
