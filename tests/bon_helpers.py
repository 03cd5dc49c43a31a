"""Tiny local chat LMs for the policy / judge / BoN tests (no hub access)."""
from __future__ import annotations

TEXTS = [
    "I love jazz and quiet evenings.", "Any tips for movie nights?", "Watch a comedy with friends.",
    "Try a long hike in the mountains.", "Result: A", "Result: B", "Aspect 1: 2", "I don't know.",
    "Here are some of my previous posts:", "Which answer better fits my question and my interests?",
] * 3


def make_tiny_chat_lm(seed: int = 0, hidden: int = 32, layers: int = 1):
    """(model, tokenizer): a byte-level BPE tokenizer with the demo chat template and a random tiny Llama."""
    from prbench.training.policy import build_model, train_tokenizer

    tok = train_tokenizer(TEXTS, vocab_size=300, model_max_length=512)
    model = build_model(tok, {"hidden_size": hidden, "layers": layers, "heads": 2}, seed=seed, max_positions=1024)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model.eval(), tok
