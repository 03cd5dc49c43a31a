"""prbench.manifest: results/manifest.json records what produced the tables (issue 24, item 4)."""
import json
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from helpers import REPO
from safetensors.torch import save_file

from prbench import manifest


def _model_folder(path, scale=1.0):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"hidden_size": 4}))
    save_file({"w": torch.full((2, 2), scale)}, str(path / "model.safetensors"))
    return path


def _write(tmp_path, refs, name="m.json"):
    return manifest.write_manifest(tmp_path / name, git={"commit": "x", "dirty": False}, config_sha256="c",
                                   packages={}, refs=refs, built={}, seeds={"seed": 0})


def test_changing_a_model_file_changes_the_manifest(tmp_path):
    folder = _model_folder(tmp_path / "rm")
    cfg = {"reward_models": {"a": {"kind": "classifier", "path": str(folder)}}}
    first = _write(tmp_path, manifest.describe_refs(cfg))
    again = _write(tmp_path, manifest.describe_refs(cfg), "again.json")
    assert first["models_and_data"] == again["models_and_data"]  # deterministic
    digest = first["models_and_data"]["reward_models.a.path"]["digest"]
    assert {f["file"] for f in digest["files"]} == {"config.json", "model.safetensors"}
    # a new tensor layout (dtype) changes the safetensors header, hence the digest
    save_file({"w": torch.zeros(2, 2, dtype=torch.float16)}, str(folder / "model.safetensors"))
    changed = _write(tmp_path, manifest.describe_refs(cfg), "changed.json")
    assert changed["models_and_data"]["reward_models.a.path"]["digest"]["sha256"] != digest["sha256"]
    # so does an edited config file
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8}))
    edited = manifest.describe_refs(cfg)["reward_models.a.path"]["digest"]["sha256"]
    assert edited != changed["models_and_data"]["reward_models.a.path"]["digest"]["sha256"]


def test_same_layout_new_weights_is_caught_by_size_or_header_only(tmp_path):
    """Documented limit: weights rewritten with the same layout keep the digest (no rehash of GBs);
    a file whose header is corrupt is reported as unreadable."""
    folder = _model_folder(tmp_path / "rm")
    d1 = manifest.folder_digest(folder)["sha256"]
    _model_folder(folder, scale=2.0)
    assert manifest.folder_digest(folder)["sha256"] == d1
    (folder / "model.safetensors").write_bytes(b"\x00\x01")
    files = manifest.folder_digest(folder)["files"]
    assert files[1]["header_sha256"].startswith("unreadable")


def test_paper_config_refs_are_all_found():
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    refs = manifest.config_refs(cfg)
    assert refs["judge.model"]["kind"] == "model"
    assert refs["retriever.model"]["ref"] == cfg["retriever"]["model"]
    assert refs["data.personalized.source"]["kind"] == "dataset"
    for name, entry in cfg["reward_models"].items():
        if "path" in entry:
            assert refs[f"reward_models.{name}.path"]["ref"] == entry["path"]


def test_hub_revision_read_from_a_faked_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    commit = "0123456789abcdef0123456789abcdef01234567"
    refs = tmp_path / "models--org--rm" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(commit)
    got = manifest.describe_ref("org/rm", "model", None)
    assert got == {"ref": "org/rm", "source": "hub", "kind": "model", "revision_pinned": None,
                   "revision_resolved": commit}
    assert manifest.describe_ref("org/other", "dataset", None)["revision_resolved"] is None
    assert manifest.describe_ref("org/x", "model", commit)["revision_resolved"] == commit


def test_git_state_and_seeds(tmp_path):
    assert manifest.git_state(tmp_path) == {"commit": None, "dirty": None}
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f").write_text("1")
    env = ["-c", "user.email=a@b", "-c", "user.name=t"]
    subprocess.run(["git", "-C", str(tmp_path), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), *env, "commit", "-qm", "x"], check=True)
    clean = manifest.git_state(tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    (tmp_path / "f").write_text("2")
    assert manifest.git_state(tmp_path)["dirty"] is True
    assert manifest.seeds({"seed": 3, "scoring": {"order_seed": 5, "x": 1}}) == {"seed": 3, "scoring.order_seed": 5}


@pytest.mark.dag
def test_manifest_rule_is_planned_with_the_tables(tmp_path):
    from helpers import dry_run

    run = dry_run(configfile=REPO / "configs/test.yaml", workdir=tmp_path)
    assert "manifest" in run.rules and "missing_rms" in run.rules


def test_manifest_names_the_cpu(tmp_path):
    """The run's manifest says which CPU made its tables: model name, family/model and the flags that
    change speed or numerics (bf16), read from /proc/cpuinfo's first processor."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 1\n"
                    "model name\t: AMD EPYC 7551 32-Core Processor\nflags\t\t: fpu sse avx2 fma sha_ni\n\n"
                    "processor\t: 1\nmodel name\t: other\nflags\t\t: avx512f\n")
    got = manifest.cpu_info(info)
    assert got == {"model_name": "AMD EPYC 7551 32-Core Processor", "vendor": "AuthenticAMD", "family": "23",
                   "model": "1", "flags": ["avx2", "fma"]}
    assert manifest.cpu_info(tmp_path / "missing")["flags"] == []
    here = manifest.devices()["cpu"]
    if Path("/proc/cpuinfo").is_file():
        first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
        assert here["model_name"] and here["model_name"] in first
        assert all(f in first.split() for f in here["flags"])
