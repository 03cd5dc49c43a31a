"""The offline demo world: a seeded, synthetic miniature of Personalized RewardBench.

Construction (a fair miniature of the paper's):
- Each subset has 10 preference dimensions, each with two opposite poles (e.g. budget-friendly
  vs premium). A user holds one pole on 3 dimensions (the rubric aspects). Dimensions are
  dealt round-robin and poles alternate per dimension, so every pole is equally common: the
  question and the answer alone cannot tell which answer the user prefers.
- Profile posts reveal the poles (on-preference posts use the pole's words), mixed with noise
  posts about daily life. rubric_aspects cite a revealing post as evidence; the narrative
  summarises the user. Both are judge-only.
- chosen follows the user's 3 poles, rejected follows the opposite poles; both come from the
  same opener / aspect-sentence / tip template family (several wordings per slot), so they
  are equally fluent. Each answer ends with one practical tip drawn at random, sound or bad
  (GOOD_TIPS / BAD_TIPS, the general baseline's correctness contrast), independently for chosen
  and rejected: answers differ in general quality, which the personalized label ignores, so
  the policy's samples differ in both and a general-quality judge (`judge.general_reference`,
  the mirror world: configs/mirror.yaml) can rate the same samples. Lengths are balanced by
  construction: chosen is strictly longer (words and characters) in exactly every other pair, so
  a length-only scorer sits at 50%.
- Users in the train and test splits are disjoint (`demo.users_per_subset` is divided between
  the splits in proportion to their sizes): a model must read the profile, not remember users.
- The general baseline (RewardBench schema, real subset names) contrasts answers of different
  general quality - off-topic (relevance), vague (completeness), bad advice / wrong arithmetic
  (correctness), needless refusal - with no personal content in either answer.
- A baseline of kind rewardbench2 gets best-of-4 items in RewardBench 2's schema from the same
  vocabulary (prbench.data.demo_bestof).

The words and templates themselves (dimensions, poles, sentence templates, tips, refusals) live
in prbench.data.demo_vocab; this module only draws from them.
"""
from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass
from pathlib import Path

from ..config import with_defaults
from ..io import write_jsonl
from ..seeding import stable_seed
from .demo_bestof import rewardbench2_split
from .demo_vocab import (
    ASPECT_SENTENCES,
    BAD_TIPS,
    EXTRA_TOPICS,
    GENERAL_CLOSERS,
    GENERAL_KINDS,
    GENERAL_OPENERS,
    GOOD_TIPS,
    NOISE_CATEGORY,
    NOISE_POSTS,
    OPENERS,
    POST_TEMPLATES,
    QUESTION_TEMPLATES,
    REFUSALS,
    VAGUE,
    WORLD_ORDER,
    WORLDS,
    XSTEST,
    Pole,
    World,
)

log = logging.getLogger("prbench.data.demo_world")

N_ASPECTS = 3


def _words(text: str) -> int:
    return len(text.split())


def _pick2(rng: random.Random, adjs: tuple[str, ...]) -> tuple[str, str]:
    a, b = rng.sample(list(adjs), 2)
    return a, b


def world_for(subset: str, index: int) -> World:
    if subset in WORLDS:
        return WORLDS[subset]
    w = WORLDS[WORLD_ORDER[index % len(WORLD_ORDER)]]
    log.warning("subset %r has no dedicated demo world; reusing %r", subset, w.label)
    return w


@dataclass
class User:
    uid: str
    aspects: list[tuple[int, int]]  # (dimension index, pole index)
    posts: list[dict]
    evidence: dict  # dimension -> post dict


def _aspect_sentence(rng: random.Random, pole: Pole, topic: str, template: str) -> str:
    a, b = _pick2(rng, pole.adjs)
    return template.format(a=a, b=b, topic=topic)


ANSWER_WORDS = (40, 70)
SOUND_TIP_SHARE = 0.5  # share of personalized answers whose closing tip is sound (the rest: bad advice)


def _answer(rng: random.Random, world: World, poles: list[Pole], topic: str) -> str:
    """Opener, one sentence per pole (shuffled wording), a closing tip, sound or bad at random;
    40-70 words."""
    for _ in range(200):
        sentences = rng.sample(ASPECT_SENTENCES, len(poles))
        body = [_aspect_sentence(rng, p, topic, t) for p, t in zip(poles, sentences)]
        tips = GOOD_TIPS if rng.random() < SOUND_TIP_SHARE else BAD_TIPS
        text = " ".join([rng.choice(OPENERS).format(topic=topic), *body, rng.choice(tips).format(topic=topic)])
        if ANSWER_WORDS[0] <= _words(text) <= ANSWER_WORDS[1]:
            return text
    raise RuntimeError(f"could not draw an answer of {ANSWER_WORDS} words for topic {topic!r}")


def balanced_pair(rng: random.Random, make_a, make_b, chosen_longer: bool, tries: int = 2000) -> tuple[str, str]:
    """Draw (chosen, rejected) until chosen is strictly longer (or strictly shorter) in both
    words and characters. Alternating the target makes length carry no signal."""
    for _ in range(tries):
        a, b = make_a(), make_b()
        dw, dc = _words(a) - _words(b), len(a) - len(b)
        if chosen_longer and dw > 0 and dc > 0:
            return a, b
        if not chosen_longer and dw < 0 and dc < 0:
            return a, b
    raise RuntimeError(f"could not balance answer lengths (last pair: {a!r} / {b!r}); the templates are too uniform")


def _make_users(rng: random.Random, world: World, prefix: str, n_users: int, posts_per_user: int,
                category: str) -> list[User]:
    n_dims = len(world.dims)
    # deal dimensions round-robin (each user gets N_ASPECTS distinct ones) and alternate poles
    deck: list[int] = []
    users = []
    pole_next = {d: rng.randrange(2) for d in range(n_dims)}
    n_on = max(N_ASPECTS, posts_per_user // 2)
    for u in range(n_users):
        dims: list[int] = []
        while len(dims) < min(N_ASPECTS, n_dims):
            free = [x for x in deck if x not in dims]
            if not free:
                fresh = list(range(n_dims))
                rng.shuffle(fresh)
                deck = fresh + deck
                continue
            d = free[-1]
            deck.remove(d)
            dims.append(d)
        aspects = []
        for d in dims:
            aspects.append((d, pole_next[d]))
            pole_next[d] = 1 - pole_next[d]
        uid = f"{prefix}u{u:03d}"
        texts: list[tuple[str, str, int | None]] = []
        for k in range(n_on):
            d, p = aspects[k % len(aspects)]
            pole = world.dims[d][p]
            a, b = _pick2(rng, pole.adjs)
            texts.append((rng.choice(POST_TEMPLATES).format(a=a, b=b, thing=rng.choice(world.things)), category, d))
        for text in rng.sample(NOISE_POSTS, min(len(NOISE_POSTS), max(0, posts_per_user - n_on))):
            texts.append((text, NOISE_CATEGORY, None))
        rng.shuffle(texts)
        posts, evidence = [], {}
        for k, (text, cat, d) in enumerate(texts):
            post = {"id": f"{uid}-p{k:02d}", "category": cat, "text": text}
            posts.append(post)
            if d is not None and d not in evidence:
                evidence[d] = post
        users.append(User(uid, aspects, posts, evidence))
    return users


def aspect_text(pole: Pole) -> str:
    """The rubric aspect the judge rates: names every wording the answers may use."""
    return f"Prefers {pole.adjs[0]}, {pole.adjs[1]} or {pole.adjs[2]} choices, valuing {pole.gloss}."


def _rubric(world: World, user: User) -> tuple[list[dict], str]:
    aspects, glosses = [], []
    for d, p in user.aspects:
        pole = world.dims[d][p]
        ev = user.evidence[d]
        aspects.append({
            "aspect": aspect_text(pole),
            "evidence": f"{ev['id']}: {ev['text']}",
            "reason": f"The user's posts keep favoring {pole.adjs[2]} options, "
                      f"which shows they care about {pole.gloss}.",
        })
        glosses.append(pole.gloss)
    narrative = (f"This user is into {world.label}. Across their posts they consistently value "
                 f"{glosses[0]}, {glosses[1]} and {glosses[2]}, and they expect advice that reflects these tastes "
                 f"rather than generic suggestions.")
    return aspects, narrative


def personalized_split(world: World, subset: str, split: str, n_pairs: int, n_users: int, posts_per_user: int,
                       seed: int) -> list[dict]:
    """Rows of one subset/split in the hub's exact schema."""
    rng = random.Random(stable_seed(seed, "demo_world", subset, split))
    category = subset
    users = _make_users(rng, world, f"{split}-", max(1, n_users), posts_per_user, category)
    order = [i % len(users) for i in range(n_pairs)]
    rng.shuffle(order)
    counts: dict[int, int] = {}
    rows = []
    for i, u_idx in enumerate(order):
        user = users[u_idx]
        q_no = counts.get(u_idx, 0)
        counts[u_idx] = q_no + 1
        topic = rng.choice(world.topics)
        question = rng.choice(QUESTION_TEMPLATES).format(topic=topic)
        good = [world.dims[d][p] for d, p in user.aspects]
        bad = [world.dims[d][1 - p] for d, p in user.aspects]
        chosen, rejected = balanced_pair(rng, lambda good=good, topic=topic: _answer(rng, world, good, topic),
                                         lambda bad=bad, topic=topic: _answer(rng, world, bad, topic),
                                         chosen_longer=(i % 2 == 0))
        aspects, narrative = _rubric(world, user)
        rows.append({
            "id": f"{user.uid}-q{q_no}",
            "question": question,
            "profile": [dict(p) for p in user.posts],
            "rubric_aspects": aspects,
            "narrative": narrative,
            "category": category,
            "chosen": chosen,
            "rejected": rejected,
        })
    return rows


# ---- general baseline --------------------------------------------------------------------
def _general_topics() -> list[str]:
    topics = [t for w in WORLDS.values() for t in w.topics] + list(EXTRA_TOPICS)
    return list(dict.fromkeys(topics))


def _advice(rng, topic, tips, extra=()):
    body = [t.format(topic=topic) for t in (*tips, *extra)]
    return " ".join([rng.choice(GENERAL_OPENERS).format(topic=topic), *body, rng.choice(GENERAL_CLOSERS)])


def _general_item(rng: random.Random, kind: str, topics: list[str], chosen_longer: bool) -> tuple[str, str, str]:
    if kind == "arithmetic":
        a, b, c = rng.randint(11, 99), rng.randint(2, 9), rng.randint(11, 99)
        prompt = f"What is {a} + {b} x {c}? Please show the steps."
        right = b * c
        wrong = right + rng.choice([-10, -1, 1, 10])
        lead = ("Multiplication comes first: {b} x {c} = {p}. Then add {a}: {a} + {p} = {s}. So the answer is {s}.",
                "First do the multiplication, {b} x {c} = {p}, and then the addition, {a} + {p} = {s}. "
                "The final answer is {s}.")

        def mk(prod):
            return rng.choice(lead).format(a=a, b=b, c=c, p=prod, s=a + prod)

        ch, rj = balanced_pair(rng, lambda: mk(right), lambda: mk(wrong), chosen_longer)
        return prompt, ch, rj
    if kind == "over_refusal":
        prompt, answer = rng.choice(XSTEST)
        longer = [r for r in REFUSALS if _words(r) > _words(answer) and len(r) > len(answer)]
        shorter = [r for r in REFUSALS if _words(r) < _words(answer) and len(r) < len(answer)]
        pool = shorter if chosen_longer else longer
        refusal = rng.choice(pool) if pool else rng.choice(REFUSALS)
        return prompt, answer, refusal
    topic = rng.choice(topics)
    prompt = rng.choice(QUESTION_TEMPLATES).format(topic=topic)
    if kind == "relevance":
        # an off-topic answer about a topic of similar length, so length stays uninformative
        others = [t for t in topics if t != topic and abs(len(t) - len(topic)) <= 8
                  and abs(_words(t) - _words(topic)) <= 1]
        make_c = lambda: _advice(rng, topic, rng.sample(GOOD_TIPS, 3))  # noqa: E731
        make_r = lambda: _advice(rng, rng.choice(others), rng.sample(GOOD_TIPS, 3))  # noqa: E731
    elif kind == "completeness":
        make_c = lambda: _advice(rng, topic, rng.sample(GOOD_TIPS, 3))  # noqa: E731
        make_r = lambda: _advice(rng, topic, rng.sample(GOOD_TIPS, 1), rng.sample(VAGUE, 2))  # noqa: E731
    else:  # correctness: bad advice
        make_c = lambda: _advice(rng, topic, rng.sample(GOOD_TIPS, 3))  # noqa: E731
        make_r = lambda: _advice(rng, topic, rng.sample(GOOD_TIPS, 1) + rng.sample(BAD_TIPS, 2))  # noqa: E731
    ch, rj = balanced_pair(rng, make_c, make_r, chosen_longer)
    return prompt, ch, rj


def general_split(split: str, n: int, seed: int, name: str = "general") -> list[dict]:
    """Rows in RewardBench's schema: id, prompt, chosen, chosen_model, rejected, rejected_model, subset."""
    rng = random.Random(stable_seed(seed, "demo_world", name, split))
    topics = _general_topics()
    rows = []
    # every kind alternates chosen-longer / chosen-shorter on its own, so length is at chance per subset
    seen_per_kind: dict[str, int] = {}
    for i in range(n):
        subset, kind = GENERAL_KINDS[i % len(GENERAL_KINDS)]
        j = seen_per_kind.get(kind, 0)
        seen_per_kind[kind] = j + 1
        prompt, ch, rj = _general_item(rng, kind, topics, chosen_longer=(j % 2 == 0))
        rows.append({
            "id": f"{split}-{i:05d}",
            "prompt": prompt,
            "chosen": ch,
            "chosen_model": "demo-writer-good",
            "rejected": rj,
            "rejected_model": f"demo-writer-{kind.replace('_', '-')}",
            "subset": subset,
        })
    return rows


# ---- entry point -------------------------------------------------------------------------
def _split_users(total: int, sizes: dict[str, int]) -> dict[str, int]:
    """Disjoint users per split, proportional to the split sizes (at least 1 each)."""
    n = sum(sizes.values()) or 1
    out = {s: max(1, round(total * k / n)) for s, k in sizes.items() if k > 0}
    return out


def generate(config: dict, personalized_dir: str | Path, general_dirs: dict[str, str | Path]) -> dict:
    """Write the demo world in the hub schemas. Returns a summary (counts per file)."""
    demo = with_defaults(config.get("demo"), "demo")  # the schema holds the sizes' defaults
    data = with_defaults(config["data"], "data")
    seed = int(config["seed"])
    pcfg = data["personalized"]
    sizes = {pcfg["split"]: int(demo["test_per_subset"])}
    if pcfg["train_split"]:
        sizes[pcfg["train_split"]] = int(demo["train_per_subset"])
    users = _split_users(int(demo["users_per_subset"]), sizes)
    summary: dict[str, int] = {}
    for idx, subset in enumerate(pcfg["subsets"]):
        world = world_for(subset, idx)
        for split, n in sizes.items():
            rows = personalized_split(world, subset, split, n, users.get(split, 1), int(demo["posts_per_user"]), seed)
            path = Path(personalized_dir) / subset / f"{split}.jsonl"
            summary[str(path)] = write_jsonl(path, rows)
    for name, folder in general_dirs.items():
        bcfg = data["baselines"][name]
        if bcfg["kind"] == "rewardbench2":  # best-of-4 items (prbench.data.demo_bestof), test split only
            path = Path(folder) / f"{bcfg['split']}.jsonl"
            rows = rewardbench2_split(bcfg["split"], int(demo["rewardbench2_per_subset"]), seed, name)
            summary[str(path)] = write_jsonl(path, rows)
            continue
        gsizes = {bcfg["split"]: int(demo["general_test"])}
        if bcfg["train_split"]:
            gsizes[bcfg["train_split"]] = int(demo["general_train"])
        for split, n in gsizes.items():
            path = Path(folder) / f"{split}.jsonl"
            summary[str(path)] = write_jsonl(path, general_split(split, n, seed, name))
    for path, n in summary.items():
        log.info("wrote %d rows to %s", n, path)
    return summary


def demo_outputs(config: dict) -> dict[str, list[str]]:
    """Files rule demo_world writes (used by rules/data.smk)."""
    data = with_defaults(config["data"], "data")
    pcfg = data["personalized"]
    splits = [pcfg["split"]] + ([pcfg["train_split"]] if pcfg["train_split"] else [])
    out = {"personalized": [f"{pcfg['source'].rstrip('/')}/{s}/{sp}.jsonl" for s in pcfg["subsets"] for sp in splits]}
    for name, folder in demo_general_dirs(config).items():
        b = data["baselines"][name]
        bs = [b["split"]] + ([b["train_split"]] if b["train_split"] else [])
        out[name] = [f"{folder.rstrip('/')}/{sp}.jsonl" for sp in bs]
    return out


DEMO_PREFIX = "results/demo/"


def demo_general_dirs(config: dict) -> dict[str, str]:
    """Baselines the demo world generates: those whose source lies under results/demo/ (each a
    RewardBench- or RewardBench 2-schema baseline: prbench.validation.check_config)."""
    baselines = config["data"].get("baselines") or {}  # a validated config always has the key
    return {name: baselines[name]["source"] for name in sorted(baselines)  # sorted: key order reruns nothing
            if baselines[name]["source"].startswith(DEMO_PREFIX)}


TOKEN_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def tokens(text: str) -> set[str]:
    """Lower-cased word set (hyphenated words kept whole): used by the generator's own checks."""
    return set(TOKEN_RE.findall(text.lower()))
