"""Prompt templates as files (prbench.prompts): bundled sets, the post format, folders written
in the authors' placeholder style, and errors naming the config key."""
import pytest
from helpers import REPO

from prbench import prompts as P

POSTS = ["Loved the noir retrospective.", "Baked rye bread."]
CATS = ["Art_and_Entertainment", "Lifestyle_and_Personal_Development"]


@pytest.fixture(autouse=True)
def _reset_active():
    yield
    P._ACTIVE = None  # other tests rely on the process fallback


def test_default_set_follows_the_authors_structure():
    tpl = P.load_templates({"templates": "default"})
    msgs = P.policy_messages("Which film tonight?", POSTS, categories=CATS, templates=tpl)
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    assert "fewer than 100 words" in user
    # the authors' profile layout: numbered posts with their category, then the text
    assert "Post 1 (Category: Art_and_Entertainment):\nLoved the noir retrospective.\n" \
           "Post 2 (Category: Lifestyle_and_Personal_Development):\nBaked rye bread." in user
    assert "Which film tonight?" in user and "{" not in user
    pair = P.pairwise_judge_messages("Which film?", "Watch Vertigo.", "Watch anything.", POSTS, templates=tpl)
    assert [m["role"] for m in pair] == ["system", "user"]
    assert "**Reasoning:**" in pair[0]["content"] and "**Result:** A" in pair[0]["content"]
    # the project's own layout (the authors' file is one `prompts.remote` away): labelled blocks
    assert pair[1]["content"] == (
        "Someone asked the question below and two candidate answers to it follow, labelled A and B.\n\n"
        "[Question]\nWhich film?\n\n[Answer A]\nWatch Vertigo.\n\n[Answer B]\nWatch anything.")
    assert pair[1]["content"].index("Watch Vertigo.") < pair[1]["content"].index("Watch anything.")
    rub = P.rubric_messages("Which film?", "Watch Vertigo.", ["likes noir", "short films"], templates=tpl)
    assert "1. likes noir\n2. short films" in rub[-1]["content"] and "Aspect <number>: <rating>" in rub[-1]["content"]


def test_top_k_and_missing_categories():
    tpl = P.load_templates(None)
    text = P.render_profile(POSTS, (), top_k=1, post_format=tpl.post_format)
    assert text == f"Post 1 (Category: {P.UNKNOWN_CATEGORY}):\nLoved the noir retrospective."
    assert P.render_profile(POSTS, CATS, post_format="- [{category}] {text}") == \
        "- [Art_and_Entertainment] Loved the noir retrospective.\n" \
        "- [Lifestyle_and_Personal_Development] Baked rye bread."


def test_compact_set_is_the_legacy_layout():
    """configs/demo.yaml selects `compact`: byte for byte the prompts the demo was built on."""
    tpl = P.load_templates({"templates": "compact", "post_format": "{i}. {text}"})
    assert P.policy_messages("Q?", POSTS, templates=tpl) == [
        {"role": "user", "content": "Here are some of my previous posts:\n1. Loved the noir retrospective.\n"
                                    "2. Baked rye bread.\n\nQ?"}]
    assert P.policy_messages("Q?", [], templates=tpl) == [{"role": "user", "content": "Q?"}]
    pw = P.pairwise_judge_messages("Q?", "x", "y", POSTS, use_profile=False, templates=tpl)[0]["content"]
    assert pw == ('Which answer better fits my question and my interests?\nQuestion: Q?\n\n[Answer A]\nx\n\n'
                  '[Answer B]\ny\n\nReply with exactly one line: "Result: A" or "Result: B".')


def test_authors_placeholder_style_folder(tmp_path):
    """A folder in the authors' layout (their file names via prompts.files, their placeholders
    {question} {profile} {Response_A} {Response_B} {answer} {aspects}, literal replacement so
    other braces survive) renders exactly; the wording here is ours, written for the test."""
    (tmp_path / "sample.txt").write_text("Q = {question}\nP =\n{profile}\nKeep {braces} and {0} as written.\n")
    (tmp_path / "pairwise_system.txt").write_text("Pick the better one. End with **Result:** A or B.")
    (tmp_path / "pairwise_user.txt").write_text("Question:\n```\n{question}\n```\nA:\n{Response_A}\nB:\n{Response_B}")
    (tmp_path / "evaluation.txt").write_text("{question} | {answer} | {aspects} | reply as [x, y]")
    (tmp_path / "pointwise.txt").write_text("Score {answer} for {question} given {profile}.")
    cfg = {"templates": str(tmp_path), "post_format": "Post {i} (Category: {category}):\n{text}",
           "files": {"policy_user": "sample.txt", "rubric_user": "evaluation.txt", "pointwise_user": "pointwise.txt"}}
    P.configure(cfg)  # the active set, as a workflow job does
    msgs = P.policy_messages("Best noir?", POSTS, categories=CATS)
    assert msgs == [{"role": "user", "content":
                     "Q = Best noir?\nP =\nPost 1 (Category: Art_and_Entertainment):\nLoved the noir retrospective.\n"
                     "Post 2 (Category: Lifestyle_and_Personal_Development):\nBaked rye bread.\n"
                     "Keep {braces} and {0} as written."}]
    pair = P.pairwise_judge_messages("Best noir?", "Vertigo {answer}", "Anything")
    assert pair == [{"role": "system", "content": "Pick the better one. End with **Result:** A or B."},
                    {"role": "user", "content": "Question:\n```\nBest noir?\n```\nA:\nVertigo {answer}\nB:\nAnything"}]
    rub = P.rubric_messages("Q", "ans", ["a1", "a2"])
    assert rub == [{"role": "user", "content": "Q | ans | 1. a1\n2. a2 | reply as [x, y]"}]
    # the judge id follows the active rubric template, so cached ratings never cross prompts
    from prbench import judge as J

    custom = J._rubric_hash()
    P.configure({"templates": "default"})
    assert J._rubric_hash() != custom


def test_values_are_never_re_expanded():
    tpl = P.load_templates(None)
    out = P.pointwise_judge_messages("{profile}?", "{question}", POSTS, templates=tpl)[-1]["content"]
    assert "Question: {profile}?" in out and "[Answer]\n{question}" in out


def test_bad_template_config_names_the_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="prompts.templates"):
        P.load_templates({"templates": str(tmp_path / "nope")})
    (tmp_path / "policy_user.txt").write_text("{question}")
    with pytest.raises(FileNotFoundError, match="pairwise_user"):
        P.load_templates({"templates": str(tmp_path)})
    with pytest.raises(ValueError, match="prompts.post_format"):
        P.load_templates({"post_format": "Post {n}: {text}"})
    with pytest.raises(ValueError, match="question"):
        P.policy_messages("  ", POSTS)


def test_config_schema_accepts_prompt_keys_and_fills_defaults():
    from prbench.validation import load_config

    cfg = load_config(str(REPO / "config.yaml"))
    assert cfg["prompts"]["templates"] == "default"
    assert cfg["prompts"]["post_format"] == P.AUTHORS_POST_FORMAT
    P.load_templates(cfg["prompts"], remote=False)  # the paper config's set loads (its prompts.remote roles:
    # tests/test_prompt_source.py, against a fixture repository; nothing is fetched here)
    demo = load_config(str(REPO / "configs/demo.yaml"))
    assert P.load_templates(demo["prompts"]).get("policy_system") is None


@pytest.mark.parametrize("posts", [(), tuple(POSTS)])
def test_compact_files_equal_the_legacy_format_strings(posts):
    tpl = P.load_templates({"templates": "compact"})
    ctx = P.profile_block(posts)
    assert P.pairwise_judge_messages("Q", "x", "y", posts, templates=tpl)[0]["content"] == \
        P.PAIRWISE_TEMPLATE.format(context=ctx, question="Q", a="x", b="y")
    assert P.pointwise_judge_messages("Q", "x", posts, templates=tpl)[0]["content"] == \
        P.POINTWISE_TEMPLATE.format(context=ctx, question="Q", answer="x")
