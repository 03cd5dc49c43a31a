"""Partial runs: the analysis of the RMs that finished when some RMs' jobs failed (docs/DESIGN.md,
"Partial runs").

With `--keep-going`, Snakemake runs every job it can and then calls the Snakefile's `onerror`
handler, which calls `after_failure`. When every failed job belongs to an RM (has an `rm` wildcard),
it writes `logs/partial/missing.json` (per missing RM: each failed rule, its wildcards and its log
files) and starts a second Snakemake run of the same workflow and config with the environment
variable PRBENCH_MISSING_RMS naming that file. rules/common.smk reads it (`load_missing`): the
aggregate rules then take only the other RMs (ROW_RMS), their outputs name the missing ones, and
`results/tables/missing_rms.csv` lists them. The second run also writes the report of the partial
results. The first run still exits non-zero, so a partial run is never mistaken for a complete one;
a later plain run, once the RM is fixed, runs that RM's jobs and the aggregates only.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ENV = "PRBENCH_MISSING_RMS"
MISSING_FILE = "logs/partial/missing.json"
CONFIG_FILE = "logs/partial/config.yaml"
REPORT = "results/report_partial.html"


def load_missing(path: str | None, rms=None) -> dict[str, list[dict]]:
    """{rm: [failure, ...]} from the file PRBENCH_MISSING_RMS names; {} when unset (a normal run).
    A failure is {"rule", "wildcards", "log"}. A file that is not such a mapping, or names an RM
    the config does not have, is an error naming the file."""
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{ENV}={path}: cannot read the missing-RM record: {e}") from e
    if not isinstance(data, dict) or not all(isinstance(v, list) and v for v in data.values()):
        raise ValueError(f"{ENV}={path}: expected {{rm: [failure, ...]}}, got {type(data).__name__}")
    unknown = sorted(set(data) - set(rms)) if rms is not None else []
    if unknown:
        raise ValueError(f"{ENV}={path}: RMs {unknown} are not in the config's reward_models")
    for rm, fails in data.items():
        for f in fails:
            if not isinstance(f, dict) or not {"rule", "wildcards", "log"} <= set(f):
                raise ValueError(f"{ENV}={path}: failure of RM {rm!r} lacks 'rule', 'wildcards' or 'log': {f!r}")
    return {rm: data[rm] for rm in sorted(data)}


def failure_record(rule: str, wildcards: dict, logs) -> dict:
    return {"rule": str(rule), "wildcards": {k: str(v) for k, v in sorted(dict(wildcards).items())},
            "log": [str(x) for x in logs]}


def group_failures(failed: list[dict]) -> tuple[dict[str, list[dict]], list[dict]]:
    """Split failure records into {rm: [...]} (sorted) and the failures of jobs with no `rm` wildcard."""
    by_rm: dict[str, list[dict]] = {}
    other = []
    for f in sorted(failed, key=lambda f: (f["rule"], sorted(f["wildcards"].items()))):
        rm = f["wildcards"].get("rm")
        if rm is None:
            other.append(f)
        else:
            by_rm.setdefault(rm, []).append(f)
    return {rm: by_rm[rm] for rm in sorted(by_rm)}, other


def describe(missing: dict[str, list[dict]]) -> str:
    """One line naming each missing RM with its failed rules and logs ('' when none is missing)."""
    if not missing:
        return ""
    parts = []
    for rm, fails in missing.items():
        why = "; ".join(f"rule {f['rule']}" + (f", log {', '.join(f['log'])}" if f["log"] else ", no log")
                        for f in fails)
        parts.append(f"{rm} ({why})")
    return f"Partial run: {len(missing)} RM(s) missing: " + " | ".join(parts)


def n_line(rms, missing: dict) -> str:
    """The n of a correlation: how many RMs it is over and, in a partial run, which are missing."""
    line = f"n = {len(rms)} RMs: {', '.join(rms)}."
    if missing:
        line += f" {describe(missing)}."
    return line


def missing_table(missing: dict[str, list[dict]], out_csv: str | os.PathLike) -> None:
    """results/tables/missing_rms.csv: one row per failed job of a missing RM (header only when
    the run is complete)."""
    import pandas as pd

    from .io import write_csv

    rows = [{"rm": rm, "rule": f["rule"],
             "wildcards": ",".join(f"{k}={v}" for k, v in f["wildcards"].items()),
             "log": " ".join(f["log"])}
            for rm, fails in missing.items() for f in fails]
    write_csv(out_csv, pd.DataFrame(rows, columns=["rm", "rule", "wildcards", "log"]))


def after_failure(workflow, config: dict, missing: dict, logger=None) -> int | None:
    """The Snakefile's `onerror` handler. With --keep-going, in a first (not already partial) run
    whose failed jobs all belong to RMs: record them and run the analysis of the other RMs plus
    its report in a second Snakemake run. Returns that run's exit status (None when not started)."""
    say = logger.error if logger else (lambda m: print(m, file=sys.stderr))
    if missing or not workflow.execution_settings.keep_going:
        return None
    failed = [failure_record(job.rule.name, job.wildcards_dict, job.log) for job in workflow.scheduler.failed]
    by_rm, other = group_failures(failed)
    if not by_rm or other:
        say(f"partial results: not attempted, failed jobs without an rm wildcard: {[f['rule'] for f in other]}"
            if other else "partial results: no failed job to attribute")
        return None
    if set(by_rm) >= set(config["reward_models"]):
        say("partial results: not attempted, every RM has a failed job")
        return None
    import yaml

    Path(MISSING_FILE).parent.mkdir(parents=True, exist_ok=True)
    Path(MISSING_FILE).write_text(json.dumps(by_rm, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    # The validated config (schema defaults filled in) replaces the original config files one to one.
    # (sort_keys=False: the RM order is the tables' row order)
    plain = json.loads(json.dumps(dict(config)))
    Path(CONFIG_FILE).write_text(yaml.safe_dump(plain, sort_keys=False), encoding="utf-8")
    say(describe(by_rm) + f"; analysing the other RMs (record: {MISSING_FILE})")
    cores = str(workflow.resource_settings.cores or 1)
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(workflow.main_snakefile),
            "--directory", os.getcwd(), "--configfile", CONFIG_FILE, "--nolock", "--cores", cores]
    env = {**os.environ, ENV: MISSING_FILE}
    rc = subprocess.run(base, env=env).returncode
    if rc == 0:
        rc = subprocess.run(base + ["--report", REPORT], env=env).returncode
    say(f"partial results: {'written, report ' + REPORT if rc == 0 else 'second run failed (exit %d)' % rc}; "
        "this run still exits non-zero")
    return rc
