"""LLM rubric judges (`judge.backend` transformers | vllm): the rubric prompt, greedy first, then
`judge.retries` seeded sampled attempts for unparseable replies, then NaN (counted and reported).

The rubric prompt is built here (not in the RMs' code paths) on purpose: only the judge may see
the rubric. Its wording lives in a template file (prompts.rubric_user, config key
`prompts.templates`); the template's hash is part of the judge id.
"""
from __future__ import annotations

import hashlib
from abc import abstractmethod
from typing import Sequence

from .. import prompts as _prompt_templates
from ..generation import generation_config, neutralize, vllm_sampling_kwargs
from ..models import auto_device, auto_dtype, multi_gpu_kwargs, resolve_model_ref
from ..prompts import render_chat
from ..seeding import stable_seed
from .base import JudgeItem, JudgeResult, RubricJudge, _result, log, parse_ratings

# RUBRIC_TEMPLATE is the bundled default's text, kept for reference.
RUBRIC_TEMPLATE = (
    (_prompt_templates.TEMPLATE_ROOT / "default" / "rubric_user.txt").read_text(encoding="utf-8").rstrip("\n")
)


def rubric_messages(item: JudgeItem) -> list[dict]:
    return _prompt_templates.rubric_messages(item.question, item.answer, item.aspects)


def _rubric_hash() -> str:
    """Hash of the active rubric template (system + user): part of the judge id, so a changed
    prompt never reuses cached ratings."""
    tpl = _prompt_templates.active_templates()
    system = tpl.get("rubric_system")
    text = f"{system}\x00{tpl.get('rubric_user')}" if system else tpl.get("rubric_user")
    return hashlib.sha256(text.encode()).hexdigest()[:8]


class _LLMJudge(RubricJudge):
    """Shared retry logic: greedy first, then `retries` seeded sampled attempts for failures."""

    retries: int
    seed: int

    @abstractmethod
    def _generate(self, prompts: list[str], attempt: int, seeds: list[int]) -> list[str]:
        ...

    def _prompt(self, item: JudgeItem) -> str:
        return render_chat(self.tokenizer, rubric_messages(item), add_generation_prompt=True)

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        prompts = [self._prompt(it) for it in items]
        ratings: list[list[int] | None] = [None] * len(items)
        failures = [0] * len(items)
        todo = list(range(len(items)))
        for attempt in range(self.retries + 1):
            if not todo:
                break
            seeds = [stable_seed(self.seed, "judge", attempt, items[i].question, items[i].answer) for i in todo]
            outs = self._generate([prompts[i] for i in todo], attempt, seeds)
            still = []
            for i, text in zip(todo, outs):
                r = parse_ratings(text, len(items[i].aspects))
                if r is None:
                    failures[i] += 1
                    still.append(i)
                else:
                    ratings[i] = r
            todo = still
        if todo:
            log.warning("judge %s: %d of %d items unparseable after %d attempts (score NaN)",
                        self.judge_id, len(todo), len(items), self.retries + 1)
        return [_result(ratings[i] if ratings[i] is not None else [None] * len(it.aspects), failures[i])
                for i, it in enumerate(items)]


class TransformersJudge(_LLMJudge):
    def __init__(self, model_ref: str, max_new_tokens: int = 256, batch_size: int = 16, retries: int = 1,
                 seed: int = 0, trust_remote_code: bool = False, use_safetensors: bool = True,
                 device: str = "auto", dtype: str = "auto", model=None, tokenizer=None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = auto_device(device)
        path = resolve_model_ref(model_ref)
        if model is None:
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
            spread = multi_gpu_kwargs(self.device)  # a 32B judge over the job's GPUs (device_map="auto")
            model = AutoModelForCausalLM.from_pretrained(
                path, dtype=auto_dtype(dtype, self.device), trust_remote_code=trust_remote_code,
                use_safetensors=use_safetensors, **spread)
            if not spread:
                model = model.to(self.device)
            else:
                self.device = str(model.get_input_embeddings().weight.device)
        model.eval()
        neutralize(model)  # greedy means greedy: the model's generation_config.json is ignored
        self.model, self.tokenizer = model, tokenizer
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.retries, self.seed = retries, seed
        # the cache key covers the loaded snapshot's revision (hub commit; "local" for a folder) and
        # the weights' dtype (bf16 and fp32 judgements differ)
        revision = getattr(getattr(model, "config", None), "_commit_hash", None) or "local"
        self.judge_id = (f"transformers:{model_ref}@{revision}:{_rubric_hash()}:{max_new_tokens}:{retries}:{seed}"
                         f":{str(next(model.parameters()).dtype).replace('torch.', '')}")

    def _generate(self, prompts, attempt, seeds):
        import torch

        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        texts = [""] * len(prompts)
        for b in range(0, len(order), self.batch_size):
            idx = order[b:b + self.batch_size]
            enc = self.tokenizer([prompts[i] for i in idx], return_tensors="pt", padding=True,
                                 add_special_tokens=False).to(self.device)
            kw = dict(max_new_tokens=self.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
                      eos_token_id=self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id)
            if attempt == 0:
                cfg = generation_config(do_sample=False, **kw)
            else:
                torch.manual_seed(seeds[idx[0]])  # seeded retry, deterministic per batch
                cfg = generation_config(do_sample=True, temperature=0.7, top_p=0.95, **kw)
            with torch.no_grad():
                gen = self.model.generate(**enc, generation_config=cfg)
            dec = self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            for i, t in zip(idx, dec):
                texts[i] = t
        return texts


class VLLMJudge(_LLMJudge):
    def __init__(self, model_ref: str, max_new_tokens: int = 256, retries: int = 1, seed: int = 0,
                 trust_remote_code: bool = False, dtype: str = "auto", engine: dict | None = None, **_):
        try:
            from vllm import LLM
        except ImportError as exc:  # pragma: no cover - optional dependency
            raise ImportError("config key judge.backend: 'vllm' selected but vllm is not installed "
                              "(pip install 'prbench[vllm]')") from exc
        self.llm = LLM(model=resolve_model_ref(model_ref), trust_remote_code=trust_remote_code,
                       dtype=dtype if dtype != "auto" else "auto", seed=seed, **(engine or {}))
        self.tokenizer = self.llm.get_tokenizer()
        self.max_new_tokens, self.retries, self.seed = max_new_tokens, retries, seed
        self.judge_id = f"vllm:{model_ref}:{_rubric_hash()}:{max_new_tokens}:{retries}:{seed}:{dtype}"

    def _generate(self, prompts, attempt, seeds):  # pragma: no cover - needs vllm + GPU
        from vllm import SamplingParams

        if attempt == 0:
            params = [SamplingParams(max_tokens=self.max_new_tokens, **vllm_sampling_kwargs(0.0, 1.0)) for _ in prompts]
        else:
            params = [SamplingParams(max_tokens=self.max_new_tokens, seed=s, **vllm_sampling_kwargs(0.7, 0.95))
                      for s in seeds]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return [o.outputs[0].text for o in outs]
