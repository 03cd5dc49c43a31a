"""PPO reward adapter: lets any `prbench.rms.RewardModel` act as trl's PPO reward model.

trl's experimental PPOTrainer scores a rollout with
`model.score(getattr(model, model.base_model_prefix)(input_ids=..., attention_mask=...).hidden_states[-1])`
on the *policy's* token ids (query + response, pads replaced by 0 and masked out) and reads the
value at the last response token. Real RMs use other tokenizers and their own chat template, so
this adapter

1. maps the query tokens back to the prompt row (question, profile) with an exact lookup table
   from the tokenized rendered prompt to the row (built from the same token ids the PPO dataset
   holds, so no re-parsing of text is needed and an unknown prompt is a hard error);
2. decodes the response tokens with the policy tokenizer (special tokens dropped);
3. scores `ScoreRequest(question, answer, profile)` with the RM's own `score()` (which builds the
   RM input through `prbench.prompts`), so classifier, generative and length RMs all work;
4. replaces NaN scores (generative parse failures) with an explicit `nan_reward` and counts them
   (replies an RM scored with a fallback value, `reward.generative_failure_score`, are counted too
   and keep that score), and returns the score broadcast over every position (`score` is the identity).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..prompts import ScoreRequest, answer_text, policy_messages, render_chat

log = logging.getLogger("prbench.downstream.reward_adapter")


def render_policy_prompt(tokenizer, row: dict) -> str:
    """The policy prompt text of a prompt row (paper template + the policy's chat template)."""
    return render_chat(tokenizer, policy_messages(row["question"], row.get("profile", []),
                                                  categories=row.get("profile_categories", ())),
                       add_generation_prompt=True)


def tokenize_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of a rendered prompt. The chat template carries its own special tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class PromptIndex:
    """Exact lookup from a prompt's token ids to its prompt row.

    Built once from the training prompt rows with the policy tokenizer; `match(ids)` finds the
    row whose token ids are a prefix of a query+response sequence (longest match wins).
    """

    def __init__(self, rows: Sequence[dict], tokenizer):
        self.rows: list[dict] = []
        self.token_ids: list[list[int]] = []
        self._by_len: dict[int, dict[tuple[int, ...], int]] = {}
        self.duplicates = 0
        for row in rows:
            for key in ("question_id", "question"):
                if key not in row:
                    raise ValueError(f"prompt row without field {key!r}: {str(row)[:200]}")
            ids = tokenize_prompt(tokenizer, render_policy_prompt(tokenizer, row))
            if not ids:
                raise ValueError(f"prompt row {row['question_id']}: rendered prompt has no tokens")
            table = self._by_len.setdefault(len(ids), {})
            key = tuple(ids)
            if key in table:
                # Identical rendered prompt (same question and profile): same RM input, keep the first.
                self.duplicates += 1
            else:
                table[key] = len(self.rows)
            self.rows.append(row)
            self.token_ids.append(ids)
        self._lengths = sorted(self._by_len, reverse=True)

    def __len__(self) -> int:
        return len(self.rows)

    def match(self, ids: Sequence[int]) -> tuple[int, int]:
        """(row index, prompt length) of the prompt that prefixes `ids`; KeyError when none does."""
        n = len(ids)
        for length in self._lengths:
            if length <= n:
                hit = self._by_len[length].get(tuple(ids[:length]))
                if hit is not None:
                    return hit, length
        raise KeyError("query tokens match no training prompt")


@dataclass
class AdapterStats:
    """Running counts of what the adapter scored (read and reset per PPO step by the logger)."""

    scored: int = 0
    failures: int = 0
    raw: list[float] = field(default_factory=list)  # the RM's finite scores, unscaled
    rewards: list[float] = field(default_factory=list)  # what the trainer got: scaled, nan_reward for NaN

    def reset(self) -> "AdapterStats":
        old = AdapterStats(self.scored, self.failures, list(self.raw), list(self.rewards))
        self.scored, self.failures, self.raw, self.rewards = 0, 0, [], []
        return old

    def reward_moments(self) -> list[float]:
        """[sum, sum of squares, count] of `rewards` (float64), to be summed over processes and
        turned into the step's `reward_sd` / `reward_n` by `reward_spread`."""
        r = np.asarray(self.rewards, dtype=np.float64)
        return [float(r.sum()), float(np.square(r).sum()), float(r.size)]


def reward_spread(total: float, total_sq: float, n: float) -> tuple[float, int]:
    """(sample SD with ddof 1, count) of a step's rewards from their summed moments; SD NaN below 2."""
    n = int(round(n))
    if n < 2:
        return float("nan"), n
    var = max(0.0, (total_sq - total * total / n) / (n - 1))
    return math.sqrt(var), n


class _AdapterBackbone(nn.Module):
    """What trl calls as `getattr(model, model.base_model_prefix)`."""

    def __init__(self, owner: "RewardAdapter"):
        super().__init__()
        self._owner = [owner]  # a list, so the parent module is not registered as a child (no cycle)

    def forward(self, input_ids=None, attention_mask=None, **_ignored):
        owner = self._owner[0]
        if attention_mask is None:
            attention_mask = input_ids != owner.pad_token_id
        rewards = owner.rewards_for_ids(input_ids, attention_mask)
        hidden = rewards.to(torch.float32).view(-1, 1, 1).expand(-1, input_ids.shape[1], 1)
        return SimpleNamespace(hidden_states=(hidden,), last_hidden_state=hidden)


class RewardAdapter(nn.Module):
    """trl-compatible reward model wrapping a `prbench` RewardModel (see module docstring)."""

    base_model_prefix = "backbone"

    def __init__(self, rm, tokenizer, prompt_index: PromptIndex, nan_reward: float = 0.0,
                 reward_scale: float = 1.0):
        super().__init__()
        if not math.isfinite(float(nan_reward)):
            raise ValueError(f"ppo.nan_reward must be a finite number, got {nan_reward!r}")
        if tokenizer.pad_token_id is None:
            raise ValueError("the policy tokenizer has no pad token (needed to mask PPO batches)")
        self.rm = rm
        self.tokenizer = tokenizer
        self.index = prompt_index
        self.nan_reward = float(nan_reward)
        if not (math.isfinite(float(reward_scale)) and float(reward_scale) > 0):
            raise ValueError(f"ppo.reward_scale must be a positive number, got {reward_scale!r}")
        self.reward_scale = float(reward_scale)  # reward = RM score * reward_scale (authors: / 10)
        self.pad_token_id = int(tokenizer.pad_token_id)
        self.backbone = _AdapterBackbone(self)
        self.score = nn.Identity()
        self.stats = AdapterStats()
        self.total = AdapterStats()
        # trl's disable_dropout / .to(device) need a module; a dummy buffer gives it a device.
        self.register_buffer("_device_probe", torch.zeros(1), persistent=False)

    # -- decoding ----------------------------------------------------------------------------
    def requests_for_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[ScoreRequest]:
        """Decode each row of query+response ids into the RM's ScoreRequest."""
        ids = input_ids.detach().cpu().tolist()
        mask = attention_mask.detach().cpu().bool().tolist()
        out = []
        for r, (row_ids, row_mask) in enumerate(zip(ids, mask)):
            try:
                start = row_mask.index(True)
            except ValueError:
                raise ValueError(f"PPO batch row {r} is all padding") from None
            # The query is left-padded; the response runs until the first masked (pad) position.
            end = start
            while end < len(row_mask) and row_mask[end]:
                end += 1
            seq = row_ids[start:end]
            try:
                idx, plen = self.index.match(seq)
            except KeyError:
                text = self.tokenizer.decode(seq[:80])
                raise KeyError(f"PPO query in batch row {r} is not one of the training prompts: {text!r}...") from None
            prompt = self.index.rows[idx]
            answer = answer_text(self.tokenizer.decode(seq[plen:], skip_special_tokens=True))
            out.append(ScoreRequest(question=prompt["question"], answer=answer,
                                    profile=tuple(prompt.get("profile", [])),
                                    categories=tuple(prompt.get("profile_categories", ()))))
        return out

    # -- scoring -----------------------------------------------------------------------------
    def score_requests(self, requests: Sequence[ScoreRequest]) -> np.ndarray:
        """RM scores times `reward_scale`, NaN replaced by `nan_reward` (not scaled); failures
        counted in `stats`/`total` (whose `raw` keeps the unscaled scores)."""
        res = self.rm.score(list(requests))
        scores = np.asarray(res.scores, dtype=np.float64)
        if scores.shape != (len(requests),):
            raise ValueError(
                f"RM {getattr(self.rm, 'name', '?')} returned {scores.shape} scores for {len(requests)} requests")
        bad = ~np.isfinite(scores)
        n_bad = int(bad.sum())
        if n_bad:
            log.warning("RM %s failed to score %d of %d PPO responses; using nan_reward=%g",
                        getattr(self.rm, "name", "?"), n_bad, len(requests), self.nan_reward)
        # failures the RM already scored with a rule's fallback (reward.generative_failure_score): used as
        # scored, counted with the NaN ones in reward_failures
        fallback = (np.asarray(res.failed, dtype=bool) & ~bad) if getattr(res, "failed", None) is not None \
            else np.zeros(len(scores), dtype=bool)
        for st in (self.stats, self.total):
            st.scored += len(requests)
            st.failures += n_bad + int(fallback.sum())
            st.raw.extend(float(x) for x in scores[~bad])
        rewards = np.where(bad, self.nan_reward, scores * self.reward_scale)
        for st in (self.stats, self.total):
            st.rewards.extend(float(x) for x in rewards)
        return rewards

    @torch.no_grad()
    def rewards_for_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        scores = self.score_requests(self.requests_for_ids(input_ids, attention_mask))
        return torch.tensor(scores, dtype=torch.float32, device=input_ids.device)

    def forward(self, input_ids=None, attention_mask=None, **kwargs):  # pragma: no cover - trl uses backbone+score
        return self.score(self.backbone(input_ids=input_ids, attention_mask=attention_mask).hidden_states[-1])
