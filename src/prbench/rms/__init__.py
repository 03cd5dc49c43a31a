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


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("classifier", "classifier:ClassifierRM", needs_model=True, uses_gpu=True, pairwise=False, generates=False),
    Kind("generative_pairwise", "generative:GenerativePairwiseRM", needs_model=True, uses_gpu=True, pairwise=True,
         generates=True),
    Kind("generative_pointwise", "generative:GenerativePointwiseRM", needs_model=True, uses_gpu=True,
         pairwise=False, generates=True),
    Kind("length", "length:LengthRM", needs_model=False, uses_gpu=False, pairwise=False, generates=False,
         can_read_profile=False),
)}


def kind_info(kind: str, name: str = "<unnamed>") -> Kind:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"config key reward_models.{name}.kind: unknown RM kind {kind!r} "
                         f"(known: {', '.join(KINDS)})") from None


def load_reward_model(spec: dict) -> RewardModel:
    info = kind_info(spec.get("kind"), spec.get("name", "<unnamed>"))
    return load_ref(info.impl, __name__)(spec)


__all__ = ["load_reward_model", "kind_info", "Kind", "KINDS", "RewardModel", "ScoreOutput", "CompareOutput"]
