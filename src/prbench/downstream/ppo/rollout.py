"""Rollout scores that trl's PPO releases as it reads them (so PPO fits where the DAG puts it).

trl 1.12's experimental PPOTrainer keeps the float32 scores of `generate(output_scores=True)` for
the whole local batch: `batch_generation` stacks every chunk's scores and pads them into one
tensor (two copies at the peak), the training loop keeps that tensor alive through the PPO epochs,
and the next step's generation builds its new scores while the old ones are still referenced. On
the paper's layout (local batch 64, response length 512, vocab 151,936) each copy is 19.9 GB, so
up to three copies (60 GB) sit on a training GPU (measured on an H100 with
`perf/ppo_memory_gpu.py`, see perf/README.md).

`releasing_batch_generation` is a drop-in replacement for trl's `batch_generation`: the same
generation calls (trl's own `generate`, one per rollout chunk, in the same order, so the same
random draws), the same right-padded query+responses, and scores handed out as
`ReleasingScores`: trl reads them exactly once, chunk by chunk (`logitss[i : i + chunk]`), and
each chunk is padded the way trl pads it (zeros to the longest response) and then dropped. The
values trl computes from them are bitwise the same (tests/test_ppo_rollout.py); only their
lifetime changes: one copy during generation, none during training.
"""
from __future__ import annotations

import contextlib
import copy
from typing import Sequence

import torch

from .memory import check_sampler_path


class ReleasingScores:
    """Per-chunk rollout scores, each handed out once (as the padded slice trl would read) and
    then released. Reading a chunk twice, or a slice that is not one whole chunk, is an error."""

    def __init__(self, chunks: Sequence[torch.Tensor], chunk_size: int, batch_size: int):
        if not chunks:
            raise ValueError("no rollout chunks")
        self._chunks: list[torch.Tensor | None] = list(chunks)
        self.chunk_size = int(chunk_size)
        self.batch_size = int(batch_size)
        self.max_len = max(int(c.shape[1]) for c in chunks)
        self.shape = (self.batch_size, self.max_len, *chunks[0].shape[2:])

    def __len__(self) -> int:
        return self.batch_size

    @property
    def released(self) -> int:
        return sum(c is None for c in self._chunks)

    def __getitem__(self, idx):
        if not isinstance(idx, slice) or idx.step not in (None, 1) or (idx.start or 0) % self.chunk_size:
            raise TypeError(f"rollout scores are read one chunk of {self.chunk_size} rows at a time, got {idx!r}")
        start = idx.start or 0
        j = start // self.chunk_size
        if j >= len(self._chunks):
            raise IndexError(f"rollout chunk {j} of {len(self._chunks)}")
        c = self._chunks[j]
        if c is None:
            raise RuntimeError(f"rollout scores of chunk {j} were already read and released")
        self._chunks[j] = None
        if c.shape[1] < self.max_len:  # trl pads shorter responses' scores with zeros on the right
            c = torch.nn.functional.pad(c, (0, 0, 0, self.max_len - c.shape[1]), value=0.0)
        stop = min(self.batch_size if idx.stop is None else idx.stop, self.batch_size)
        return c[: stop - start]


def releasing_batch_generation(model, queries, local_rollout_forward_batch_size, pad_token_id, generation_config):
    """trl's `batch_generation` with the scores as `ReleasingScores` (same generate calls)."""
    from trl.experimental.ppo import ppo_trainer as trl_ppo
    from trl.trainer.utils import pad

    responses, scores = [], []
    batch_size = queries.shape[0]
    for i in range(0, batch_size, local_rollout_forward_batch_size):
        query_response, logits = trl_ppo.generate(model, queries[i:i + local_rollout_forward_batch_size],
                                                  pad_token_id, generation_config)
        responses.append(query_response)
        scores.append(logits)
    padded = pad(responses, padding_value=pad_token_id, padding_side="right")
    padded = padded.view(-1, padded.shape[-1])[:batch_size]
    return padded, ReleasingScores(scores, local_rollout_forward_batch_size, batch_size)


@contextlib.contextmanager
def releasing_rollout_scores(enabled: bool = True, sampler: str = "multinomial"):
    """Within the block, trl's PPOTrainer uses `releasing_batch_generation` (restored after).
    Today's path draws with trl's own sampling: `sampler` (ppo.rollout_sampler) must be multinomial."""
    from trl.experimental.ppo import ppo_trainer as trl_ppo

    check_sampler_path(sampler, "scores")
    if not enabled:
        yield
        return
    original = trl_ppo.batch_generation
    trl_ppo.batch_generation = releasing_batch_generation
    try:
        yield
    finally:
        trl_ppo.batch_generation = original


# ---------------------------------------------------------------------------------------------
# The new path: token ids in full generation chunks, logprobs from a forward pass
# ---------------------------------------------------------------------------------------------
def generate_ids(model, queries, pad_token_id, generation_config, sampler: str = "multinomial") -> torch.Tensor:
    """trl's `generate` without the per-token scores: query + response token ids only. A sampling
    config draws with HF's multinomial, or with `sampler="inverse_cdf"` one uniform per row in the
    sampler's own decode loop (`prbench.downstream.ppo.sampler.decode_inverse_cdf`); a greedy config
    decodes greedily through HF's generate either way."""
    context_length = queries.shape[1]
    attention_mask = queries != pad_token_id
    input_ids = torch.masked_fill(queries, ~attention_mask, 0)
    config = copy.deepcopy(generation_config)  # a copy: trl's own config is left as it is
    # ids only: no per-step scores or logits kept, a plain tensor of sequences back
    config.return_dict_in_generate, config.output_scores, config.output_logits = False, False, False
    check_sampler_path(sampler, "forward")
    if sampler == "inverse_cdf" and config.do_sample:
        from .sampler import decode_inverse_cdf

        return torch.cat((queries, decode_inverse_cdf(model, input_ids, attention_mask, config)), dim=1)
    sequences = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config)
    return torch.cat((queries, sequences[:, context_length:]), dim=1)


@torch.no_grad()
def response_logits(model, query_responses: torch.Tensor, context_length: int, pad_token_id: int,
                    temperature: float) -> torch.Tensor:
    """The float32 logits (divided by trl's `temperature + 1e-7`) that predict each response token:
    what trl's rollout scores hold, from one forward pass over query + response. Only the response
    positions go through the LM head (`logits_to_keep`); masks and positions as trl's `forward`."""
    attention_mask = query_responses != pad_token_id
    position_ids = attention_mask.cumsum(1) - attention_mask.long()
    input_ids = torch.masked_fill(query_responses, ~attention_mask, 0)
    width = query_responses.shape[1] - context_length
    kw = dict(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, return_dict=True)
    try:
        out = model(**kw, logits_to_keep=width + 1)
    except TypeError:  # a model class without `logits_to_keep`: logits over every position
        out = model(**kw)
    logits = out.logits[:, -(width + 1):-1].float()
    return logits.div_(temperature + 1e-7)  # in place: one chunk of response logits, not two


class ForwardScores:
    """Stands where trl reads its rollout scores (`logitss[i : i + chunk]`): each read runs the
    policy forward over those rows (`response_logits`) instead of keeping generate's scores, so at
    most one forward chunk of response logits exists at a time. trl reads each chunk once, after
    leaving `unwrap_model_for_generation`: fine for plain DDP (the module is the same object);
    DeepSpeed ZeRO-3, which gathers the weights only inside that block, is not supported."""

    def __init__(self, model, query_responses, context_length, pad_token_id, temperature, chunk_size):
        self.model, self.query_responses = model, query_responses
        self.context_length, self.pad_token_id = int(context_length), pad_token_id
        self.temperature, self.chunk_size = float(temperature), int(chunk_size)
        self.batch_size = int(query_responses.shape[0])
        self.shape = (self.batch_size, int(query_responses.shape[1]) - self.context_length)
        self.forwards = 0

    def __len__(self) -> int:
        return self.batch_size

    def __getitem__(self, idx):
        if not isinstance(idx, slice) or idx.step not in (None, 1) or (idx.start or 0) % self.chunk_size:
            raise TypeError(f"rollout logits are read one chunk of {self.chunk_size} rows at a time, got {idx!r}")
        start = idx.start or 0
        stop = min(self.batch_size if idx.stop is None else idx.stop, self.batch_size)
        if start >= stop:
            raise IndexError(f"rollout rows {start}:{stop} of {self.batch_size}")
        self.forwards += 1
        return response_logits(self.model, self.query_responses[start:stop], self.context_length,
                               self.pad_token_id, self.temperature)


def ids_batch_generation(model, queries, generation_chunk, pad_token_id, generation_config, *,
                         forward_chunk, temperature, sampler="multinomial"):
    """Rollouts in `generation_chunk` rows per `generate` call (token ids only, drawn by `sampler`),
    right-padded like trl's `batch_generation`, with `ForwardScores` in place of the scores (read
    per `forward_chunk`)."""
    from trl.trainer.utils import pad

    batch_size = queries.shape[0]
    responses = [generate_ids(model, queries[i:i + generation_chunk], pad_token_id, generation_config, sampler)
                 for i in range(0, batch_size, generation_chunk)]
    padded = pad(responses, padding_value=pad_token_id, padding_side="right")
    padded = padded.view(-1, padded.shape[-1])[:batch_size]
    return padded, ForwardScores(model, padded, queries.shape[1], pad_token_id, temperature, forward_chunk)


@contextlib.contextmanager
def forward_logprob_rollouts(generation_chunk: int | None, temperature: float, sampler: str = "multinomial"):
    """Within the block, trl's PPOTrainer generates each step's rollouts `generation_chunk` rows per
    `generate` call (None = the whole local batch in one call), keeps only their token ids (sampled
    by `sampler`, ppo.rollout_sampler), and computes the rollout logprobs by a policy forward per
    `local_rollout_forward_batch_size` rows."""
    from trl.experimental.ppo import ppo_trainer as trl_ppo

    check_sampler_path(sampler, "forward")
    original = trl_ppo.batch_generation

    def batch_generation(model, queries, local_rollout_forward_batch_size, pad_token_id, generation_config):
        chunk = int(generation_chunk or queries.shape[0])
        return ids_batch_generation(model, queries, chunk, pad_token_id, generation_config,
                                    forward_chunk=local_rollout_forward_batch_size, temperature=temperature,
                                    sampler=sampler)

    trl_ppo.batch_generation = batch_generation
    try:
        yield
    finally:
        trl_ppo.batch_generation = original
