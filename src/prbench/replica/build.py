"""Builders of tiny randomly initialised replicas of the non-RM hub models of config.yaml.

- `qwen2_chat`: Qwen2.5-Instruct family (`Qwen/Qwen2.5-0.5B-Instruct` policy, `Qwen/Qwen2.5-7B-Instruct`
  generative RMs, `Qwen/Qwen2.5-32B-Instruct` judge): `Qwen2ForCausalLM`, a byte-level BPE tokenizer
  with Qwen's special tokens (`<|endoftext|>` pad, `<|im_start|>`, `<|im_end|>` end of turn), a ChatML
  chat template, and a `generation_config.json` with sampling defaults of the kind Qwen ships
  (do_sample, temperature 0.7, top_p 0.8, top_k 20, repetition_penalty) that the pipeline must never
  inherit.
- `contriever`: `facebook/contriever-msmarco` (`BertModel`, WordPiece uncased tokenizer with
  [PAD]/[UNK]/[CLS]/[SEP]/[MASK], mean pooling done by prbench.data.retrieval).

`build_replica` also dispatches the RM builders (prbench.replica.rms) and the study's other families
(prbench.replica.families: `gemma_seqcls`, `deberta_seqcls`, `llama3_chat`).

Weights are random (seeded) and saved as safetensors. Sizes are a few thousand parameters per
layer: the point is the interfaces, not the quality.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from ..config import entry_with_defaults
from . import families, rms
from .data import tokenizer_corpus

log = logging.getLogger("prbench.replica")

# ChatML as Qwen2.5-Instruct uses it; written for this project. A default system turn is added
# when the conversation has none (as Qwen's template does, in the project's own words).
QWEN_DEFAULT_SYSTEM = "You are a helpful assistant."
QWEN_CHAT_TEMPLATE = (
    "{% if messages and messages[0]['role'] != 'system' %}"
    "<|im_start|>system\n" + QWEN_DEFAULT_SYSTEM + "<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN_ENDOFTEXT = "<|endoftext|>"
QWEN_IM_START = "<|im_start|>"
QWEN_IM_END = "<|im_end|>"
# Qwen2.5's first added tokens, in their order (the real vocabulary numbers them from 151643)
QWEN_SPECIALS = [QWEN_ENDOFTEXT, QWEN_IM_START, QWEN_IM_END, "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
QWEN_NON_SPECIAL_ADDED = ["<tool_call>", "</tool_call>"]

# Per-model sampling defaults of the kind each Qwen2.5-Instruct generation_config.json sets.
QWEN_GENERATION_DEFAULTS = {
    "do_sample": True,
    "temperature": 0.7,
    "top_p": 0.8,
    "top_k": 20,
    "repetition_penalty": 1.1,
}

# Layer sizes of the replicas (tiny; hub sizes in the comments are facts of the real models)
QWEN_SIZES = {
    "0.5b": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, tie_word_embeddings=True),      # real: 896 / 24 layers, tied
    "7b": dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, tie_word_embeddings=False),      # real: 3584 / 28 layers
    "32b": dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=6,
                num_key_value_heads=2, tie_word_embeddings=False),     # real: 5120 / 64 layers
}


def qwen_tokenizer(vocab_size: int = 800):
    """Byte-level BPE (as Qwen2's) trained on the replica corpus, with Qwen's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=QWEN_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(tokenizer_corpus(), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=QWEN_ENDOFTEXT, eos_token=QWEN_IM_END,
                                  unk_token=None, bos_token=None, model_max_length=32768,
                                  additional_special_tokens=QWEN_SPECIALS[1:])
    tok.add_tokens(QWEN_NON_SPECIAL_ADDED)
    tok.chat_template = QWEN_CHAT_TEMPLATE
    tok.padding_side = "right"  # as Qwen ships it; the pipeline sets its own side per use
    return tok


def build_qwen2_chat(out_dir: str | Path, seed: int = 0, size: str = "0.5b",
                     repetition_penalty: float = 1.1, judge_training: dict | None = None,
                     judge_protocol: dict | None = None) -> Path:
    """A Qwen2.5-Instruct-style causal LM folder: config, safetensors, tokenizer, generation config.

    With `judge_training` (replica spec option) the random model is then fine-tuned to answer the
    rubric judge's prompt in the format of `judge_protocol` (judge.aspect_format, judge.system_turn):
    prbench.replica.judge; the summary is written to judge_training.json."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    if size not in QWEN_SIZES:
        raise ValueError(f"qwen2_chat replica: unknown size {size!r} ({', '.join(QWEN_SIZES)})")
    out = Path(out_dir)
    tok = qwen_tokenizer()
    pad_id = tok.convert_tokens_to_ids(QWEN_ENDOFTEXT)
    eos_id = tok.convert_tokens_to_ids(QWEN_IM_END)
    cfg = Qwen2Config(vocab_size=len(tok), max_position_embeddings=32768, rope_theta=1000000.0,
                      rms_norm_eps=1e-6, hidden_act="silu", bos_token_id=pad_id, eos_token_id=eos_id,
                      use_sliding_window=False, **QWEN_SIZES[size])
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id, pad_token_id=pad_id, eos_token_id=[eos_id, pad_id],
        **dict(QWEN_GENERATION_DEFAULTS, repetition_penalty=float(repetition_penalty)))
    summary = None
    if judge_training is not None:
        from .judge import train_judge_replica

        proto = entry_with_defaults(judge_protocol or {}, "judge")  # the judge section's defaults
        summary = train_judge_replica(model, tok, seed, judge_training, aspect_format=str(proto["aspect_format"]),
                                      system_turn=bool(proto["system_turn"]))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    if summary is not None:
        from .judge import write_summary

        write_summary(out, summary)
    return out


def bert_wordpiece_tokenizer(vocab_size: int = 600):
    """Uncased WordPiece tokenizer (as bert-base-uncased / Contriever) with BERT's special tokens."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    core = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    core.normalizer = normalizers.BertNormalizer(lowercase=True)
    core.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    core.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    core.train_from_iterator(tokenizer_corpus(), trainer)
    cls_id, sep_id = core.token_to_id("[CLS]"), core.token_to_id("[SEP]")
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return BertTokenizerFast(tokenizer_object=core, do_lower_case=True, unk_token="[UNK]", sep_token="[SEP]",
                             pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]", model_max_length=512)


def build_contriever(out_dir: str | Path, seed: int = 0) -> Path:
    """A Contriever-style encoder folder: `BertModel` (no pooler head used), WordPiece tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    out = Path(out_dir)
    tok = bert_wordpiece_tokenizer()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = BertModel(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def _rm_builder(name: str):
    return getattr(rms, name)  # the RM replicas live in prbench.replica.rms


def build_replica(builder: str, out_dir: str | Path, seed: int = 0, **options) -> Path:
    """Dispatch one `replica.models.<name>` entry of the config to its builder; writes
    `replica.json` (builder, seed, options) beside the model so a folder says what it is."""
    out = Path(out_dir)
    if builder == "qwen2_chat":
        build_qwen2_chat(out, seed, **options)
    elif builder == "contriever":
        build_contriever(out, seed, **options)
    elif builder == "seqcls":
        _rm_builder("build_seqcls_replica")(out, seed=seed, **options)
    elif builder == "internlm2_reward":
        _rm_builder("build_internlm2_reward_replica")(out, seed=seed, **options)
    elif builder == "armorm":
        _rm_builder("build_armorm_replica")(out, seed=seed, **options)
    elif builder in FAMILY_BUILDERS:  # the study's other families (prbench.replica.families)
        getattr(families, FAMILY_BUILDERS[builder])(out, seed=seed, **options)
    else:
        raise ValueError(f"unknown replica builder {builder!r} ({' | '.join(BUILDERS)})")
    with open(out / "replica.json", "w") as fh:
        json.dump({"builder": builder, "seed": seed, "options": options}, fh, indent=1, sort_keys=True)
    return out


FAMILY_BUILDERS = {"gemma_seqcls": "build_gemma_seqcls_replica", "deberta_seqcls": "build_deberta_seqcls_replica",
                   "llama3_chat": "build_llama3_chat"}
BUILDERS = ("qwen2_chat", "contriever", "seqcls", "internlm2_reward", "armorm", *FAMILY_BUILDERS)
