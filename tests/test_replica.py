"""Replica builders (prbench.replica): each non-RM replica builds offline, loads with
from_pretrained as the real hub model would, and the replica data passes the real adapters.

The RM replicas (prbench.replica.rms) have their own tests; configs/replica.yaml's full DAG run is
tests/test_replica_e2e.py (slow)."""
import json

import numpy as np
import pytest
import yaml
from helpers import REPO, SNAKEFILE, dry_run, snakemake

from prbench.replica import data as rdata
from prbench.replica.build import (
    QWEN_GENERATION_DEFAULTS,
    build_contriever,
    build_qwen2_chat,
    build_replica,
)

CONFIG = REPO / "configs" / "replica.yaml"


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    return build_qwen2_chat(tmp_path_factory.mktemp("qwen") / "m", seed=0, size="0.5b", repetition_penalty=1.1)


def test_qwen_replica_loads_like_qwen25_instruct(qwen_dir):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    cfg = AutoConfig.from_pretrained(qwen_dir)
    assert cfg.model_type == "qwen2" and cfg.architectures == ["Qwen2ForCausalLM"]
    assert (qwen_dir / "model.safetensors").exists() and not list(qwen_dir.glob("*.bin"))
    tok = AutoTokenizer.from_pretrained(qwen_dir)
    # Qwen's special tokens, each one token; pad = <|endoftext|>, eos = <|im_end|>, no bos
    for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>"):
        assert tok.convert_tokens_to_ids(t) != tok.unk_token_id
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1
    assert tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>" and tok.bos_token is None
    text = tok.apply_chat_template([{"role": "user", "content": "How do I start painting?"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\nHow do I start painting?<|im_end|>\n<|im_start|>assistant\n")
    with_system = tok.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                                           {"role": "assistant", "content": "A"}], tokenize=False)
    assert with_system == ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
                           "<|im_start|>assistant\nA<|im_end|>\n")
    ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
    # generation_config.json carries Qwen-style sampling defaults (the pipeline must override them)
    gen = json.loads((qwen_dir / "generation_config.json").read_text())
    for k, v in QWEN_GENERATION_DEFAULTS.items():
        assert gen[k] == v, k
    assert gen["eos_token_id"] == [tok.eos_token_id, tok.pad_token_id] and gen["pad_token_id"] == tok.pad_token_id
    assert GenerationConfig.from_pretrained(qwen_dir).repetition_penalty == 1.1
    model = AutoModelForCausalLM.from_pretrained(qwen_dir, use_safetensors=True)
    out = model.generate(input_ids=__import__("torch").tensor([ids]), max_new_tokens=3, do_sample=False,
                         repetition_penalty=1.0, pad_token_id=tok.pad_token_id)
    assert out.shape[1] <= len(ids) + 3


def test_qwen_replica_deterministic(tmp_path, qwen_dir):
    other = build_qwen2_chat(tmp_path / "again", seed=0, size="0.5b", repetition_penalty=1.1)
    assert (other / "model.safetensors").read_bytes() == (qwen_dir / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_text() == (qwen_dir / "tokenizer.json").read_text()
    third = build_qwen2_chat(tmp_path / "seed1", seed=1, size="0.5b")
    assert (third / "model.safetensors").read_bytes() != (qwen_dir / "model.safetensors").read_bytes()


def test_contriever_replica_encodes(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    from prbench.data.retrieval import DenseRetriever

    path = build_contriever(tmp_path / "contriever", seed=0)
    assert AutoConfig.from_pretrained(path).model_type == "bert"
    tok = AutoTokenizer.from_pretrained(path)
    enc = tok("Museum archive letters")
    assert enc["input_ids"][0] == tok.cls_token_id and enc["input_ids"][-1] == tok.sep_token_id
    assert tok.tokenize("MUSEUM") == tok.tokenize("museum")  # uncased, as bert-base-uncased
    ret = DenseRetriever(str(path), pooling="mean", device="cpu", use_safetensors=True)
    emb = ret.embed(["museum archive", "guitar chords and melody", "museum archive"])
    assert emb.shape == (3, 32) and np.isfinite(emb).all()
    np.testing.assert_allclose(emb[0], emb[2], rtol=1e-6)
    assert not np.allclose(emb[0], emb[1])


def test_dispatch_records_and_rejects(tmp_path):
    out = build_replica("contriever", tmp_path / "c", seed=3)
    assert json.loads((out / "replica.json").read_text()) == {"builder": "contriever", "options": {}, "seed": 3}
    with pytest.raises(ValueError, match="unknown replica builder 'nope'"):
        build_replica("nope", tmp_path / "x")
    with pytest.raises(ValueError, match="unknown size"):
        build_qwen2_chat(tmp_path / "q", size="70b")


def test_replica_judge_loads_through_transformers_backend(tmp_path):
    """The 32B judge's replica loads through the transformers judge; its random-weight replies are
    unparseable, and are counted as failures with score NaN, never a silent 0."""
    from prbench.judge import JudgeItem, load_judge

    path = build_qwen2_chat(tmp_path / "judge", seed=0, size="32b", repetition_penalty=1.05)
    judge = load_judge({"backend": "transformers", "model": str(path), "max_new_tokens": 6, "batch_size": 4,
                        "retries": 1, "device": "cpu"}, seed=0)
    assert judge.model.config.model_type == "qwen2" and judge.tokenizer.pad_token == "<|endoftext|>"
    res = judge.judge([JudgeItem("How do I start painting?", "Buy a watercolor set.", ("Practical", "Personal")),
                       JudgeItem("Best soup?", "Tomato soup with bread.", ("Uses the profile",))])
    assert len(res) == 2
    for r in res:
        if np.isnan(r.score):
            assert r.failures == 2 and r.ratings == [None] * len(r.ratings) and r.failed
        else:
            assert 0 <= r.score <= 2
    # the authors' judge protocol (config.yaml's judge keys) on the same replica: a system turn in
    # its chat template, joined aspects, the mean of the numbers found, a failure scored 0.0 but flagged
    paper = yaml.safe_load((REPO / "config.yaml").read_text())["judge"]
    keys = ("max_new_tokens", "retries", "system_turn", "aspect_format", "aggregate", "failure")
    authors = load_judge({"backend": "transformers", "model": str(path), "batch_size": 4, "device": "cpu",
                          **{k: paper[k] for k in keys}}, seed=0)
    item = JudgeItem("Best soup?", "Tomato soup with bread.", ("Uses the profile", "Short"))
    assert "<|im_start|>system" in authors._prompt(item) and "Uses the profile, Short" in authors._prompt(item)
    (r,) = authors.judge([item])
    assert r.failures <= 1 and (r.score == 0.0 and r.ratings == [] if r.failed else r.ratings)


def test_replica_data_in_hub_schemas(tmp_path):
    from prbench.data import personalized, rewardbench, rmbench
    from prbench.data.checks import DropLog

    files = rdata.write_data(tmp_path, seed=0, personalized_per_split=4, rewardbench_per_subset=2,
                             rmbench_per_domain=1)
    again = rdata.write_data(tmp_path / "again", seed=0, personalized_per_split=4, rewardbench_per_subset=2,
                             rmbench_per_domain=1)
    for a, b in zip(sum(files.values(), []), sum(again.values(), [])):
        assert open(a).read() == open(b).read()  # deterministic
    row = json.loads(open(files["personalized"][0]).readline())
    assert set(row) == set(personalized.FIELDS)
    assert set(row["profile"][0]) == {"id", "category", "text"}
    assert set(row["rubric_aspects"][0]) == {"aspect", "evidence", "reason"}
    for subset in rdata.PERSONALIZED_SUBSETS:
        for split in ("test", "train"):
            drops = DropLog("replica")
            rows = personalized.load_rows(str(tmp_path / "personalized"), subset, split, drops)
            assert len(rows) == 4 and drops.kept == 4 and all(r.posts and r.rubric_aspects for r in rows)
    test_q = {r["question"] + r["chosen"]
              for r in map(json.loads, open(tmp_path / "personalized/Art_and_Entertainment/test.jsonl"))}
    train_q = {r["question"] + r["chosen"]
               for r in map(json.loads, open(tmp_path / "personalized/Art_and_Entertainment/train.jsonl"))}
    assert not test_q & train_q
    drops = DropLog("replica")
    rb = rewardbench.load_pairs(str(tmp_path / "rewardbench"), "filtered", "rewardbench", drops)
    assert len(rb) == 2 * 23 and drops.kept == len(rb) and not drops.notes  # every subset name is real
    assert {p["subset"] for p in rb} == {s for subs in rewardbench.SECTIONS.values() for s in subs}
    drops = DropLog("replica")
    rm = rmbench.load_pairs(str(tmp_path / "rmbench"), "train", "rmbench", drops)
    assert len(rm) == 9 * 5 and {p["subset"] for p in rm} == set(rdata.RMBENCH_DOMAINS)
    assert {p["section"] for p in rm} == {"easy", "normal", "hard"}


def test_replica_config_mirrors_paper_config():
    """Same RM names, kinds and options as config.yaml; every hub id replaced by a replica folder
    that the config's replica section builds."""
    paper = yaml.safe_load((REPO / "config.yaml").read_text())
    study = yaml.safe_load((REPO / "configs" / "study.yaml").read_text())["reward_models"]
    rep = yaml.safe_load(CONFIG.read_text())
    # config.yaml's RMs, then configs/study.yaml entries of other families, benchmark-only
    extra = list(rep["reward_models"])[len(paper["reward_models"]):]
    assert list(rep["reward_models"])[:len(paper["reward_models"])] == list(paper["reward_models"])
    assert extra and set(extra) <= set(study)
    models = rep["replica"]["models"]
    for name in rep["reward_models"]:
        entry = (paper["reward_models"] if name in paper["reward_models"] else study)[name]
        r = rep["reward_models"][name]
        # max_new_tokens: a replica size (random models write no verdict); revision: a hub pin (a folder has
        # none); use_safetensors: false only for the hub's pickle weights (the replicas are safetensors)
        size_keys = ("path", "max_new_tokens", "revision", "use_safetensors")
        if name in extra:
            assert r["downstream"] is False, name
            r = {k: v for k, v in r.items() if k != "downstream"}
        assert {k: v for k, v in r.items() if k not in size_keys} == \
            {k: v for k, v in entry.items() if k not in size_keys}, name
        folder = r["path"].removeprefix("results/replica/models/")
        assert models[folder]["replicates"] == entry["path"], name
    refs = [(rep["policies"][p]["path"], paper["policies"][p]["path"]) for p in paper["policies"]]
    refs.append((rep["retriever"]["model"], paper["retriever"]["model"]))
    for ref, hub in refs:
        assert models[ref.removeprefix("results/replica/models/")]["replicates"] == hub
    judge_replica = [m for m in models.values() if m["replicates"] == paper["judge"]["model"]]
    assert judge_replica and judge_replica[0]["builder"] == "qwen2_chat"
    # the paper's judge path: same backend and protocol keys, on the replica trained to answer in the
    # format; departures are replica sizes (max_new_tokens) and one sampled retry (config.yaml: none)
    assert models[rep["judge"]["model"].removeprefix("results/replica/models/")] is judge_replica[0]
    assert "judge_training" in judge_replica[0]
    for key in ("backend", "system_turn", "aspect_format", "aggregate", "failure", "batch_size", "params_b"):
        assert rep["judge"][key] == paper["judge"][key], key
    assert paper["judge"]["retries"] == 0 and rep["judge"]["retries"] == 1
    # the same prompt set, but the replica's roles all in the project's words (config.yaml reads the
    # authors' files for some, prompts.remote; the replica runs offline and fetches nothing)
    assert {k: v for k, v in rep["prompts"].items() if k != "remote"} == \
        {k: v for k, v in paper["prompts"].items() if k != "remote"}
    assert rep["prompts"]["remote"]["commit"] is None and paper["prompts"]["remote"]["files"]["policy_user"]
    assert set(rep["data"]["personalized"]["downstream"]) == set(paper["data"]["personalized"]["downstream"])
    for key in ("kl_coef", "reward_scale", "eval_greedy", "eval_top_p", "gae_lambda", "cliprange_value", "lr_scheduler",
                "weight_decay", "adam_eps", "vf_coef", "max_grad_norm", "drop_last"):
        assert rep["ppo"][key] == paper["ppo"][key], key
    assert rep["bon"]["top_p"] == paper["bon"]["top_p"]
    # the authors' RM-side protocol: downstream reward input, pairwise benchmark rules
    assert rep["reward"] == paper["reward"]
    for key in ("order_seed", "order_rule", "pairwise_parse", "pairwise_failure", "add_special_tokens",
                "truncation"):
        assert rep["scoring"][key] == paper["scoring"][key], key
    assert {n: rep["reward_models"][n].get("both_orders") for n in paper["reward_models"]} == \
        {n: e.get("both_orders") for n, e in paper["reward_models"].items()}
    for src in [rep["data"]["personalized"]["source"], rep["data"]["personalized"]["downstream"]["source"]] + \
            [b["source"] for b in rep["data"]["baselines"].values()]:
        assert src.startswith("results/replica/data/")
    assert {k: b["kind"] for k, b in rep["data"]["baselines"].items()} == \
        {k: b["kind"] for k, b in paper["data"]["baselines"].items()}
    assert sorted(set(rdata.data_files("results/replica/data"))) == ["personalized", "rewardbench", "rewardbench2",
                                                                      "rmbench"]


@pytest.mark.dag
def test_replica_rules_lint_clean_and_dry_run(tmp_path):
    """rules/replica.smk is included only with a `replica:` section: lint it with configs/replica.yaml,
    and check that a dry run builds every replica and feeds them to the model-consuming jobs."""
    proc = snakemake("--snakefile", SNAKEFILE, "--directory", tmp_path, "--configfile", CONFIG, "--lint")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Lints for" not in out, out
    out = dry_run(workdir=tmp_path, configfile=CONFIG, cores=2,
                  targets=["results/data/reports/personalized.json",
                           "results/bon/qwen25_05b/rm_scores/internlm2_7b_reward.jsonl"]).out
    assert out.count("rule replica_model:") == 3, out  # retriever, policy, internlm2 RM
    assert "rule replica_data:" in out
