"""prbench.partial: the record of a partial run's missing RMs, as the rules and outputs read it.
The run itself (a broken RM under --keep-going) is tests/test_partial_run.py."""
import json

import pandas as pd
import pytest

from prbench import partial

FAILS = [
    partial.failure_record("score_benchmark", {"rm": "b", "bench": "general"}, ["logs/scoring/b/general.log"]),
    partial.failure_record("train_ppo", {"policy": "p", "rm": "b"}, ["logs/ppo/p/b.log"]),
    partial.failure_record("score_benchmark", {"rm": "a", "bench": "general"}, []),
]


def test_group_failures_by_rm_and_others():
    by_rm, other = partial.group_failures(FAILS + [partial.failure_record("merge_samples", {"policy": "p"}, ["x"])])
    assert list(by_rm) == ["a", "b"]
    assert [f["rule"] for f in by_rm["b"]] == ["score_benchmark", "train_ppo"]
    assert [f["rule"] for f in other] == ["merge_samples"]


def test_describe_names_rm_rule_and_log():
    by_rm, _ = partial.group_failures(FAILS)
    line = partial.describe(by_rm)
    assert line.startswith("Partial run: 2 RM(s) missing")
    assert "b (rule score_benchmark, log logs/scoring/b/general.log; rule train_ppo, log logs/ppo/p/b.log)" in line
    assert "a (rule score_benchmark, no log)" in line
    assert partial.describe({}) == ""
    assert partial.n_line(["x", "y"], {}) == "n = 2 RMs: x, y."
    assert partial.n_line(["x"], by_rm).startswith("n = 1 RMs: x. Partial run: 2 RM(s) missing")


def test_load_missing_roundtrip_and_errors(tmp_path):
    by_rm, _ = partial.group_failures(FAILS)
    path = tmp_path / "missing.json"
    path.write_text(json.dumps(by_rm))
    assert partial.load_missing(str(path), ["a", "b", "c"]) == by_rm
    assert partial.load_missing(None) == {} and partial.load_missing("") == {}
    with pytest.raises(ValueError, match=r"RMs \['b'\] are not in the config"):
        partial.load_missing(str(path), ["a"])
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="PRBENCH_MISSING_RMS=.*missing.json: expected"):
        partial.load_missing(str(path))
    path.write_text(json.dumps({"a": [{"rule": "x"}]}))
    with pytest.raises(ValueError, match="lacks 'rule', 'wildcards' or 'log'"):
        partial.load_missing(str(path))
    with pytest.raises(ValueError, match="cannot read"):
        partial.load_missing(str(tmp_path / "nope.json"))


def test_missing_table(tmp_path):
    by_rm, _ = partial.group_failures(FAILS)
    partial.missing_table(by_rm, tmp_path / "m.csv")
    df = pd.read_csv(tmp_path / "m.csv")
    assert list(df.columns) == ["rm", "rule", "wildcards", "log"]
    assert df.values.tolist()[1] == ["b", "score_benchmark", "bench=general,rm=b", "logs/scoring/b/general.log"]
    partial.missing_table({}, tmp_path / "empty.csv")
    assert (tmp_path / "empty.csv").read_text().strip() == "rm,rule,wildcards,log"


def _workflow(keep_going, failed):
    from types import SimpleNamespace as NS

    jobs = [NS(rule=NS(name=rule), wildcards_dict=wc, log=logs) for rule, wc, logs in failed]
    return NS(execution_settings=NS(keep_going=keep_going), scheduler=NS(failed=jobs),
              resource_settings=NS(cores=2), main_snakefile="/repo/Snakefile")


def test_after_failure_starts_the_partial_run(tmp_path, monkeypatch):
    import subprocess

    import yaml

    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, env: calls.append((cmd, env)) or
                        __import__("types").SimpleNamespace(returncode=0))
    config = {"seed": 0, "reward_models": {"a": {"kind": "length"}, "b": {"kind": "length"}}}
    wf = _workflow(True, [("score_benchmark", {"rm": "b", "bench": "general"}, ["logs/x.log"])])
    assert partial.after_failure(wf, config, {}) == 0
    assert json.loads((tmp_path / partial.MISSING_FILE).read_text())["b"][0]["log"] == ["logs/x.log"]
    assert yaml.safe_load((tmp_path / partial.CONFIG_FILE).read_text()) == config
    (run, env), (report, _) = calls
    assert run[-5:] == ["--configfile", partial.CONFIG_FILE, "--nolock", "--cores", "2"]
    assert env[partial.ENV] == partial.MISSING_FILE and run[run.index("--directory") + 1] == str(tmp_path)
    assert report[-2:] == ["--report", partial.REPORT]
    # not attempted: without --keep-going, inside the partial run itself, a failure of no RM, every RM failed
    calls.clear()
    assert partial.after_failure(_workflow(False, [("x", {"rm": "b"}, [])]), config, {}) is None
    assert partial.after_failure(wf, config, {"b": [{"rule": "x", "log": []}]}) is None
    assert partial.after_failure(_workflow(True, [("merge_samples", {"policy": "p"}, [])]), config, {}) is None
    both = _workflow(True, [("x", {"rm": "a"}, []), ("x", {"rm": "b"}, [])])
    assert partial.after_failure(both, config, {}) is None
    assert calls == []
