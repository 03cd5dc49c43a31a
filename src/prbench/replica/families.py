"""Builders of tiny replicas for the study's model families beyond config.yaml's (configs/study.yaml).

- `build_gemma_seqcls_replica(out, version="gemma2")`
  - stands in for: Skywork/Skywork-Reward-Gemma-2-27B-v0.2
  - interface: Gemma2ForSequenceClassification (soft-capped attention, alternating sliding-window and
    global layers), Gemma's tokenizer (`<pad>` 0, `<eos>` 1, `<bos>` 2, `<unk>` 3, BOS added on
    encode), turns in `<start_of_turn>` / `<end_of_turn>`, the assistant's role written `model`, no
    system role
- `build_gemma_seqcls_replica(out, version="gemma")`
  - stands in for: Ray2333/GRM-Gemma-2B-rewardmodel-ft (GemmaForSequenceClassification, same tokenizer)
- `build_deberta_seqcls_replica(out)`
  - stands in for: OpenAssistant/reward-model-deberta-v3-{base,large,large-v2}
  - interface: DebertaV2ForSequenceClassification (disentangled relative attention, no token-type
    embeddings, a pooler on the first token), a SentencePiece-style unigram tokenizer with `[PAD]` 0,
    `[CLS]` 1, `[SEP]` 2, `[UNK]` 3 and `[MASK]` last, no chat template: the model card scores
    `tokenizer(question, answer)`, a text pair `[CLS] q [SEP] a [SEP]`, which prbench.rms.classifier
    uses for tokenizers without a chat template; 512 positions
- `build_llama3_chat(out)`
  - stands in for: meta-llama/Llama-3.{1,2,3}-*-Instruct as generative (pairwise) RMs
  - interface: LlamaForCausalLM with llama3 rope scaling, Llama-3.1's special tokens
    (`<|begin_of_text|>`, `<|eot_id|>` end of turn, `<|eom_id|>`, `<|python_tag|>`, no pad token),
    a template that always opens with a system header (knowledge-cutoff and date lines, then the
    conversation's system message if any), and a generation_config with sampling defaults and three
    stop ids that the pipeline must override

The tokenizers are trained on the replica corpus; the chat templates are written for this project
from the structure the model cards document. Weights are random (seeded), saved as safetensors.
"""
from __future__ import annotations

from pathlib import Path

from .rms import _CORPUS, save_classifier

# ---- Gemma / Gemma 2 ---------------------------------------------------------------------------

GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
# Gemma's turn format: BOS once, each turn `<start_of_turn>{user|model}\n{text}<end_of_turn>\n`;
# a system message is refused, as Gemma's own template does.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ raise_exception('Gemma templates have no system role') }}{% endif %}"
    "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
    "<start_of_turn>{{ role }}\n{{ m['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
GEMMA_VERSIONS = ("gemma", "gemma2")
# every printable ASCII character, newline and the word-start mark: learned as single tokens
_ALPHABET = ["▁", "\n"] + [chr(c) for c in range(33, 127)]


def gemma_tokenizer(vocab_size: int = 600):
    """SentencePiece-style BPE (spaces as '▁', newline its own token, byte fallback through the 256
    `<0x..>` byte tokens) with Gemma's special-token ids."""
    import json

    from tokenizers import Tokenizer, decoders, models, normalizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.normalizer = normalizers.Replace(" ", "▁")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=GEMMA_SPECIALS, show_progress=False,
                                  initial_alphabet=_ALPHABET)
    core.train_from_iterator([_CORPUS] * 4, trainer)
    model = json.loads(core.to_str())["model"]
    vocab = dict(model["vocab"])
    for b in range(256):  # the byte tokens byte fallback spells unknown characters with
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    core.model = models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True)
    core.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    core.post_processor = processors.TemplateProcessing(  # add_bos_token, as Gemma's tokenizer
        single="<bos> $A", pair="<bos> $A <bos>:1 $B:1", special_tokens=[("<bos>", core.token_to_id("<bos>"))])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                  unk_token="<unk>", mask_token="<mask>", model_max_length=8192,
                                  additional_special_tokens=["<start_of_turn>", "<end_of_turn>"])
    tok.chat_template = GEMMA_TEMPLATE
    tok.padding_side = "left"  # Gemma ships left padding; the pipeline sets its own side per use
    return tok


def build_gemma_seqcls_replica(out_dir, version: str = "gemma2", seed: int = 0, layers: int = 2) -> Path:
    """A Gemma / Gemma 2 `*ForSequenceClassification` RM with one logit."""
    import torch
    from transformers import (
        Gemma2Config,
        Gemma2ForSequenceClassification,
        GemmaConfig,
        GemmaForSequenceClassification,
    )

    if version not in GEMMA_VERSIONS:
        raise ValueError(f"gemma replica: unknown version {version!r} ({', '.join(GEMMA_VERSIONS)})")
    tok = gemma_tokenizer()
    common = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                  num_attention_heads=4, head_dim=16, hidden_activation="gelu_pytorch_tanh",
                  max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=10000.0, num_labels=1,
                  pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                  tie_word_embeddings=True)
    torch.manual_seed(seed)
    if version == "gemma2":  # Gemma 2: logit soft-capping, query scaling, local (sliding) + global layers
        cfg = Gemma2Config(num_key_value_heads=2, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                           query_pre_attn_scalar=16, sliding_window=32, **common)
        model = Gemma2ForSequenceClassification(cfg)
    else:  # Gemma (2B): multi-query attention
        model = GemmaForSequenceClassification(GemmaConfig(num_key_value_heads=1, **common))
    return save_classifier(model, model.score, tok, out_dir)


# ---- DeBERTa-v3 ---------------------------------------------------------------------------------

DEBERTA_SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]


def _unigram_vocab(vocab_size: int) -> list[tuple[str, float]]:
    """A fixed unigram vocabulary: the specials (score 0), then every word of the replica corpus with '▁'
    in front and every character, scored by log frequency (characters below every word), ties by the
    piece. Built, not trained: tokenizers' UnigramTrainer picks other pieces at ties from run to run, so
    the same build would give other token ids."""
    import math
    from collections import Counter

    words = Counter("▁" + w for w in _CORPUS.split())
    total = sum(words.values())
    pieces = sorted(((w, math.log(c / total)) for w, c in words.items()), key=lambda x: (-x[1], x[0]))
    floor = min(score for _, score in pieces) - 1.0
    pieces += [(ch, floor - i * 1e-3) for i, ch in enumerate(_ALPHABET)]
    room = vocab_size - len(DEBERTA_SPECIALS) - 1  # [MASK] last
    chars = pieces[len(words):]
    return [(t, 0.0) for t in DEBERTA_SPECIALS] + pieces[:max(0, room - len(chars))] + chars


def deberta_tokenizer(vocab_size: int = 400):
    """Unigram tokenizer with '▁' word starts (as DeBERTa-v3's SentencePiece model), cased, with
    the text-pair post-processor `[CLS] A [SEP] B [SEP]` (segment ids 0 / 1)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import DebertaV2TokenizerFast

    core = Tokenizer(models.Unigram(_unigram_vocab(vocab_size), unk_id=DEBERTA_SPECIALS.index("[UNK]")))
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    core.add_special_tokens(DEBERTA_SPECIALS)
    core.add_special_tokens(["[MASK]"])  # the last id, as DeBERTa-v3's [MASK]
    cls_id, sep_id = core.token_to_id("[CLS]"), core.token_to_id("[SEP]")
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return DebertaV2TokenizerFast(tokenizer_object=core, do_lower_case=False, bos_token="[CLS]", eos_token="[SEP]",
                                  cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]",
                                  mask_token="[MASK]", model_max_length=512)


def build_deberta_seqcls_replica(out_dir, seed: int = 0, layers: int = 2) -> Path:
    """A DeBERTa-v3 reward model: DebertaV2ForSequenceClassification with one logit."""
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    tok = deberta_tokenizer()
    cfg = DebertaV2Config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                          intermediate_size=64, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=0,
                          relative_attention=True, position_buckets=32, max_relative_positions=-1,
                          pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
                          position_biased_input=False, pooler_hidden_size=32, pooler_dropout=0.0,
                          pooler_hidden_act="gelu", layer_norm_eps=1e-7, num_labels=1, pad_token_id=tok.pad_token_id,
                          initializer_range=0.2)  # wider than 0.02 so the pooled first token varies
    torch.manual_seed(seed)
    model = DebertaV2ForSequenceClassification(cfg)
    return save_classifier(model, model.classifier, tok, out_dir)


# ---- Llama-3.x Instruct (generative RM) ---------------------------------------------------------

LLAMA3_CHAT_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                        "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                        "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
LLAMA3_KNOWLEDGE_CUTOFF = "December 2023"
LLAMA3_DEFAULT_DATE = "26 Jul 2024"
# Llama-3.1-Instruct's turn structure: BOS, then a system header that is always there (knowledge
# cutoff and today's date, then the conversation's own system message), then each turn as
# `<|start_header_id|>role<|end_header_id|>\n\n{text}<|eot_id|>`.
LLAMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% set date = date_string if date_string is defined else '" + LLAMA3_DEFAULT_DATE + "' %}"
    "{% set sys = messages[0]['content'] | trim if messages and messages[0]['role'] == 'system' else '' %}"
    "<|start_header_id|>system<|end_header_id|>\n\n"
    "Cutting Knowledge Date: " + LLAMA3_KNOWLEDGE_CUTOFF + "\nToday Date: {{ date }}\n\n{{ sys }}<|eot_id|>"
    "{% for m in messages %}{% if m['role'] != 'system' %}"
    "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
# Sampling defaults of the kind Llama-3.1-Instruct's generation_config.json sets.
LLAMA3_GENERATION_DEFAULTS = {"do_sample": True, "temperature": 0.6, "top_p": 0.9}


def llama3_chat_tokenizer(vocab_size: int = 600):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=LLAMA3_CHAT_SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator([_CORPUS] * 4, trainer)
    bos = "<|begin_of_text|>"
    core.post_processor = processors.TemplateProcessing(  # BOS on encode, as Llama-3's tokenizer
        single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1", special_tokens=[(bos, core.token_to_id(bos))])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=bos, eos_token="<|eot_id|>",
                                  model_max_length=131072)  # no pad token, as the Instruct tokenizers
    tok.chat_template = LLAMA3_CHAT_TEMPLATE
    return tok


def build_llama3_chat(out_dir, seed: int = 0, hidden: int = 64, layers: int = 2) -> Path:
    """A Llama-3.x-Instruct-style causal LM folder: config, safetensors, tokenizer, generation config."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tok = llama3_chat_tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<|begin_of_text|>", "<|end_of_text|>", "<|eom_id|>",
                                                     "<|eot_id|>")}
    stops = [ids["<|end_of_text|>"], ids["<|eom_id|>"], ids["<|eot_id|>"]]
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=131072,
                      rope_theta=500000.0, rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=False,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                      bos_token_id=ids["<|begin_of_text|>"], eos_token_id=stops)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.generation_config = GenerationConfig(bos_token_id=ids["<|begin_of_text|>"], eos_token_id=stops,
                                               **LLAMA3_GENERATION_DEFAULTS)
    out = Path(out_dir)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out
