"""python -m prbench.prefetch (issue 24, item 3): everything config.yaml needs from the hub, checked
offline (HF_HUB_OFFLINE=1) against a Hugging Face cache this test lays out itself; the replica and
test configs need nothing from the hub."""
import subprocess
import sys

import yaml
from helpers import REPO, snakemake_env

from prbench import prefetch, prompt_source
from prbench.config import validate_schema

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _config(name):
    return validate_schema(yaml.safe_load((REPO / name).read_text()))


def _fake_cache(root, rows):
    """The hub-cache layout huggingface_hub reads offline: {kind}s--org--name/refs/main -> commit,
    snapshots/<commit>/ with a file."""
    for row in rows:
        repo = root / f"{row['kind']}s--{row['ref'].replace('/', '--')}"
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / (row["revision"] or "main")).write_text(COMMIT)
        snap = repo / "snapshots" / COMMIT
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "config.json").write_text("{}")


def _cli(cache, *args):
    env = snakemake_env(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache))
    return subprocess.run([sys.executable, "-m", "prbench.prefetch", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_plan_of_the_paper_config_names_every_hub_artefact():
    rows = {r["key"]: r for r in prefetch.plan(_config("config.yaml"), REPO)}
    hub = {k for k, r in rows.items() if r["where"] == "hub"}
    assert {"judge.model", "retriever.model", "data.personalized.source"} <= hub
    assert rows["data.personalized.source"]["kind"] == "dataset"
    assert rows["judge.model"]["kind"] == "model"


def test_replica_and_test_configs_need_nothing_from_the_hub():
    for name in ("configs/replica.yaml", "configs/test.yaml"):
        rows = prefetch.plan(_config(name), REPO)
        assert rows and all(r["where"] in {"built", "package", "local"} for r in rows), name
        assert all(prefetch.fetch_one(r, check=True, basedir=REPO)[0] for r in rows), name


def _paper_config_with_prompt_cache(tmp_path):
    """config.yaml with its prompt cache (prompts.remote.cache) moved into tmp_path and every prompt
    file it maps laid out there (placeholder text: the project holds none of the authors' files)."""
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["prompts"]["remote"]["cache"] = str(tmp_path / "prompt_cache")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    rows = [r for r in prefetch.plan(validate_schema(raw), REPO) if r["where"] == "prompt"]
    for r in rows:
        f = prompt_source.cache_file(r["spec"], r["path"])
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("placeholder {question}")
    return path, rows


def test_check_offline_against_a_cache(tmp_path):
    rows = [r for r in prefetch.plan(_config("config.yaml"), REPO) if r["where"] == "hub"]
    _fake_cache(tmp_path, rows)
    configfile, prompt_rows = _paper_config_with_prompt_cache(tmp_path)
    assert prompt_rows  # config.yaml reads the authors' prompt files (prompts.remote)
    proc = _cli(tmp_path, "--configfile", configfile, "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all present (checked offline)" in proc.stdout
    assert proc.stdout.count(f"snapshots/{COMMIT}") == len(rows)
    assert proc.stdout.count(str(tmp_path / "prompt_cache")) == len(prompt_rows)
    # one model missing from the cache: exit 1, the line names its config key
    gone = next(r for r in rows if r["key"] == "judge.model")
    import shutil

    shutil.rmtree(tmp_path / f"models--{gone['ref'].replace('/', '--')}")
    proc = _cli(tmp_path, "--configfile", configfile, "--check")
    assert proc.returncode == 1
    line = next(x for x in proc.stdout.splitlines() if x.startswith("MISSING"))
    assert line.startswith(f"MISSING judge.model: {gone['ref']}") and "not in the local cache" in line
    assert "1 missing" in proc.stdout
    # one prompt file missing from the prompt cache: its line names the role's key, the file and the commit
    prompt_source.cache_file(prompt_rows[0]["spec"], prompt_rows[0]["path"]).unlink()
    proc = _cli(tmp_path, "--configfile", configfile, "--check")
    assert proc.returncode == 1 and "2 missing" in proc.stdout
    line = next(x for x in proc.stdout.splitlines() if x.startswith(f"MISSING {prompt_rows[0]['key']}"))
    assert f"{prompt_rows[0]['ref']}@{prompt_rows[0]['revision']} [prompt] not in the prompt cache" in line
