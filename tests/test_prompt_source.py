"""`prompts.remote` (prbench.prompt_source): prompt files read at run time from a repository at a
pinned commit, per role. The project holds none of the authors' text: a fixture repository of their
layout (prompts/sample.txt, pairwise_system.txt, pairwise_user.txt, evaluation.txt, chosen.txt,
rejected.txt) is written here with the project's own placeholder text and served through a `file://`
URL or a local folder, as GitHub's raw-file address serves the real one."""
from __future__ import annotations

import copy
import urllib.request

import pytest
import yaml
from helpers import REPO, dry_run, snakemake_env

from prbench import prefetch
from prbench import prompt_source as S
from prbench import prompts as P
from prbench.config import validate_schema
from prbench.validation import validate_config

COMMIT = "0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4"
OWNER_REPO = "Martin-qyma/Personalized-RewardBench"
# The fixture's files: the project's own placeholder text, the placeholders of the authors' files.
FIXTURE = {
    "prompts/sample.txt": "\n  FIXTURE policy prompt. Q={question}\nPOSTS={profile}\n\n",
    "prompts/pairwise_system.txt": "FIXTURE pairwise system turn.\n",
    "prompts/pairwise_user.txt": "FIXTURE pairwise user. Q={question} A={Response_A} B={Response_B}\n",
    "prompts/evaluation.txt": "FIXTURE rubric. Q={question} ANS={answer} ASPECTS={aspects}\n",
    "prompts/chosen.txt": "FIXTURE data generation {plan} {profile} {question}\n",
    "prompts/rejected.txt": "FIXTURE data generation {plan} {profile} {question}\n",
}
PAPER = yaml.safe_load((REPO / "config.yaml").read_text())


def fixture_repo(root, files=FIXTURE, commit=COMMIT):
    """<root>/<owner>/<repo>/<commit>/<path>: the layout of raw.githubusercontent.com."""
    for path, text in files.items():
        f = root / OWNER_REPO / commit / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    return root


def paper_prompts(tmp_path, base_url=None, **remote):
    """config.yaml's `prompts` section with the repository served from a fixture and a fresh cache."""
    cfg = copy.deepcopy(PAPER["prompts"])
    cfg["remote"].update(commit=COMMIT, cache=str(tmp_path / "cache"),
                         base_url=base_url or fixture_repo(tmp_path / "served").as_uri(), **remote)
    return cfg


@pytest.fixture
def online(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a fetch was attempted")
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def test_config_yaml_reads_the_authors_files_at_the_full_commit():
    remote = PAPER["prompts"]["remote"]
    assert remote["repo"] == OWNER_REPO and remote["commit"] == "a5c6814d22738c264f3c27576f54e50e04e16c10"
    assert S.remote_files(PAPER["prompts"]) == {
        "policy_user": "prompts/sample.txt", "pairwise_system": "prompts/pairwise_system.txt",
        "pairwise_user": "prompts/pairwise_user.txt", "rubric_list_user": "prompts/evaluation.txt"}
    spec = S.remote_spec(PAPER["prompts"])
    assert S.url(spec, "prompts/sample.txt") == ("https://raw.githubusercontent.com/Martin-qyma/"
                                                  "Personalized-RewardBench/a5c6814d22738c264f3c27576f54e50e04e16c10/"
                                                  "prompts/sample.txt")
    replica = yaml.safe_load((REPO / "configs" / "replica.yaml").read_text())
    assert replica["prompts"]["remote"] == {"commit": None}  # the replica keeps the project's text, offline
    assert S.remote_spec(replica["prompts"]) is None and S.remote_files(replica["prompts"]) == {}


def test_fetched_over_file_url_then_read_from_the_cache(tmp_path, online, monkeypatch):
    cfg = paper_prompts(tmp_path)
    tpl = P.load_templates(cfg)
    assert tpl.get("policy_user") == FIXTURE["prompts/sample.txt"].strip()  # stripped whole, as their loaders
    assert tpl.get("pairwise_system") == "FIXTURE pairwise system turn."
    assert f"{OWNER_REPO}@{COMMIT}:prompts/evaluation.txt" in tpl.origin
    cached = tmp_path / "cache" / OWNER_REPO / COMMIT / "prompts" / "sample.txt"
    assert cached.read_text() == FIXTURE["prompts/sample.txt"]  # the file as served
    assert not list((tmp_path / "cache").rglob("*.part"))  # written atomically, nothing left over
    # offline, the served copy gone: the cache alone serves every role, nothing is fetched
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("fetched"))
    cfg["remote"]["base_url"] = (tmp_path / "gone").as_uri()
    assert P.load_templates(cfg).texts == tpl.texts


def test_a_local_folder_serves_the_layout_too(tmp_path, online):
    cfg = paper_prompts(tmp_path, base_url=str(fixture_repo(tmp_path / "folder")))
    assert P.load_templates(cfg).get("pairwise_user").startswith("FIXTURE pairwise user.")


def test_a_missing_file_names_role_path_and_commit(tmp_path, online, monkeypatch):
    files = {k: v for k, v in FIXTURE.items() if k != "prompts/evaluation.txt"}
    cfg = paper_prompts(tmp_path, base_url=fixture_repo(tmp_path / "partial", files).as_uri())
    with pytest.raises(FileNotFoundError) as e:
        P.load_templates(cfg)
    msg = str(e.value)
    assert "prompts.remote.files.rubric_list_user" in msg and "'prompts/evaluation.txt'" in msg and COMMIT in msg
    assert "could not be fetched from file://" in msg
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline: never fetched, the cache is named
    cfg = paper_prompts(tmp_path / "off")
    with pytest.raises(FileNotFoundError, match=rf"policy_user: 'prompts/sample.txt' at commit {COMMIT} .*"
                                                r"not in the prompt cache .*make prefetch"):
        P.load_templates(cfg)


def test_schema_and_validation_of_the_section(tmp_path):
    cfg = copy.deepcopy(PAPER)
    cfg["prompts"]["remote"]["commit"] = "a5c6814"  # a short hash is not a pin
    with pytest.raises(ValueError, match="prompts.remote.commit"):
        validate_schema(cfg)
    cfg["prompts"]["remote"]["commit"] = COMMIT
    cfg["prompts"]["remote"]["files"] = {"policy_user": "../outside.txt"}
    with pytest.raises(ValueError, match="prompts.remote.files.policy_user: '../outside.txt' leaves the repository"):
        validate_config(cfg)
    cfg["prompts"]["remote"]["files"] = {"sample": "prompts/sample.txt"}  # not a role
    with pytest.raises(ValueError, match="prompts.remote.files"):
        validate_schema(cfg)


def test_validation_never_fetches(tmp_path, online, no_network):
    validate_config(copy.deepcopy(PAPER))  # config.yaml validates with an empty cache and no network
    cfg = copy.deepcopy(PAPER)  # the 0-1 reward prompt mapped remotely, absent from the folder: accepted
    own = tmp_path / "own"
    own.mkdir()
    for role in P.REQUIRED_ROLES:
        (own / f"{role}.txt").write_text("{question} {answer}")
    cfg["prompts"].update(templates=str(own))
    cfg["prompts"]["remote"]["files"] = {"reward_user": "prompts/evaluation.txt"}
    cfg["reward"] = {**(cfg.get("reward") or {}), "generative": "pointwise"}
    validate_config(cfg)
    cfg["prompts"]["remote"]["commit"] = None
    with pytest.raises(ValueError, match="reward_user"):
        validate_config(copy.deepcopy(cfg))


@pytest.mark.dag
def test_dag_parsing_never_fetches(tmp_path):
    """A dry run of config.yaml offline with an empty prompt cache: any read of a prompt file would
    fail the run (HF_HUB_OFFLINE set, nothing cached)."""
    cfg = copy.deepcopy(PAPER)
    cfg["prompts"]["remote"].update(cache=str(tmp_path / "empty"), base_url=str(tmp_path / "nowhere"))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run = dry_run("--forceall", configfile=path, env=snakemake_env(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1"))
    assert {"sample_bon", "judge_bon", "score_benchmark"} <= run.rules
    assert not (tmp_path / "empty").exists()


def _expected(tpl_role_text, **values):
    return P.fill(tpl_role_text, **values)


# Every prompt builder, as (builder, [roles of its messages in order]).
def _render_all(tpl):
    posts, cats = ("I climb on weekends.", "Vegetarian since 2019."), ("Sports", "")
    out = {}
    pol = P.policy_messages("Which rope?", posts, categories=cats, templates=tpl)
    out.update(zip(["policy_system", "policy_user"][-len(pol):], pol))
    pw = P.pairwise_judge_messages("Which rope?", "ans A", "ans B", posts, categories=cats, templates=tpl)
    out.update(zip(["pairwise_system", "pairwise_user"][-len(pw):], pw))
    pt = P.pointwise_judge_messages("Which rope?", "ans", posts, categories=cats, templates=tpl)
    out.update(zip(["pointwise_system", "pointwise_user"][-len(pt):], pt))
    rw = P.reward_judge_messages("Which rope?", "ans", posts, categories=cats, templates=tpl)
    out.update(zip(["reward_system", "reward_user"][-len(rw):], rw))
    (num,) = P.rubric_messages("Which rope?", "ans", ["price", "safety"], templates=tpl)
    out["rubric_user"] = num
    sys_, joined = P.rubric_messages("Which rope?", "ans", ["price", "safety"], templates=tpl,
                                     aspect_format="joined", system_turn=True)
    out["rubric_system"], out["rubric_list_user"] = sys_, joined
    values = {"question": "Which rope?", "answer": "ans", "Response_A": "ans A", "Response_B": "ans B",
              "profile": P.render_profile(posts, cats, None, tpl.post_format), "profile_block": P.profile_block(posts)}
    return out, values


def _role_values(role, values):
    keep = {"policy": ("question", "profile", "profile_block"),
            "pairwise": ("question", "Response_A", "Response_B", "profile", "profile_block"),
            "pointwise": ("question", "answer", "profile", "profile_block"),
            "reward": ("question", "answer", "profile", "profile_block")}.get(role.split("_")[0])
    if keep is None:  # rubric roles
        aspects = "1. price\n2. safety" if role == "rubric_user" else "price, safety"  # the system turn: joined
        return {"question": "Which rope?", "answer": "ans", "aspects": aspects}
    return {k: values[k] for k in keep}


@pytest.mark.parametrize("mapping", ["paper", "every_role"])
def test_every_builder_renders_the_fixture_text_in_its_roles(tmp_path, online, mapping):
    """config.yaml's mapping: the fixture's text arrives in each role that has an authors' file, the
    project's text (prompt_templates/default) in every other; then every role mapped to a fixture
    file of its own, to show no builder bypasses the source."""
    files = dict(FIXTURE)
    remote = {}
    if mapping == "every_role":
        files.update({f"prompts/{role}.txt": f"FIXTURE {role} " + " ".join("{" + p + "}" for p in P.PLACEHOLDERS)
                      for role in P.ROLES})
        remote["files"] = {role: f"prompts/{role}.txt" for role in P.ROLES}
    cfg = paper_prompts(tmp_path, base_url=fixture_repo(tmp_path / "served", files).as_uri(), **remote)
    tpl = P.load_templates(cfg)
    project = P.load_templates({"templates": "default"})
    mapped = S.remote_files(cfg)
    if mapping == "paper":
        assert set(mapped) == {"policy_user", "pairwise_system", "pairwise_user", "rubric_list_user"}
    rendered, values = _render_all(tpl)
    assert set(rendered) == {role for role in P.ROLES if tpl.get(role) is not None}  # an absent system turn: none
    if mapping == "every_role":
        assert set(rendered) == set(P.ROLES)
    for role, msg in rendered.items():
        want_role = "system" if role.endswith("_system") else "user"
        assert msg["role"] == want_role, role
        if role in mapped:
            text = files[mapped[role]].strip()
            assert msg["content"].startswith("FIXTURE"), role
        else:
            text = project.get(role)
            assert "FIXTURE" not in msg["content"], role
        assert msg["content"] == _expected(text, **_role_values(role, values)), role


def test_prefetch_fills_the_prompt_cache_and_checks_it(tmp_path, online, capsys):
    config = validate_schema(copy.deepcopy(PAPER))
    config["prompts"] = paper_prompts(tmp_path)
    rows = [r for r in prefetch.plan(config, REPO) if r["where"] == "prompt"]
    assert {r["key"] for r in rows} == {f"prompts.remote.files.{role}" for role in S.remote_files(config["prompts"])}
    assert all(r["revision"] == COMMIT for r in rows)
    assert not any(prefetch.fetch_one(r, check=True)[0] for r in rows)  # nothing cached yet
    assert all(prefetch.fetch_one(r, check=False)[0] for r in rows)  # fetched from the fixture
    ok, where = prefetch.fetch_one(rows[0], check=True)
    assert ok and where.startswith(str(tmp_path / "cache" / OWNER_REPO / COMMIT))
