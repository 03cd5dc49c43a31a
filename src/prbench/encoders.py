"""Sentence embeddings from an encoder's last hidden state: the one batching and pooling loop
shared by profile retrieval (`prbench.data.retrieval.DenseRetriever`) and the MiniLM judge
(`prbench.judge.minilm.MiniLMEncoder`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def pool(hidden, attention_mask, pooling: str = "mean"):
    """One vector per sequence: the mean over its real (unmasked) tokens, or the first token's
    state (`cls`). Every tokenized text has at least one real token (its special tokens); a row
    without any would pool to zeros whatever the clamp."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def embed_texts(model, tokenizer, texts: Sequence[str], *, batch_size: int, max_length: int, device,
                pooling: str = "mean", normalize: bool = False) -> np.ndarray:
    """Embeddings (float32, one row per text, in the order given), computed in batches of texts
    sorted by length (less padding); `normalize`: L2-normalised rows."""
    import torch

    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            enc = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                            return_tensors="pt").to(device)
            vec = pool(model(**enc).last_hidden_state, enc["attention_mask"], pooling)
            if normalize:
                vec = torch.nn.functional.normalize(vec, dim=-1)
            out[idx] = vec.float().cpu().numpy()
    return out
