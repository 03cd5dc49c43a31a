"""Every text a reward model, policy or pairwise judge-RM sees is built here, and only here.

Leakage guard: these builders take the question, the retrieved profile posts and the answer
as plain arguments. They never receive a benchmark record, so `narrative` and `rubric_aspects`
(the judge's answer key, stored in a separate judge-key file) cannot reach an RM or policy input.
tests/test_leakage.py proves it over a whole generated benchmark.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import prompt_source as _source
from .config import entry_with_defaults

# Fields of a benchmark row an RM or policy may see. Anything else is judge-only.
MODEL_VISIBLE_FIELDS = ("question", "profile")
JUDGE_ONLY_FIELDS = ("narrative", "rubric_aspects")


@dataclass(frozen=True)
class ScoreRequest:
    """One response to score: the question, the top-k profile posts (ranked), the answer.
    `categories` (optional) holds each profile post's category, parallel to `profile`."""

    question: str
    answer: str
    profile: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()


@dataclass(frozen=True)
class PairRequest:
    """One chosen/rejected comparison (for pairwise RMs)."""

    question: str
    chosen: str
    rejected: str
    profile: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Prompt templates: one text file per role, in a folder (config key `prompts.templates`).
# Placeholders (the authors' style, replaced literally so other braces stay as written):
#   {question} {profile} {profile_block} {answer} {Response_A} {Response_B} {aspects}
# {profile} = the top-k posts rendered with the post format, joined by newlines;
# {profile_block} = "Here are some of my previous posts:" + numbered posts + blank line, or ""
# when there is no profile (the compact layout). A missing *_system.txt means no system turn.
# ---------------------------------------------------------------------------------------------
TEMPLATE_ROOT = Path(__file__).parent / "prompt_templates"
ROLES = ("policy_system", "policy_user", "pairwise_system", "pairwise_user",
         "pointwise_system", "pointwise_user", "reward_system", "reward_user", "rubric_system", "rubric_user",
         "rubric_list_user")
REQUIRED_ROLES = ("policy_user", "pairwise_user", "pointwise_user", "rubric_user")  # reward_user: checked on use
PLACEHOLDERS = ("question", "profile", "profile_block", "answer", "Response_A", "Response_B", "aspects")
AUTHORS_POST_FORMAT = "Post {i} (Category: {category}):\n{text}"
UNKNOWN_CATEGORY = "unknown"


@dataclass(frozen=True)
class PromptTemplates:
    """A template set: role -> text (None for an absent optional system turn), + post format."""

    texts: tuple[tuple[str, str | None], ...]
    post_format: str = AUTHORS_POST_FORMAT
    origin: str = ""
    strip_answers: bool = True  # config key prompts.strip_answers (`answer_text`)

    def get(self, role: str) -> str | None:
        return dict(self.texts).get(role)


def template_dir(name_or_path: str) -> Path:
    """A bundled set name (prompt_templates/<name>) or a folder path."""
    bundled = TEMPLATE_ROOT / name_or_path
    if "/" not in name_or_path and bundled.is_dir():
        return bundled
    return Path(name_or_path)


def load_templates(prompts_cfg: dict | None = None, *, remote: bool = True) -> PromptTemplates:
    """Read a template set named by the config section `prompts` ({templates, post_format, files,
    remote}). Roles mapped by `prompts.remote.files` are read from that repository at its pinned
    commit (prbench.prompt_source: the cache, fetched when missing and online); every other role from
    the `templates` folder. `remote=False` (validation) reads the folder only and never fetches."""
    cfg = entry_with_defaults(prompts_cfg or {}, "prompts")  # the schema holds the defaults
    folder = template_dir(str(cfg["templates"]))
    if not folder.is_dir():
        raise FileNotFoundError(f"config key prompts.templates: no template folder {str(folder)!r} "
                                f"(bundled sets: {sorted(p.name for p in TEMPLATE_ROOT.iterdir() if p.is_dir())})")
    files = {role: f"{role}.txt" for role in ROLES}
    files.update(cfg["files"] or {})
    spec = _source.remote_spec(cfg)
    mapped = _source.remote_files(cfg)
    fetched = mapped if remote else {}
    texts = {}
    for role in ROLES:
        f = folder / files[role]
        if role in fetched:
            texts[role] = _source.read(spec, role, fetched[role])
        elif f.is_file():
            texts[role] = f.read_text(encoding="utf-8").rstrip("\n")
        elif role in REQUIRED_ROLES and role not in mapped:
            raise FileNotFoundError(f"config key prompts.templates: {str(folder)!r} has no {files[role]!r} "
                                    f"(role {role}; rename it with prompts.files.{role})")
        else:
            texts[role] = None
    fmt = str(cfg["post_format"])
    try:
        fmt.format(i=1, category="c", text="t")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"config key prompts.post_format: {fmt!r} is not a format with {{i}}, {{category}}, "
                         f"{{text}} ({e})") from None
    origin = str(folder)
    if fetched:
        origin += " + " + ", ".join(f"{role}: {_source.where(spec, path)}" for role, path in fetched.items())
    return PromptTemplates(tuple(texts.items()), fmt, origin, bool(cfg["strip_answers"]))


_ACTIVE: PromptTemplates | None = None
FALLBACK_PROMPTS = {"templates": "compact", "post_format": "{i}. {text}"}


def configure(prompts_cfg: dict | None) -> PromptTemplates:
    """Select the template set every builder uses in this process (called by the workflow
    scripts with the config section `prompts`; absent -> the bundled default)."""
    global _ACTIVE
    _ACTIVE = load_templates(prompts_cfg)
    logging.getLogger("prbench").info("prompt templates: %s", _ACTIVE.origin)
    return _ACTIVE


def answer_text(text: str, templates: PromptTemplates | None = None) -> str:
    """A generated answer as the RM, the judge and the policy tables see it: stripped of surrounding
    whitespace (`prompts.strip_answers: true`, the project's) or as generated (false, the authors')."""
    tpl = templates or active_templates()
    return text.strip() if tpl.strip_answers else text


def active_templates() -> PromptTemplates:
    """The configured set; a process that never called `configure` (library use, unit tests)
    gets FALLBACK_PROMPTS, the compact layout of earlier versions. Workflow jobs always configure
    (the config's `prompts` section; schema default: the bundled `default` set)."""
    global _ACTIVE
    if _ACTIVE is None:
        _ACTIVE = load_templates(FALLBACK_PROMPTS)
    return _ACTIVE


def fill(template: str, **values: str) -> str:
    """Replace each known `{placeholder}` literally (the authors' convention): braces in the
    template that name no placeholder stay as written, and values are never re-expanded."""
    unknown = set(values) - set(PLACEHOLDERS)
    if unknown:
        raise ValueError(f"unknown placeholders {sorted(unknown)}")
    pattern = re.compile("|".join(re.escape("{" + k + "}") for k in values)) if values else None
    if pattern is None:
        return template
    return pattern.sub(lambda m: values[m.group(0)[1:-1]], template)


def render_profile(profile: Sequence[str], categories: Sequence[str] = (), top_k: int | None = None,
                   post_format: str | None = None, strip: bool = True) -> str:
    """The top-k posts in rank order, each through the post format ({i} from 1, {category}, {text});
    each post's text stripped of surrounding whitespace unless `strip` is false."""
    posts = list(profile)[: top_k if top_k is not None else len(profile)]
    cats = list(categories)
    fmt = post_format if post_format is not None else active_templates().post_format
    return "\n".join(fmt.format(i=i, category=(cats[i - 1] if i - 1 < len(cats) and cats[i - 1] else UNKNOWN_CATEGORY),
                                text=p.strip() if strip else p) for i, p in enumerate(posts, 1))


def profile_block(profile: Sequence[str], top_k: int | None = None) -> str:
    posts = list(profile)[: top_k if top_k is not None else len(profile)]
    if not posts:
        return ""
    lines = "\n".join(f"{i}. {p.strip()}" for i, p in enumerate(posts, 1))
    return f"Here are some of my previous posts:\n{lines}\n\n"


# Where a classifier RM's user turn puts the profile (RM spec key `profile_layout`):
#   "block" (the benchmark's layout): the "Here are some of my previous posts:" block, then the question;
#   "after_question" (`reward.profile: always`, the authors' downstream reward input): their BoN/score.py
#   and PPO/reward_server.py give a discriminative RM the user turn `query + profile`, the question
#   string directly followed (no separator) by the top-k posts, each "Post i (Category: c):\ntext",
#   joined by newlines (BoN/sample.py format_profile); the answer is the assistant turn. Mirrored here
#   with the project's formatting: the question, a blank line, the posts through `prompts.post_format`
#   (`reward.profile_join: blank_line`);
#   "appended" (`reward.profile_join: authors`): their join exactly, the question as given directly
#   followed by the posts through `prompts.post_format`, nothing stripped.
PROFILE_LAYOUTS = ("block", "after_question", "appended")


def user_turn(question: str, profile: Sequence[str] = (), use_profile: bool = True, top_k: int | None = None,
              layout: str = "block", categories: Sequence[str] = ()) -> str:
    """The RM user turn: the question and, with use_profile, the top-k profile posts (`layout`)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    if layout not in PROFILE_LAYOUTS:
        raise ValueError(f"profile layout {layout!r}: expected one of {PROFILE_LAYOUTS}")
    if layout == "after_question":
        posts = render_profile(profile, categories, top_k) if use_profile else ""
        return f"{question.strip()}\n\n{posts}" if posts else question.strip()
    if layout == "appended":
        return question + (render_profile(profile, categories, top_k, strip=False) if use_profile else "")
    block = profile_block(profile, top_k) if use_profile else ""
    return f"{block}{question.strip()}"


def rm_messages(req: ScoreRequest, use_profile: bool, top_k: int | None = None, layout: str = "block") -> list[dict]:
    """Pointwise RM chat: user = question and profile (`user_turn`), assistant = answer."""
    return [
        {"role": "user", "content": user_turn(req.question, req.profile, use_profile, top_k, layout, req.categories)},
        {"role": "assistant", "content": req.answer},
    ]


def _profile_values(profile: Sequence[str], categories: Sequence[str], use_profile: bool,
                    top_k: int | None, tpl: PromptTemplates) -> dict:
    if not use_profile:
        return {"profile": "", "profile_block": ""}
    return {"profile": render_profile(profile, categories, top_k, tpl.post_format),
            "profile_block": profile_block(profile, top_k)}


def _chat(tpl: PromptTemplates, role: str, **values: str) -> list[dict]:
    system = tpl.get(f"{role}_system")
    msgs = [{"role": "system", "content": fill(system, **values)}] if system else []
    msgs.append({"role": "user", "content": fill(tpl.get(f"{role}_user"), **values)})
    return msgs


# The compact set's wording as the str.format strings of earlier versions ({context} = the
# profile block, {a}/{b} = the answers). Kept because the demo policy's tokenizer is trained on
# this text (prbench.training.policy.train_demo_policy); prompts are built from the template files.
PAIRWISE_TEMPLATE = (
    "{context}Which answer better fits my question and my interests?\n"
    "Question: {question}\n\n[Answer A]\n{a}\n\n[Answer B]\n{b}\n\n"
    "Reply with exactly one line: \"Result: A\" or \"Result: B\"."
)
POINTWISE_TEMPLATE = (
    "{context}Rate how well the answer fits my question and my interests on a scale from 1 to 10.\n"
    "Question: {question}\n\n[Answer]\n{answer}\n\n"
    "Reply with exactly one line: \"Score: <number>\"."
)


def _check_question(question: str) -> str:
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    return question.strip()


def policy_messages(question: str, profile: Sequence[str] = (), top_k: int | None = None,
                    categories: Sequence[str] = (), templates: PromptTemplates | None = None) -> list[dict]:
    """Policy prompt (BoN sampling, PPO): [system,] user with the question and top-k profile posts."""
    tpl = templates or active_templates()
    return _chat(tpl, "policy", question=_check_question(question),
                 **_profile_values(profile, categories, True, top_k, tpl))


def pairwise_judge_messages(question: str, a: str, b: str, profile: Sequence[str] = (),
                            use_profile: bool = True, top_k: int | None = None,
                            categories: Sequence[str] = (), templates: PromptTemplates | None = None) -> list[dict]:
    tpl = templates or active_templates()
    return _chat(tpl, "pairwise", question=_check_question(question), Response_A=a, Response_B=b,
                 **_profile_values(profile, categories, use_profile, top_k, tpl))


def pointwise_judge_messages(question: str, answer: str, profile: Sequence[str] = (),
                             use_profile: bool = True, top_k: int | None = None,
                             categories: Sequence[str] = (), templates: PromptTemplates | None = None) -> list[dict]:
    tpl = templates or active_templates()
    return _chat(tpl, "pointwise", question=_check_question(question), answer=answer,
                 **_profile_values(profile, categories, use_profile, top_k, tpl))


ASPECT_FORMATS = ("numbered", "joined")


def rubric_aspects_text(aspects: Sequence[str], aspect_format: str = "numbered") -> str:
    """The {aspects} value: a numbered list, one aspect a line ("numbered"), or the aspect names
    joined by ", " on one line ("joined", the authors' format)."""
    if aspect_format == "numbered":
        return "\n".join(f"{i}. {a.strip()}" for i, a in enumerate(aspects, 1))
    if aspect_format == "joined":
        return ", ".join(a.strip() for a in aspects)
    raise ValueError(f"config key judge.aspect_format: {aspect_format!r} is not one of {list(ASPECT_FORMATS)}")


def rubric_user_role(aspect_format: str = "numbered") -> str:
    """The template role of the rubric prompt's user turn: `rubric_user` asks for one "Aspect i: r"
    line per numbered aspect; `rubric_list_user` (joined aspects have no numbers to name) asks for a
    bare list of ratings in aspect order."""
    return "rubric_list_user" if aspect_format == "joined" else "rubric_user"


def reward_judge_messages(question: str, answer: str, profile: Sequence[str] = (),
                          use_profile: bool = True, top_k: int | None = None,
                          categories: Sequence[str] = (), templates: PromptTemplates | None = None) -> list[dict]:
    """A generative RM as a 0-1 pointwise scorer of one answer (`reward.generative: pointwise`)."""
    tpl = templates or active_templates()
    if tpl.get("reward_user") is None:
        raise FileNotFoundError(f"config key prompts.templates: {tpl.origin!r} has no reward_user.txt, the 0-1 "
                                "scoring prompt of reward.generative: pointwise "
                                "(rename it with prompts.files.reward_user)")
    return _chat(tpl, "reward", question=_check_question(question), answer=answer,
                 **_profile_values(profile, categories, use_profile, top_k, tpl))


# The generative RM's downstream 0-1 prompt per stage (config keys reward.generative_prompt_bon and
# reward.generative_prompt_ppo; GRPO reads the PPO key; RM spec key `reward_prompt`): which template
# role's user turn the scorer gets, after the `reward_system` turn (the authors' system turn is a string
# literal in their scripts, so the project's judge system text stands in for it):
#   "reward" (the project's): `reward_user`, the question, the profile and the answer;
#   "rubric" (the authors' BoN, BoN/score.py's default `prompts/evaluation.txt`): the rubric prompt
#     `rubric_list_user`, filled like their scorer fills it: {question}, {profile}, {answer}; its
#     {aspects} are never filled (judge-only, and the authors leave it literal too);
#   "policy" (the authors' PPO, PPO/train.sh passes `prompts/sample.txt` to PPO/reward_server.py): the
#     policy prompt `policy_user`, filled with {question}, {profile} and {answer}; a policy prompt has
#     no {answer}, so the scorer never sees the response (`response_blind`).
REWARD_PROMPTS = ("reward", "rubric", "policy")
_REWARD_PROMPT_ROLE = {"reward": "reward_user", "rubric": "rubric_list_user", "policy": "policy_user"}


def reward_prompt_role(prompt: str) -> str:
    """The template role whose text is the user turn of downstream prompt `prompt`."""
    if prompt not in _REWARD_PROMPT_ROLE:
        raise ValueError(f"generative reward prompt {prompt!r} (config keys reward.generative_prompt_bon, "
                         f"reward.generative_prompt_ppo): expected one of {list(REWARD_PROMPTS)}")
    return _REWARD_PROMPT_ROLE[prompt]


def response_blind(prompt: str, templates: PromptTemplates | None = None) -> bool:
    """True when the user turn of downstream prompt `prompt` has no {answer}: the scorer's input, and
    so its reward, cannot depend on the response."""
    tpl = templates or active_templates()
    text = tpl.get(reward_prompt_role(prompt))
    return text is not None and "{answer}" not in text


def reward_prompt_messages(prompt: str, question: str, answer: str, profile: Sequence[str] = (),
                           use_profile: bool = True, top_k: int | None = None, categories: Sequence[str] = (),
                           templates: PromptTemplates | None = None) -> list[dict]:
    """The generative RM's 0-1 downstream prompt `prompt` (REWARD_PROMPTS) for one answer."""
    role = reward_prompt_role(prompt)
    if prompt == "reward":
        return reward_judge_messages(question, answer, profile, use_profile, top_k, categories, templates)
    tpl = templates or active_templates()
    user = tpl.get(role)
    if user is None:
        raise FileNotFoundError(f"config key prompts.templates: {tpl.origin!r} has no {role}.txt, the user turn "
                                f"of the generative reward prompt {prompt!r} (rename it with prompts.files.{role})")
    values = dict(question=_check_question(question), answer=answer,
                  **_profile_values(profile, categories, use_profile, top_k, tpl))
    system = tpl.get("reward_system")
    msgs = [{"role": "system", "content": fill(system, **values)}] if system else []
    msgs.append({"role": "user", "content": fill(user, **values)})
    return msgs


def rubric_messages(question: str, answer: str, aspects: Sequence[str],
                    templates: PromptTemplates | None = None, aspect_format: str = "numbered",
                    system_turn: bool = False) -> list[dict]:
    """Rubric judge prompt (judge-only input): [system turn,] user turn with the question, the
    answer and the aspects (config keys judge.aspect_format, judge.system_turn; the system text is
    the template set's rubric_system.txt, read only when system_turn is true)."""
    tpl = templates or active_templates()
    role = rubric_user_role(aspect_format)
    user = tpl.get(role)
    if user is None:
        raise FileNotFoundError(f"config key prompts.templates: {tpl.origin!r} has no {role}.txt "
                                f"(needed by judge.aspect_format={aspect_format!r})")
    values = dict(question=question.strip(), answer=answer_text(answer, tpl),
                  aspects=rubric_aspects_text(aspects, aspect_format))
    msgs = []
    if system_turn:
        system = tpl.get("rubric_system")
        if system is None:
            raise FileNotFoundError(f"config key judge.system_turn: true, but template set {tpl.origin!r} has no "
                                    "rubric_system.txt")
        msgs.append({"role": "system", "content": fill(system, **values)})
    msgs.append({"role": "user", "content": fill(user, **values)})
    return msgs


def render_chat(tokenizer, messages: list[dict], add_generation_prompt: bool = False) -> str:
    """Apply the tokenizer's own chat template; tokenizers without one get a plain fallback."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    parts = [f"{m['role']}: {m['content']}" for m in messages]
    if add_generation_prompt:
        parts.append("assistant:")
    return "\n".join(parts)
