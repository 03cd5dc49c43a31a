"""Model-free judges for the offline demo world: rate a BoN sample's text by the demo world's own
vocabulary (prbench.data.demo_vocab), with no encoder, no training and no calibration.

- `rubric_vocab_scores`: personal fit. Per rubric aspect (a pole of one dimension, e.g.
  budget-friendly vs premium) +1 if the text uses one of the pole's three words and none of the
  opposite pole's, -1 for the reverse, 0 when it uses both or neither; the score is the mean over
  the user's aspects, in [-1, 1]. Words are matched as whole tokens (`demo_world.tokens`: lower
  case, hyphenated words kept whole, so "old-school" never matches "school").
- `tip_quality_scores`: general quality. +1 if the text holds a sound closing tip (GOOD_TIPS), -1 a
  bad one (BAD_TIPS), 0 if neither or both are found (`tip_coverage` counts them). A tip is found
  when >= 2/3 of its template's distinctive words occur (words no other tip, template, topic, thing
  or pole word has), so the topic filled into the tip and small wording slips do not matter.

No RM and no judge of the pipeline uses this mechanism: the minilm judge rates aspects by MiniLM
cosine similarity (prbench.judge.minilm) and the RMs are learned models on MiniLM encoders
(classifiers, frozen-encoder heads: prbench.rms), besides the length-only control.
"""
from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from . import demo_vocab as V
from .demo_world import aspect_text, tokens

Pole = V.Pole
_OPPOSITE: dict[Pole, Pole] = {}
_BY_ASPECT: dict[str, Pole] = {}
for _w in V.WORLDS.values():
    for _a, _b in _w.dims:
        _OPPOSITE[_a], _OPPOSITE[_b] = _b, _a
        _BY_ASPECT[aspect_text(_a)], _BY_ASPECT[aspect_text(_b)] = _a, _b

_TIP_STOP = {"a", "an", "the", "in", "at", "or", "all", "only", "they", "who", "also", "each", "every", "not",
             "even", "most", "down", "away", "really", "never", "because", "without", "and", "of", "to", "for",
             "with", "you", "your", "it", "is", "any", "before", "one", "what", "try", "once", "if"}


def _tip_keys() -> list[tuple[int, frozenset[str]]]:
    """(sign, distinctive words) per tip template: +1 GOOD_TIPS, -1 BAD_TIPS."""
    tips = [(1, t) for t in V.GOOD_TIPS] + [(-1, t) for t in V.BAD_TIPS]
    words = [tokens(t.replace("{topic}", " ")) - _TIP_STOP for _, t in tips]
    other = set()
    for t in (*V.OPENERS, *V.ASPECT_SENTENCES, *V.QUESTION_TEMPLATES):
        other |= tokens(re.sub(r"\{\w+\}", " ", t))
    for w in V.WORLDS.values():
        other |= {x for t in (*w.topics, *w.things) for x in tokens(t)} | {a for d in w.dims for p in d for a in p.adjs}
    keys = []
    for i, (sign, _) in enumerate(tips):
        rest = set().union(*(ws for j, ws in enumerate(words) if j != i))
        keys.append((sign, frozenset(words[i] - rest - other)))
    return keys


TIP_KEYS = _tip_keys()
TIP_MIN_SHARE = 2 / 3


def poles_from_aspects(aspects: Sequence[str | dict]) -> tuple[Pole, ...]:
    """The Pole of each rubric aspect text (demo_world.aspect_text); KeyError for a non-demo aspect."""
    out = []
    for a in aspects:
        text = a["aspect"] if isinstance(a, dict) else str(a)
        if text not in _BY_ASPECT:
            raise KeyError(f"aspect {text!r} is no pole of the demo world (prbench.data.demo_vocab.WORLDS)")
        out.append(_BY_ASPECT[text])
    return tuple(out)


def aspect_fit(words: set[str], pole: Pole) -> int:
    """+1 own words only, -1 opposite pole's words only, 0 both or neither."""
    own = any(a in words for a in pole.adjs)
    opp = any(a in words for a in _OPPOSITE[pole].adjs)
    return int(own) - int(opp)


def rubric_vocab_scores(texts: Sequence[str], poles_per_text: Sequence[Sequence[Pole]]) -> np.ndarray:
    """Personal fit per text: the mean `aspect_fit` over that text's poles, in [-1, 1] (NaN: no poles)."""
    if len(texts) != len(poles_per_text):
        raise ValueError(f"{len(texts)} texts but {len(poles_per_text)} pole lists")
    out = np.full(len(texts), np.nan)
    for i, (text, poles) in enumerate(zip(texts, poles_per_text)):
        if poles:
            words = tokens(text or "")
            out[i] = np.mean([aspect_fit(words, p) for p in poles])
    return out


def _tip_found(text: str) -> tuple[bool, bool]:
    """(a sound tip found, a bad tip found)."""
    words = tokens(text or "")
    hit = {1: False, -1: False}
    for sign, key in TIP_KEYS:
        if len(key & words) >= math.ceil(TIP_MIN_SHARE * len(key)):
            hit[sign] = True
    return hit[1], hit[-1]


def tip_quality_scores(texts: Sequence[str]) -> np.ndarray:
    """General quality per text: +1 sound tip, -1 bad tip, 0 neither or both found."""
    return np.array([float(g) - float(b) for g, b in map(_tip_found, texts)])


def tip_coverage(texts: Sequence[str]) -> dict:
    """Counts of sound / bad / neither / both (ambiguous) and `coverage` = share with exactly one kind."""
    found = [_tip_found(t) for t in texts]
    c = {"n": len(found), "sound": sum(g and not b for g, b in found), "bad": sum(b and not g for g, b in found),
         "neither": sum(not g and not b for g, b in found), "both": sum(g and b for g, b in found)}
    c["coverage"] = (c["sound"] + c["bad"]) / c["n"] if c["n"] else float("nan")
    return c


_QID = re.compile(r"^(?P<user>[^/]+/.+)-q\d+$")


def user_of(question_id: str) -> str:
    """The demo user of a question, '{subset}/{split}-u{NNN}' from its id '{subset}/{split}-u{NNN}-q{k}'
    (prbench.data.personalized.make_pair_id; user ids repeat across subsets, so the subset stays)."""
    m = _QID.match(question_id)
    if not m:
        raise ValueError(f"question id {question_id!r} is not a demo-world id ('<subset>/<user>-q<k>')")
    return m["user"]


def other_users(subset_of_user: dict[str, str], rng) -> dict[str, str]:
    """user -> another user of the same subset: a derangement per subset (the subset's users shuffled
    by `rng`, a numpy Generator, and each mapped to the next in a cycle)."""
    by_subset: dict[str, list[str]] = {}
    for u in sorted(subset_of_user):
        by_subset.setdefault(subset_of_user[u], []).append(u)
    out = {}
    for subset, users in by_subset.items():
        if len(users) < 2:
            raise ValueError(f"subset {subset}: one user only, no other user to rate against")
        order = list(rng.permutation(users))
        out.update({u: order[(i + 1) % len(order)] for i, u in enumerate(order)})
    return out
