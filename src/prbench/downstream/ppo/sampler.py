"""Rollout token draws by inverse CDF (`ppo.rollout_sampler: inverse_cdf`, the forward rollout path only).

HF `generate` samples a token with `torch.multinomial(softmax(scores / T), 1)`, which on CPU draws
one exponential per vocabulary entry and row each decode step (151,936 for Qwen2.5: most of a CPU
rollout's time, perf/README.md "PPO rollouts"). `InverseCDFSampler` draws the same distribution
with one uniform per row: the tempered weights w = exp((x - max) / T), one `torch.rand` per row
from the global RNG (on the scores' device) scaled by the row's total, and the entry where it
falls in the cumulative weights, searched in two levels: the cumulative masses of blocks of
BLOCK entries pick a block, the block's own cumulative weights an entry (`searchsorted`, right,
both times with the same uniform). Token i of block k is drawn with probability
(mass_k / total) x (w_i / mass_k) = w_i / total up to rounding. The tokens are equally
distributed but not the tokens multinomial draws for the same seed.

Precision and cost: the weights are float32 (as HF's softmax), the cumulative sums and the
uniform float64, so a small probability keeps ~1e-7 of itself even over a 151,936-entry vocabulary,
where one float32 cumulative sum (or a 24-bit uniform) would move a 1e-5 probability by about 1% of
itself. One float64 cumulative sum over the whole vocabulary would cost about as much as the
exponentials it replaces on CPU; the blocks keep the full-vocabulary work to the weights (max,
subtract, divide, exp) and one float32 sum per block. A zero weight (a -inf logit, or one that
underflows, as in softmax) never takes a draw: the uniform is kept strictly below the total (and
the block's place below the block's), and `right` skips entries where the cumulative sum does not
grow. A row without a finite logit fails, as multinomial does. Memory: a decode step holds the
logits and the float32 weights, 2 of `memory.GEN_STEP_COPIES`' 4 float32 copies (multinomial's
logits, scores, probabilities and draws).

It runs as a `LogitsProcessor` under greedy decoding (`inverse_cdf_generation`): HF applies its
own processors first (min_new_tokens, suppress tokens, ...: `_get_logits_processor` appends the
ones passed to `generate` after them), then this one draws and writes +inf at the drawn entry, and
greedy decoding's argmax takes it.
"""
from __future__ import annotations

import copy
import math

import torch
from transformers import LogitsProcessor

# Entries of a block: the cumulative sums run over the block masses and one block per row
BLOCK = 128


class InverseCDFSampler(LogitsProcessor):
    """A logits processor drawing one token per row from softmax(scores / temperature) and marking
    it with +inf in place. `record=True` keeps the log-probability of each drawn token (float64,
    one (rows,) tensor a step) in `logprobs`, for tests."""

    def __init__(self, temperature: float, record: bool = False):
        temperature = float(temperature)
        if not (temperature > 0 and math.isfinite(temperature)):
            raise ValueError(f"inverse_cdf sampler: temperature must be positive, got {temperature!r}")
        self.temperature = temperature
        self.logprobs: list[torch.Tensor] | None = [] if record else None

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        """One token id per row of `scores` (rows x vocabulary), shape (rows, 1): a block of BLOCK
        entries by the blocks' cumulative masses, then an entry of that block by its cumulative
        weights, both searched with the same uniform (float64, so the second search keeps its
        precision)."""
        rows, vocab = scores.shape
        blocks = -(-vocab // BLOCK)
        # float32 weights exp((x - max) / T), zero-padded to whole blocks
        padded = scores.new_zeros(rows, blocks * BLOCK) if vocab % BLOCK else torch.empty_like(scores)
        weights = padded[:, :vocab]
        torch.sub(scores, scores.amax(dim=-1, keepdim=True), out=weights).div_(self.temperature).exp_()
        padded = padded.view(rows, blocks, BLOCK)
        block_cdf = padded.sum(dim=-1).double().cumsum_(dim=-1)
        total = block_cdf[:, -1:]
        u = torch.rand(total.shape, dtype=torch.float64, device=scores.device).mul_(total)
        # rand < 1, but rand * total can round up to total: keep u below it (a draw at the total
        # would fall past the last positive weight)
        u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))
        # right: the first block whose cumulative mass exceeds u, so a block of zero mass is skipped
        k = torch.searchsorted(block_cdf, u, right=True)
        start = torch.where(k > 0, block_cdf.gather(1, (k - 1).clamp_(min=0)), 0.0)
        mass = block_cdf.gather(1, k) - start  # > 0: block_cdf[k - 1] <= u < block_cdf[k]
        inner = padded.gather(1, k.unsqueeze(-1).expand(rows, 1, BLOCK)).squeeze(1).double().cumsum_(dim=-1)
        inner_total = inner[:, -1:]
        r = (u - start).div_(mass).mul_(inner_total)  # u's place in the block, on the block's own scale
        r = torch.minimum(r, torch.nextafter(inner_total, torch.zeros_like(inner_total)))
        j = torch.searchsorted(inner, r, right=True)
        if self.logprobs is not None:  # P(block) x P(entry | block), as drawn
            w = inner.gather(1, j) - torch.where(j > 0, inner.gather(1, (j - 1).clamp(min=0)), 0.0)
            self.logprobs.append((mass.log() - total.log() + w.log() - inner_total.log()).squeeze(1))
        return k * BLOCK + j

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        idx = self.draw(scores)
        scores.scatter_(1, idx, math.inf)  # rows entries written, not the vocabulary
        return scores


# Sampling filters of a GenerationConfig the sampler does not apply, with the values that leave the
# distribution as it is (None: unset).
_NEUTRAL = {"top_k": (None, 0), "top_p": (None, 1.0), "min_p": (None,), "typical_p": (None, 1.0),
            "epsilon_cutoff": (None, 0.0), "eta_cutoff": (None, 0.0), "top_h": (None,), "num_beams": (None, 1),
            "renormalize_logits": (None, False), "watermarking_config": (None,)}


def inverse_cdf_generation(generation_config, record: bool = False):
    """(a copy of `generation_config` decoding greedily, the `InverseCDFSampler` to pass as its
    `logits_processor`) for a sampling config (trl's: temperature + 1e-7, top_k 0, top_p 1.0).
    The sampling fields are unset in the copy (greedy applies no warper, so the values transformers
    fills in from the model's generation_config do not act); a filter the sampler would not apply
    is refused."""
    bad = {k: getattr(generation_config, k, None) for k, ok in _NEUTRAL.items()
           if getattr(generation_config, k, None) not in ok}
    if bad:
        raise ValueError(f"config key ppo.rollout_sampler inverse_cdf: draws from the tempered softmax only "
                         f"(top_k 0, top_p 1.0, no other filter), the generation config sets {bad}")
    temperature = generation_config.temperature
    config = copy.deepcopy(generation_config)
    config.do_sample = False
    config.temperature = config.top_k = config.top_p = None
    return config, InverseCDFSampler(1.0 if temperature is None else temperature, record=record)
