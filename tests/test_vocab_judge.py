"""The model-free vocabulary judges of the demo world (prbench.data.vocab_judge): fast, no Snakemake."""
import json
import random

import numpy as np
import pytest

from prbench.data import demo_vocab as V
from prbench.data import demo_world as dw
from prbench.data import vocab_judge as vj

ART = V.WORLDS["Art_and_Entertainment"]
CLASSIC, MODERN = ART.dims[0]
LIGHT, SERIOUS = ART.dims[1]
POPULAR, INDIE = ART.dims[2]


@pytest.fixture(scope="module")
def rows():
    """Small personalized test splits of every demo world, with their subset."""
    out = []
    for subset, world in V.WORLDS.items():
        out += [(subset, r) for r in dw.personalized_split(world, subset, "test", 60, 8, 6, seed=3)]
    return out


def test_rubric_scores_on_hand_made_texts():
    texts = ["Pick old-school films, lighthearted yet serious, nothing but popular hits.",
             "Classical schools of modern art.",  # 'classical' / 'school' are no pole words; 'modern' is
             "Nothing here."]
    poles = [(CLASSIC, LIGHT, INDIE), (CLASSIC,), ()]
    got = vj.rubric_vocab_scores(texts, poles)
    # text 0: classic +1 (old-school only), lighthearted 0 (serious too), indie -1 (popular only)
    assert got[0] == 0.0 and got[1] == -1.0 and np.isnan(got[2])
    assert vj.rubric_vocab_scores([texts[0]], [(CLASSIC, POPULAR)])[0] == 1.0
    assert vj.rubric_vocab_scores([texts[0]], [(MODERN, SERIOUS)])[0] == -0.5


def test_chosen_beats_rejected_on_the_users_poles(rows):
    poles = [vj.poles_from_aspects(r["rubric_aspects"]) for _, r in rows]
    ch = vj.rubric_vocab_scores([r["chosen"] for _, r in rows], poles)
    rj = vj.rubric_vocab_scores([r["rejected"] for _, r in rows], poles)
    assert np.mean(ch > rj) >= 0.95
    assert ch.mean() > 0.9 and rj.mean() < -0.9


def test_tips_found_on_every_generated_answer_with_the_right_sign():
    rng = random.Random(7)
    texts, truth = [], []
    for k in range(300):
        world = list(V.WORLDS.values())[k % 3]
        topic = rng.choice(world.topics)
        dims = rng.sample(world.dims, 3)
        text = dw._answer(rng, world, [rng.choice(d) for d in dims], topic)
        good = any(t.format(topic=topic) in text for t in V.GOOD_TIPS)
        bad = any(t.format(topic=topic) in text for t in V.BAD_TIPS)
        assert good != bad
        texts.append(text)
        truth.append(1.0 if good else -1.0)
    assert np.array_equal(vj.tip_quality_scores(texts), np.array(truth))
    cov = vj.tip_coverage(texts)
    assert cov["coverage"] == 1.0 and cov["neither"] == 0 and cov["both"] == 0
    assert 0 < cov["sound"] < len(texts)


def test_tip_matching_tolerates_another_topic_and_reports_neither():
    text = "Buy the most expensive gear for chess before you try it."  # not a demo topic, 'once' dropped
    assert vj.tip_quality_scores([text, "Just have fun."]).tolist() == [-1.0, 0.0]
    assert vj.tip_coverage([text, "Just have fun."])["neither"] == 1


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _results(tmp_path, rows, folder="bon/pol"):
    keys, prompts, samples = [], [], []
    for subset, r in rows:
        q = f"{subset}/{r['id']}"
        keys.append({"pair_id": q, "question_id": q, "subset": subset, "rubric_aspects": r["rubric_aspects"],
                     "narrative": r["narrative"]})
        prompts.append({"question_id": q, "subset": subset, "question": r["question"], "profile": []})
        samples += [{"question_id": q, "subset": subset, "sample_idx": i, "answer": a}
                    for i, a in enumerate((r["chosen"], r["rejected"]))]
    samples.sort(key=lambda s: (s["question_id"], s["sample_idx"]))
    _write(tmp_path / "data/judge_keys/personalized.jsonl", keys)
    _write(tmp_path / "data/prompts/eval.jsonl", prompts)
    _write(tmp_path / folder / "samples.jsonl", samples)


def test_ratings_poles_and_another_user(tmp_path, rows):
    """null_world.VocabRatings on a run's files: each sample's fit to its own user's poles (the chosen
    answers fit, the rejected ones do not), another user of the same subset per draw (a derangement,
    seeded by the draw's generator), and unknown aspects refused."""
    from prbench.analysis.null_world import VocabRatings
    from prbench.io import read_jsonl

    _results(tmp_path, rows)
    samples = read_jsonl(tmp_path / "bon/pol/samples.jsonl")
    qids = sorted({r["question_id"] for r in samples})
    vr = VocabRatings(samples, qids, 2, tmp_path / "data/judge_keys/personalized.jsonl")
    by_q = {f"{s}/{r['id']}": r for s, r in rows}
    own = vr.rate(vr.user)
    expect = np.array([vj.rubric_vocab_scores([by_q[q]["chosen"], by_q[q]["rejected"]],
                                              [vj.poles_from_aspects(by_q[q]["rubric_aspects"])] * 2) for q in qids])
    np.testing.assert_allclose(own, expect)
    assert own[:, 0].mean() > 0.9 and own[:, 1].mean() < -0.9
    subset_of = {u: vr.subset[u] for u in vr.user_poles}
    other = vj.other_users(subset_of, np.random.default_rng(1))
    assert other == vj.other_users(subset_of, np.random.default_rng(1)) != vj.other_users(
        subset_of, np.random.default_rng(2))
    assert set(other) == set(subset_of)
    for u, v in other.items():
        assert u != v and subset_of[u] == subset_of[v]  # another user, same subset
    np.testing.assert_allclose(vr.other_user(np.random.default_rng(1)), vr.rate([other[u] for u in vr.user]))
    with pytest.raises(ValueError, match="one user only"):
        vj.other_users({"a/u1": "a", "b/u2": "b", "b/u3": "b"}, np.random.default_rng(0))
    with pytest.raises(KeyError):
        vj.poles_from_aspects(["Prefers nothing in particular."])
