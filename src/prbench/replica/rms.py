"""Builders of tiny reward-model replicas, one per interface of config.yaml's RMs.

- `build_seqcls_replica(out, "llama3")`
  - stands in for: Skywork/Skywork-Reward-V2-Llama-3.1-8B
  - interface: LlamaForSequenceClassification, Llama-3 header/eot template
- `build_seqcls_replica(out, "qwen3")`
  - stands in for: Skywork/Skywork-Reward-V2-Qwen3-4B
  - interface: Qwen3ForSequenceClassification, ChatML with Qwen3's think block
- `build_seqcls_replica(out, "tulu3")`
  - stands in for: allenai/Llama-3.1-Tulu-3-8B-RM and the RewardBench 2 RMs trained on Tulu data
  - interface: LlamaForSequenceClassification, the Tulu turn format (`<|user|>` / `<|assistant|>` as
    plain text, the answer closed by `<|end_of_text|>`), BOS added on encode, a `<pad>` token
- `build_internlm2_reward_replica(out)`
  - stands in for: internlm/internlm2-7b-reward
  - interface: remote-code AutoModel, reward at `reward_token_id`, `get_score`
- `build_armorm_replica(out)`
  - stands in for: RLHFlow/ArmoRM-Llama3-8B-v0.1
  - interface: remote-code classifier with `.score` (B,), pad-id row ends, a transformers-4 import

Weights are random (seeded), a few layers wide enough to give distinct scores; tokenizers are
small byte-level BPEs carrying the family's real special tokens and chat-template structure.
The remote-code models are saved without importing their code (state dict + config.json), so
building needs no compatibility patch; loading them goes through prbench's loader.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

REMOTE = Path(__file__).with_name("remote_code")

LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN3_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['role'] == 'assistant' and loop.last %}<think>\n\n</think>\n\n{% endif %}"
    "{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Tulu's turn format (written for this project): `<|role|>\n{text}\n` per turn, an assistant turn
# closed by EOS (and a newline unless it is the last), no BOS in the template (the tokenizer adds it)
TULU_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}<|assistant|>\n{{ m['content'] }}{{ eos_token }}"
    "{% if not loop.last %}\n{% endif %}"
    "{% else %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endif %}"
    "{% if loop.last and add_generation_prompt %}<|assistant|>\n{% endif %}"
    "{% endfor %}"
)
INTERNLM2_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# family -> special tokens (in id order), token roles, chat template
FAMILIES = {
    "llama3": dict(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                             "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                             "<|finetune_right_pad_id|>"],
                   bos="<|begin_of_text|>", eos="<|eot_id|>", pad="<|finetune_right_pad_id|>",
                   template=LLAMA3_TEMPLATE),
    "tulu3": dict(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                            "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<pad>"],
                  bos="<|begin_of_text|>", eos="<|end_of_text|>", pad="<pad>", template=TULU_TEMPLATE),
    "qwen2": dict(specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None, eos="<|im_end|>",
                  pad="<|endoftext|>", template=CHATML_TEMPLATE),
    "qwen3": dict(specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"], bos=None,
                  eos="<|im_end|>", pad="<|endoftext|>", template=QWEN3_TEMPLATE),
    "internlm2": dict(specials=["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "[UNUSED_TOKEN_130]"],
                      bos="<s>", eos="</s>", pad="</s>", template=INTERNLM2_TEMPLATE, unk="<unk>"),
}
_CORPUS = ("Here are some of my previous posts I spent the weekend on gardening tomatoes compost telescope "
           "nebula recipe saucepan spices oven bike gears saddle guitar chords melody What should I do this "
           "weekend Any hobby advice for me How can I relax after work You could try really truly quite very "
           "user assistant system Question Answer Post Category Result Score")


def family_tokenizer(family: str, pad: bool = True, vocab_size: int = 600):
    """A byte-level BPE tokenizer with a family's special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    f = FAMILIES[family]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=f["specials"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator([_CORPUS] * 4, trainer)
    if f.get("bos"):  # as the real tokenizers: encoding with special tokens puts BOS first (Llama-3's
        # TemplateProcessing, InternLM2's add_bos_token), also in front of a template that has one
        bos_id = tk.token_to_id(f["bos"])
        tk.post_processor = processors.TemplateProcessing(
            single=f"{f['bos']} $A", pair=f"{f['bos']} $A {f['bos']}:1 $B:1", special_tokens=[(f["bos"], bos_id)])
    kw = {k: f[k] for k in ("bos", "unk") if f.get(k)}
    kw = {f"{k}_token": v for k, v in kw.items()}
    if pad:
        kw["pad_token"] = f["pad"]
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token=f["eos"], **kw)
    tok.chat_template = f["template"]
    return tok


def _llama_config(tok, hidden: int, layers: int, **extra):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                       num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=4096, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id, **extra)


def _save_remote(out: Path, base, heads: dict, config: dict, files: dict[str, str], tok) -> Path:
    """Save a remote-code model without importing its code: `model.*` + head tensors, config.json,
    the code files, the tokenizer."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {f"model.{k}": v.contiguous() for k, v in base.state_dict().items()}
    state.update({k: v.contiguous() for k, v in heads.items()})
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for src, dst in files.items():
        shutil.copyfile(REMOTE / src, out / dst)
    tok.save_pretrained(out)
    return out


def build_seqcls_replica(out_dir, family: str = "llama3", seed: int = 0, hidden: int = 64, layers: int = 2,
                         pad: bool = True, num_labels: int = 1) -> Path:
    """A plain `*ForSequenceClassification` RM (Skywork-Reward-V2 style: one logit)."""
    import torch
    from transformers import (
        LlamaForSequenceClassification,
        Qwen2Config,
        Qwen2ForSequenceClassification,
        Qwen3Config,
        Qwen3ForSequenceClassification,
    )

    tok = family_tokenizer(family, pad=pad)
    common = dict(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, num_labels=num_labels,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    if family in ("llama3", "tulu3"):
        model = LlamaForSequenceClassification(_llama_config(tok, hidden, layers, num_labels=num_labels))
    elif family == "qwen3":
        model = Qwen3ForSequenceClassification(Qwen3Config(head_dim=hidden // 4, **common))
    elif family == "qwen2":
        model = Qwen2ForSequenceClassification(Qwen2Config(**common))
    else:
        raise ValueError(f"unknown family {family!r} (llama3, tulu3, qwen2, qwen3)")
    return save_classifier(model, model.score, tok, out_dir)


def save_classifier(model, head, tok, out_dir) -> Path:
    """Spread a sequence classifier's reward head (N(0, 1) weights, so random RMs rank answers apart)
    and save the model (safetensors) and its tokenizer in out_dir."""
    import torch

    with torch.no_grad():
        head.weight.normal_(0, 1.0)
    out = Path(out_dir)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def build_internlm2_reward_replica(out_dir, seed: int = 0, hidden: int = 64, layers: int = 2) -> Path:
    """InternLM2-reward interface: AutoModel via remote code, reward at `reward_token_id`."""
    import torch
    from transformers import LlamaModel

    tok = family_tokenizer("internlm2")
    cfg = _llama_config(tok, hidden, layers)
    torch.manual_seed(seed)
    base = LlamaModel(cfg)
    v_head = torch.randn(1, hidden)
    config = {**cfg.to_dict(), "model_type": "internlm2", "architectures": ["InternLM2ForRewardModel"],
              "reward_token_id": tok.convert_tokens_to_ids("[UNUSED_TOKEN_130]"),
              "auto_map": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                           "AutoModel": "modeling_internlm2.InternLM2ForRewardModel"}}
    return _save_remote(Path(out_dir), base, {"v_head.weight": v_head}, config,
                        {"internlm2_configuration.py": "configuration_internlm2.py",
                         "internlm2_modeling.py": "modeling_internlm2.py"}, tok)


def build_armorm_replica(out_dir, seed: int = 0, hidden: int = 64, layers: int = 2, objectives: int = 4) -> Path:
    """ArmoRM interface: remote-code classifier with `.score` (B,); its tokenizer has no pad token,
    its config has a pad id (the rows' ends are found from it)."""
    import torch
    from transformers import LlamaModel

    tok = family_tokenizer("llama3", pad=False)
    cfg = _llama_config(tok, hidden, layers)
    torch.manual_seed(seed)
    base = LlamaModel(cfg)
    heads = {"regression_layer.weight": torch.randn(objectives, hidden),
             "gating.weight": torch.randn(objectives, hidden),
             "gating.bias": torch.zeros(objectives)}
    config = {**cfg.to_dict(), "architectures": ["LlamaForRewardModelWithGating"], "num_objectives": objectives,
              "pad_token_id": tok.convert_tokens_to_ids("<|finetune_right_pad_id|>"),
              "auto_map": {"AutoModelForSequenceClassification": "modeling_custom.LlamaForRewardModelWithGating"}}
    return _save_remote(Path(out_dir), base, heads, config, {"armorm_modeling_custom.py": "modeling_custom.py"}, tok)

