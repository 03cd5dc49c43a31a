"""Reward models behind one interface (`prbench.rms.base.RewardModel`).

`load_reward_model(spec)` builds one from an RM spec: the validated config entry plus `name`
and `path` (rules/common.smk `rm_spec`). Optional runtime keys a caller may add: `seed` (config
seed; pairwise order shuffle), `max_length`, `max_tokens_per_batch`, `max_batch_size`, `progress`.

Kinds are a registry with capabilities (`KINDS`): the rules, the config checks and PPO ask
`kind_info(kind)` instead of testing kind names. Adding a kind = one class beside this file, one
`Kind` entry here and its name in the schema's `kind` enum. Adding a model *interface* to the
`classifier` kind (a reward model with its own head or read position) = one adapter in
`rms/adapters.py`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..registry import load_ref
from .base import CompareOutput, RewardModel, ScoreOutput


@dataclass(frozen=True)
class Kind:
    """What an RM kind needs and does. `reads_profile` is per entry (`use_profile`)."""

    name: str
    impl: str                # "module:Class" under prbench.rms, imported on first use
    needs_model: bool        # loads weights (path / train / from_policy); False: computed from the text
    uses_gpu: bool           # jobs scoring with it ask for GPUs outside the demo
    pairwise: bool           # compare() is native; score() is derived from comparisons
    generates: bool          # scores by generating text (parse failures are counted)
    can_read_profile: bool = True  # `use_profile: true` is meaningful
    frozen_encoder: bool = False   # a head on a frozen encoder's features: an `encoder` source, family members only


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("classifier", "classifier:ClassifierRM", needs_model=True, uses_gpu=True, pairwise=False, generates=False),
    Kind("generative_pairwise", "generative:GenerativePairwiseRM", needs_model=True, uses_gpu=True, pairwise=True,
         generates=True),
    Kind("generative_pointwise", "generative:GenerativePointwiseRM", needs_model=True, uses_gpu=True,
         pairwise=False, generates=True),
    Kind("frozen_head", "frozen_head:FrozenHeadRM", needs_model=True, uses_gpu=False, pairwise=False,
         generates=False, frozen_encoder=True),
    Kind("length", "length:LengthRM", needs_model=False, uses_gpu=False, pairwise=False, generates=False,
         can_read_profile=False),
)}


def kind_info(kind: str, name: str = "<unnamed>") -> Kind:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"config key reward_models.{name}.kind: unknown RM kind {kind!r} "
                         f"(known: {', '.join(KINDS)})") from None


REWARD_STAGES = ("bon", "ppo", "grpo")


def reward_spec(spec: dict, reward: dict | None, stage: str | None = None) -> dict:
    """The RM spec of the downstream reward (BoN scoring, PPO and GRPO rewards) under the config
    section `reward` (rules/common.smk DOWNSTREAM_RM_SPEC). Keys are added only where the section
    departs from the benchmark spec, so the schema defaults leave the spec as it is:

    - `reward.profile: always` (the authors' BoN/score.py, PPO/reward_server.py: every
      discriminative RM reads `query + profile`, the top-k posts formatted and appended after the
      question): each classifier kind (a model, no generation, can read the profile) gets
      `use_profile: true` and `profile_layout: after_question` (prompts.user_turn: the stripped
      question, a blank line, the stripped posts), or `appended` under `reward.profile_join: authors`
      (their `query + profile`: the question directly followed by the posts, nothing stripped).
    - `reward.generative: pointwise` (the authors: each answer scored alone on a 0-1 scale, greedy,
      10 new tokens, an unparseable reply = 0.5): each generating kind gets `reward_generative`,
      `reward_max_new_tokens`, `reward_failure_score` and `reward_parse` (rms.generative); with a
      `stage` (bon, ppo, grpo: rules/common.smk DOWNSTREAM_RM_SPEC) also `reward_prompt`, the stage's
      prompt (`reward.generative_prompt_bon`, or `reward.generative_prompt_ppo` for PPO and GRPO),
      where it is not the project's `reward` (prompts.reward_prompt_messages). Without a stage
      (validation: every RM of a config reads the same prompt at a stage) the key is not set."""
    from ..config import with_defaults

    reward = with_defaults(dict(reward or {}), "reward")  # ConfigError names a bad key
    info = kind_info(spec.get("kind"), spec.get("name", "<unnamed>"))
    out = dict(spec)
    if reward["profile"] == "always" and info.needs_model and not info.generates and info.can_read_profile:
        out["use_profile"] = True
        out["profile_layout"] = "appended" if reward["profile_join"] == "authors" else "after_question"
    if reward["generative"] == "pointwise" and info.generates:
        out["reward_generative"] = "pointwise"
        out["reward_max_new_tokens"] = int(reward["generative_max_new_tokens"])
        out["reward_failure_score"] = float(reward["generative_failure_score"])
        out["reward_parse"] = str(reward["generative_parse"])
        if stage is not None:
            if stage not in REWARD_STAGES:
                raise ValueError(f"reward stage {stage!r}: expected one of {REWARD_STAGES}")
            prompt = str(reward["generative_prompt_bon" if stage == "bon" else "generative_prompt_ppo"])
            if prompt != "reward":
                out["reward_prompt"] = prompt
    return out


def load_reward_model(spec: dict) -> RewardModel:
    info = kind_info(spec.get("kind"), spec.get("name", "<unnamed>"))
    return load_ref(info.impl, __name__)(spec)


__all__ = ["load_reward_model", "reward_spec", "REWARD_STAGES", "kind_info", "Kind", "KINDS", "RewardModel",
           "ScoreOutput", "CompareOutput"]
