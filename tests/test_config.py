"""Config validation: bad configs stop the run before any job starts, naming the key."""
import copy

import pytest
import yaml
from helpers import REPO, snakemake

from prbench.config import ConfigError
from prbench.validation import load_config, validate_config


def _load(name):
    with open(REPO / name) as fh:
        return yaml.safe_load(fh)


@pytest.mark.parametrize("name", ["config.yaml", "configs/demo.yaml"])
def test_shipped_configs_validate(name):
    cfg = load_config(REPO / name)
    assert cfg["bon"]["n"] >= max(cfg["bon"]["ks"])
    # defaults are filled in from the schema
    for entry in cfg["reward_models"].values():
        assert entry["trust_remote_code"] in (True, False)
        assert entry["use_safetensors"] is True


def test_paper_config_has_paper_models():
    cfg = load_config(REPO / "config.yaml")
    assert cfg["data"]["personalized"]["source"] == "QiyaoMa/Personalized-RewardBench"
    assert cfg["retriever"]["model"] == "facebook/contriever-msmarco"
    assert cfg["retriever"]["top_k"] == 10
    assert cfg["policies"]["qwen25_05b"]["path"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert cfg["judge"]["model"] == "Qwen/Qwen2.5-32B-Instruct"
    assert cfg["ppo"]["actor_lr"] == 5e-7 and cfg["ppo"]["critic_lr"] == 5e-6
    assert cfg["ppo"]["batch_size"] == 128 and cfg["ppo"]["mini_batch_size"] == 16
    assert cfg["ppo"]["response_length"] == 512
    # trust_remote_code is never on unless an entry opts in explicitly
    raw = _load("config.yaml")
    for name, entry in cfg["reward_models"].items():
        assert entry["trust_remote_code"] == raw["reward_models"][name].get("trust_remote_code", False)


def _mutations():
    def unknown_top(c):
        c["bogus_key"] = 1

    def unknown_nested(c):
        c["bon"]["nn"] = 16

    def wrong_type(c):
        c["bon"]["n"] = "sixteen"

    def k_too_big(c):
        c["bon"]["ks"] = [1, 2, 32]

    def missing_path(c):
        del c["reward_models"]["skywork_v2_llama8b"]["path"]

    def local_path_missing(c):
        c["reward_models"]["skywork_v2_llama8b"]["path"] = "./models/does-not-exist"

    def bad_kind(c):
        c["reward_models"]["skywork_v2_llama8b"]["kind"] = "magic"

    def bad_policy_ref(c):
        c["reward_models"]["skywork_v2_llama8b"] = {"kind": "generative_pairwise", "from_policy": "nope"}

    return [
        (unknown_top, "bogus_key"),
        (unknown_nested, "bon"),
        (wrong_type, "bon.n"),
        (k_too_big, "bon.ks"),
        (missing_path, "reward_models.skywork_v2_llama8b"),
        (local_path_missing, "reward_models.skywork_v2_llama8b.path"),
        (bad_kind, "reward_models.skywork_v2_llama8b.kind"),
        (bad_policy_ref, "reward_models.skywork_v2_llama8b.from_policy"),
    ]


@pytest.mark.parametrize("mutate,key", _mutations(), ids=lambda x: getattr(x, "__name__", str(x)))
def test_bad_config_names_key(mutate, key):
    cfg = copy.deepcopy(_load("config.yaml"))
    mutate(cfg)
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg)
    assert key in str(exc.value) or key.split(".")[-1] in str(exc.value)


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda c: c.__setitem__("bogus_key", 1), "bogus_key"),
        (lambda c: c["bon"].__setitem__("ks", [1, 64]), "bon.ks"),
        (lambda c: c["bon"].__setitem__("n", "x"), "'x' is not of type 'integer'"),
    ],
    ids=["unknown", "k_gt_n", "type"],
)
@pytest.mark.dag
def test_snakemake_stops_before_any_job(tmp_path, mutate, needle):
    cfg = copy.deepcopy(_load("config.yaml"))
    mutate(cfg)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = snakemake("-n", "--cores", "1", "--configfile", path, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert needle in out
    assert "Job stats" not in out


@pytest.mark.parametrize("change, key", [
    (lambda e: e.pop("path"), r"reward_models.skywork_v2_llama8b: RM kind 'classifier' needs exactly one model source"),
    (lambda e: e.update(from_policy="qwen25_05b"),
     r"reward_models.skywork_v2_llama8b: .*found \['path', 'from_policy'\]"),
    (lambda e: e.update(kind="length", use_profile=True), r"reward_models.skywork_v2_llama8b.use_profile"),
    (lambda e: e.update(kind="nope"), r"reward_models.skywork_v2_llama8b.kind"),
])
def test_kind_capabilities_are_checked_naming_the_key(change, key):
    """Whether a kind needs a model or can read the profile comes from the RM registry."""
    from prbench.validation import check_config

    cfg = _load("config.yaml")
    change(cfg["reward_models"]["skywork_v2_llama8b"])
    with pytest.raises((ConfigError, ValueError), match=key):
        check_config(cfg)


def test_policy_without_a_model_source_is_refused_naming_the_key():
    """train: false and no path passes the schema's oneOf; check_config names the key (the rules
    would otherwise stop on a bare KeyError)."""
    from prbench.validation import check_config

    cfg = _load("configs/demo.yaml")
    cfg["policies"]["demo_policy"]["train"] = False
    with pytest.raises(ConfigError, match=r"policies\.demo_policy: a policy needs a path unless train is true"):
        check_config(cfg)


def test_rm_kind_registry_capabilities():
    from prbench.rms import KINDS, kind_info

    schema = yaml.safe_load((REPO / "schemas/config.schema.yaml").read_text())
    kind = schema["properties"]["reward_models"]["additionalProperties"]["properties"]["kind"]
    assert "enum" not in kind, "the registry (prbench.rms.KINDS) is the only list of RM kinds"
    assert {"classifier", "generative_pairwise", "generative_pointwise", "length"} <= set(KINDS)
    assert not kind_info("length").needs_model and not kind_info("length").uses_gpu
    assert kind_info("generative_pairwise").pairwise and kind_info("classifier").needs_model


def test_baseline_kinds_come_from_one_registry():
    """Loader, official score and the config check all read prbench.data.baselines.KINDS."""
    from prbench.data import baselines
    from prbench.data.rewardbench import load_pairs
    from prbench.scoring.official import rewardbench_components

    schema = yaml.safe_load((REPO / "schemas/config.schema.yaml").read_text())
    kind = schema["properties"]["data"]["properties"]["baselines"]["additionalProperties"]["properties"]["kind"]
    assert "enum" not in kind, "the registry (prbench.data.baselines.KINDS) is the only list of baseline kinds"
    assert set(baselines.KINDS) == {"rewardbench", "rmbench", "rewardbench2"}
    assert baselines.loader("rewardbench") is load_pairs
    assert baselines.official_components("rewardbench") is rewardbench_components
    cfg = _load("config.yaml")
    cfg["data"]["baselines"]["rewardbench"]["kind"] = "magic"
    with pytest.raises(ConfigError, match=r"data\.baselines\.rewardbench\.kind: unknown baseline kind 'magic' "
                                          r"\(known: rewardbench, rmbench, rewardbench2\)"):
        validate_config(cfg)


def _demo_mutations():
    def reserved_baseline(c):
        c["data"]["baselines"]["personalized"] = {"kind": "rewardbench", "source": "x/y"}

    def demo_rmbench(c):
        c["data"]["baselines"]["general"]["kind"] = "rmbench"

    def rb2_train_split(c):  # best-of-n items are no training pairs
        c["data"]["baselines"]["rewardbench2"] = {"kind": "rewardbench2", "source": "results/demo/raw/rewardbench2",
                                                  "split": "test", "train_split": "test"}

    def heads_not_dividing(c):
        c["demo_training"]["policy"]["heads"] = 3

    def heads_default_not_dividing(c):
        c["demo_training"]["policy"] = {"hidden_size": 130}  # default heads: 4

    def trained_rm_not_classifier(c):
        c["reward_models"]["pers_profile"]["kind"] = "generative_pointwise"

    return [
        (reserved_baseline, "config key data.baselines.personalized:"),
        (demo_rmbench, "config key data.baselines.general.kind:"),
        (rb2_train_split, "config key data.baselines.rewardbench2.train_split:"),
        (heads_not_dividing, "config key demo_training.policy.heads:"),
        (heads_default_not_dividing, "config key demo_training.policy.heads:"),
        (trained_rm_not_classifier, "config key reward_models.pers_profile.kind:"),
    ]


@pytest.mark.parametrize("mutate,key", _demo_mutations(), ids=lambda x: getattr(x, "__name__", str(x)))
def test_cross_key_checks_live_in_check_config(mutate, key):
    cfg = copy.deepcopy(_load("configs/demo.yaml"))
    mutate(cfg)
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg)
    assert str(exc.value).startswith(key)


def test_schema_is_the_only_source_of_defaults():
    from prbench.config import section_schema, with_defaults

    assert with_defaults(None, "demo_training.rm") == {"layers": 3, "max_length": 160, "epochs": 1, "lr": 5e-5,
                                                       "batch_size": 16, "max_pairs": 900}
    pol = with_defaults({"epochs": 10}, "demo_training.policy")
    assert pol["epochs"] == 10 and pol["hidden_size"] == 128 and pol["max_length"] == 256
    assert with_defaults({"kind": "rewardbench", "source": "x"}, "data.baselines.general")["split"] == "train"
    # filling never aliases the schema's own default objects
    with_defaults({}, "prompts")["files"]["policy_user"] = "x.txt"
    assert (with_defaults({}, "prompts")["files"] == {}
            and section_schema("prompts")["properties"]["files"]["default"] == {})
    with pytest.raises(ConfigError, match="config key demo_training.policy.heads"):
        with_defaults({"heads": 0}, "demo_training.policy")


def test_null_world_judges_enum_is_the_codes_list():
    """The schema's enum of correlation.null_world.judges and the judges null_world knows are one list."""
    from prbench.analysis.null_world import NULL_JUDGES

    schema = yaml.safe_load((REPO / "schemas/config.schema.yaml").read_text())
    node = schema["properties"]["correlation"]["properties"]["null_world"]["properties"]["judges"]
    assert tuple(node["items"]["enum"]) == NULL_JUDGES


def test_schema_as_json_is_the_yaml_schema():
    """The JSON file rules/common.smk hands to validate() is the YAML schema, read with the pure
    Python loader here, and is gone once the block ends."""
    import json
    from pathlib import Path

    from prbench.config import SCHEMA_PATH, load_schema, schema_as_json

    with schema_as_json() as path:
        assert json.loads(Path(path).read_text()) == yaml.safe_load(SCHEMA_PATH.read_text()) == load_schema()
    assert not Path(path).exists()
