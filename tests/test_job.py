"""prbench.job.start, the first statement of every workflow script: the job's log file, the prompt
templates when the job's params have `prompts`, torch's thread count only when asked."""
import ast
import gc
import logging
import weakref
from types import SimpleNamespace

import pytest
import torch
from helpers import REPO
from snakemake.iocontainers import Params

from prbench.job import JOB_GC_THRESHOLDS, start


@pytest.fixture(autouse=True)
def _collector_restored():
    """start() sets up the collector for a job process; this test process gets its own back."""
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def _job(tmp_path, **params):
    return SimpleNamespace(log=[str(tmp_path / "logs" / "job.log")], params=Params(fromdict=params),
                           threads=torch.get_num_threads())


def test_start_logs_to_the_job_log_and_configures_prompts(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr("prbench.job.configure_prompts", seen.append)
    log = start(_job(tmp_path, prompts={"templates": "default"}, seed=0))
    log.info("hello")
    assert log is logging.getLogger("prbench")
    assert "hello" in (tmp_path / "logs" / "job.log").read_text()
    assert seen == [{"templates": "default"}]
    start(_job(tmp_path, prompts={}))  # an empty section still selects the default set
    assert seen[-1] == {}
    start(_job(tmp_path, seed=0))  # no `prompts` param: nothing configured
    assert len(seen) == 2


def test_start_sets_torch_threads_only_when_asked(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    job = _job(tmp_path, seed=0)
    start(job)
    assert calls == []
    start(job, torch_threads=True)
    assert calls == [job.threads]


class _Node:
    pass


def test_start_leaves_the_collector_on_with_the_job_thresholds_and_its_imports_frozen(tmp_path):
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    start(_job(tmp_path, seed=0), torch_threads=True)
    assert gc.isenabled() and gc.get_threshold() == JOB_GC_THRESHOLDS
    assert gc.get_freeze_count() > 10_000  # the modules alive at start, torch's among them
    # garbage in a reference cycle is still collected, by the allocations alone
    node = _Node()
    node.me = node
    ref = weakref.ref(node)
    del node
    junk = [[] for _ in range(2 * JOB_GC_THRESHOLDS[0])]
    assert ref() is None and junk


def test_start_turns_the_collector_back_on_when_it_fails(tmp_path, monkeypatch):
    def boom(_):
        raise RuntimeError("no lock")

    monkeypatch.setattr("prbench.job.configure_revisions", boom)
    with pytest.raises(RuntimeError, match="no lock"):
        start(_job(tmp_path, seed=0))
    assert gc.isenabled() and gc.get_threshold() == JOB_GC_THRESHOLDS


def _is_start_call(node) -> bool:
    value = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "start"
            and isinstance(value.args[0], ast.Name) and value.args[0].id == "snakemake")


def test_every_workflow_script_starts_with_it():
    """Its first statement after the docstring and imports: no prbench or torch import comes before it,
    and no script sets up logging, prompts or threads by itself."""
    scripts = sorted((REPO / "workflow_scripts").glob("*.py"))
    assert len(scripts) == 34
    for script in scripts:
        body = ast.parse(script.read_text()).body[1:]  # after the docstring
        first = next(i for i, node in enumerate(body) if not isinstance(node, (ast.Import, ast.ImportFrom)))
        assert _is_start_call(body[first]), script.name
        before = [a.name for n in body[:first] if isinstance(n, ast.Import) for a in n.names]
        before += [n.module for n in body[:first] if isinstance(n, ast.ImportFrom)]
        assert [m for m in before if m.split(".")[0] in ("prbench", "torch")] == ["prbench.job"], script.name
        text = script.read_text()
        for name in ("setup_logging", "configure_prompts", "set_num_threads", "noqa"):
            assert name not in text, (script.name, name)


def test_start_points_the_revision_lock_at_the_config(tmp_path):
    from prbench import revisions

    job = _job(tmp_path, seed=0)
    try:
        job.config = {"revisions": {"lock": str(tmp_path / "run" / "lock.json")}}
        start(job)
        assert revisions.lock_path() == tmp_path / "run" / "lock.json"
        job.config = {}  # a config without the section: the default path
        start(job)
        assert str(revisions.lock_path()) == revisions.LOCK_DEFAULT
    finally:
        revisions.configure(None)
