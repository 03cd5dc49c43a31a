"""`frozen_head` RMs: a linear Bradley-Terry head on the features of one shared, frozen sentence
encoder. A family of them (prbench.rms.family) costs one embedding pass over the texts, then
milliseconds per member: the demo's many-RM study (docs/DESIGN.md "RM families").

Features of (question, profile posts, answer), every sentence embedding L2-normalised:
- `a`: the answer's embedding (the normalised mean of its sentences' embeddings: each text is embedded
  once, as sentences), and `q * a` (element-wise, with the question's): general quality;
- with the first `profile_posts` posts seen: for each answer sentence its most similar post,
  `sum_s e_s * e_post(s)` (element-wise), and three similarity summaries (sum, mean and the top-3
  sum of each sentence's best cosine similarity): how well the answer follows the profile.
  With no post seen the profile block is zero.

A member's head is fitted on the chosen-minus-rejected feature differences (logistic loss on both
signs, no intercept, L2 penalty `1 / (2 C n)`, L-BFGS: sklearn's `LogisticRegression(C,
fit_intercept=False)` on the same rows, checked in tests/test_rm_family.py) and saved as
`head.safetensors` + `head.json` in the member's model folder.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from ..prompts import ScoreRequest
from .base import RewardModel, ScoreOutput

SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
FEATURE_VERSION = 1
HEAD_FILE, META_FILE = "head.safetensors", "head.json"


def sentences(text: str) -> list[str]:
    """The answer's sentences (split after . ! ?); the whole text when it has none."""
    parts = [s for s in SENTENCE_RE.split(text.strip()) if s]
    return parts or [text]


class HeadFeatures:
    """The frozen encoder and an embedding cache shared by every member scoring in one process."""

    def __init__(self, encoder: str, batch_size: int = 128, max_length: int = 128):
        self.encoder, self.batch_size, self.max_length = encoder, batch_size, max_length
        self._model = self._tok = None
        self.cache: dict[str, np.ndarray] = {}
        self.rows: dict[tuple, np.ndarray] = {}  # feature rows by (posts seen, question, answer, those posts)
        self.embedded = 0

    def _load(self):
        if self._model is None:
            from transformers import AutoModel, AutoTokenizer

            from ..models import resolve_model_ref

            path = resolve_model_ref(self.encoder)
            self._tok = AutoTokenizer.from_pretrained(path)
            self._model = AutoModel.from_pretrained(path, use_safetensors=True).eval()

    def embed(self, texts: Sequence[str]) -> None:
        """Embed the texts not cached yet, in one batched pass."""
        new = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if not new:
            return
        self._load()
        from ..encoders import embed_texts

        vecs = embed_texts(self._model, self._tok, new, batch_size=self.batch_size, max_length=self.max_length,
                           device="cpu", normalize=True)
        self.cache.update(zip(new, vecs))
        self.embedded += len(new)

    def matrix(self, requests: Sequence[ScoreRequest], profile_posts: int) -> np.ndarray:
        """One feature row per request (float64), with the first `profile_posts` posts seen."""
        k = max(0, int(profile_posts))
        texts = []
        for r in requests:
            texts += [r.question, *sentences(r.answer), *r.profile[:k]]
        self.embed(texts)
        out = []
        for r in requests:
            key = (k, r.question, r.answer, r.profile[:k])
            if key not in self.rows:
                self.rows[key] = self._row(r, k)
            out.append(self.rows[key])
        return np.stack(out).astype(np.float64)

    def _row(self, r: ScoreRequest, k: int) -> np.ndarray:
        e = self.cache
        s = np.stack([e[t] for t in sentences(r.answer)])
        a = s.mean(0)
        a = a / max(float(np.linalg.norm(a)), 1e-12)
        q = e[r.question]
        inter, summary = np.zeros_like(a), np.zeros(3, dtype=a.dtype)
        posts = r.profile[:k]
        if posts:
            p = np.stack([e[t] for t in posts])
            sim = s @ p.T
            inter = (s * p[sim.argmax(1)]).sum(0)
            best = sim.max(1)
            summary = np.array([best.sum(), best.mean(), np.sort(best)[-3:].sum()], dtype=a.dtype)
        return np.concatenate([a, q * a, inter, summary])


def fit_head(diffs: np.ndarray, c: float = 1.0) -> np.ndarray:
    """Bradley-Terry weights from chosen-minus-rejected feature rows: minimises the mean logistic
    loss of `+d` (label 1) and `-d` (label 0) plus `||w||^2 / (2 C n)`, n = 2 len(diffs)."""
    from scipy.optimize import minimize

    x = np.concatenate([diffs, -diffs]).astype(np.float64)
    y = np.r_[np.ones(len(diffs)), np.zeros(len(diffs))]
    n = len(x)
    if n == 0:
        return np.zeros(diffs.shape[1])

    def loss(w):
        z = x @ w
        p = 1.0 / (1.0 + np.exp(-z))
        val = np.logaddexp(0.0, z).sum() - (y * z).sum() + 0.5 * (w @ w) / c
        return val / n, (x.T @ (p - y) + w / c) / n

    res = minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-10, "ftol": 1e-15})
    return res.x


def save_head(folder: str | Path, weights: np.ndarray, meta: dict) -> None:
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"weights": np.asarray(weights, dtype=np.float64)}, str(folder / HEAD_FILE))
    (folder / META_FILE).write_text(json.dumps({"feature_version": FEATURE_VERSION, **meta}, indent=1,
                                               sort_keys=True) + "\n")


def load_head(folder: str | Path) -> tuple[np.ndarray, dict]:
    from safetensors.numpy import load_file

    folder = Path(folder)
    for f in (HEAD_FILE, META_FILE):
        if not (folder / f).exists():
            raise FileNotFoundError(f"frozen_head model folder {folder}: {f} missing (written by the RM family job)")
    meta = json.loads((folder / META_FILE).read_text())
    if meta.get("feature_version") != FEATURE_VERSION:
        raise ValueError(f"{folder / META_FILE}: feature_version {meta.get('feature_version')!r}, this code "
                         f"computes {FEATURE_VERSION}: retrain the family")
    return load_file(str(folder / HEAD_FILE))["weights"], meta


class FrozenHeadRM(RewardModel):
    kind = "frozen_head"

    def __init__(self, spec: dict, features: HeadFeatures | None = None):
        from .inputs import spec_with_defaults

        spec = spec_with_defaults(spec, self.kind)
        self.name = spec["name"]
        self.weights, meta = load_head(spec["path"])
        if meta.get("name", self.name) != self.name:
            raise ValueError(f"RM {self.name}: the head in {spec['path']} was trained for {meta['name']!r}")
        self.profile_posts = int(meta["profile_posts"]) if spec["use_profile"] else 0
        self.use_profile = self.profile_posts > 0
        self.features = features or HeadFeatures(meta["encoder"])
        if self.features.encoder != meta["encoder"]:
            raise ValueError(f"RM {self.name}: head trained on encoder {meta['encoder']!r}, features from "
                             f"{self.features.encoder!r}")
        self.n_scored = 0

    def score(self, requests: Sequence[ScoreRequest]) -> ScoreOutput:
        if not requests:
            return ScoreOutput(scores=np.zeros(0))
        x = self.features.matrix(requests, self.profile_posts)
        if x.shape[1] != len(self.weights):
            raise ValueError(f"RM {self.name}: {x.shape[1]} features, head has {len(self.weights)} weights")
        self.n_scored += len(requests)
        return ScoreOutput(scores=x @ self.weights)

    def diagnostics(self) -> dict:
        return {"kind": self.kind, "profile_posts": self.profile_posts, "scored": self.n_scored}
