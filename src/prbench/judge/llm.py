"""LLM rubric judges (`judge.backend` transformers | vllm): the rubric prompt, greedy first, then
`judge.retries` seeded sampled attempts for unparseable replies, then the failure rule's score
(`judge.failure`: NaN = excluded, or 0.0), counted and reported either way (`JudgeResult.failed`).

The protocol settings (config keys): `judge.system_turn` (a system turn from the template set's
rubric_system.txt), `judge.aspect_format` (numbered aspects + "Aspect i: r" replies, or aspect
names joined by ", " + a bare list reply: template role rubric_list_user), `judge.aggregate`
(per_aspect: one 0/1/2 rating per aspect, all required; mean_found: the mean of the numbers found in
the reply), `judge.failure`, `judge.retries`, `judge.max_new_tokens`. All of them are in the judge
id (so in the cache key); the default values add nothing to it, so caches of earlier runs stay valid.

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
from ..revisions import hub_kwargs, record_loaded, resolve
from ..seeding import stable_seed
from .base import (
    AGGREGATES,
    JudgeItem,
    JudgeResult,
    RubricJudge,
    _found_result,
    _result,
    failure_score,
    log,
    numbers_found,
    parse_ratings,
)

# RUBRIC_TEMPLATE is the bundled default's text, kept for reference.
RUBRIC_TEMPLATE = (
    (_prompt_templates.TEMPLATE_ROOT / "default" / "rubric_user.txt").read_text(encoding="utf-8").rstrip("\n")
)


def rubric_messages(item: JudgeItem, aspect_format: str = "numbered", system_turn: bool = False) -> list[dict]:
    return _prompt_templates.rubric_messages(item.question, item.answer, item.aspects,
                                             aspect_format=aspect_format, system_turn=system_turn)


def _rubric_hash(aspect_format: str = "numbered", system_turn: bool = False) -> str:
    """Hash of the rubric template in use (system turn if any + user turn): part of the judge id,
    so a changed prompt never reuses cached ratings."""
    tpl = _prompt_templates.active_templates()
    system = tpl.get("rubric_system") if system_turn else None
    user = tpl.get(_prompt_templates.rubric_user_role(aspect_format))
    text = f"{system}\x00{user}" if system else str(user)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def protocol_id(aspect_format: str = "numbered", system_turn: bool = False, aggregate: str = "per_aspect",
                failure: str = "exclude") -> str:
    """The judge-id suffix of the protocol settings that are not the defaults ("" for the defaults,
    so the ids, and cache keys, of earlier runs are unchanged)."""
    parts = [f"fmt={aspect_format}" if aspect_format != "numbered" else "",
             "sys" if system_turn else "",
             f"agg={aggregate}" if aggregate != "per_aspect" else "",
             f"fail={failure}" if failure != "exclude" else ""]
    return "".join(f":{p}" for p in parts if p)


class _LLMJudge(RubricJudge):
    """Shared retry logic: greedy first, then `retries` seeded sampled attempts for failures."""

    retries: int
    seed: int
    aspect_format: str = "numbered"
    system_turn: bool = False
    aggregate: str = "per_aspect"
    failure: str = "exclude"

    def _protocol(self, aspect_format: str, system_turn: bool, aggregate: str, failure: str) -> str:
        """Check and keep the protocol settings; returns their judge-id part (rubric hash + suffix)."""
        if aggregate not in AGGREGATES:
            raise ValueError(f"config key judge.aggregate: {aggregate!r} is not one of {list(AGGREGATES)}")
        failure_score(failure)  # checks the name
        if aggregate == "mean_found" and aspect_format != "joined":
            raise ValueError("config key judge.aggregate: mean_found needs judge.aspect_format joined (a reply in "
                             "the numbered format names the aspect numbers, which mean_found would average)")
        # checks the format's name and that the template set has what it needs (fails before any model loads)
        rubric_messages(JudgeItem("q", "a", ("x",)), aspect_format, bool(system_turn))
        self.aspect_format, self.system_turn = aspect_format, bool(system_turn)
        self.aggregate, self.failure = aggregate, failure
        return _rubric_hash(aspect_format, self.system_turn) + protocol_id(aspect_format, self.system_turn,
                                                                          aggregate, failure)

    def _parse(self, text: str, item: JudgeItem) -> JudgeResult | None:
        """The reply's result, or None when it cannot be parsed under judge.aggregate."""
        if self.aggregate == "mean_found":
            nums = numbers_found(text)
            return None if nums is None else _found_result(nums, 0)
        r = parse_ratings(text, len(item.aspects))
        return None if r is None else _result(r, 0)

    def _failed(self, item: JudgeItem, failures: int) -> JudgeResult:
        if self.aggregate == "mean_found":
            return _found_result(None, failures, self.failure)
        return _result([None] * len(item.aspects), failures, self.failure)

    @abstractmethod
    def _generate(self, prompts: list[str], attempt: int, seeds: list[int]) -> list[str]:
        ...

    def _prompt(self, item: JudgeItem) -> str:
        return render_chat(self.tokenizer, rubric_messages(item, self.aspect_format, self.system_turn),
                           add_generation_prompt=True)

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        prompts = [self._prompt(it) for it in items]
        parsed: list[JudgeResult | None] = [None] * len(items)
        failures = [0] * len(items)
        todo = list(range(len(items)))
        for attempt in range(self.retries + 1):
            if not todo:
                break
            seeds = [stable_seed(self.seed, "judge", attempt, items[i].question, items[i].answer) for i in todo]
            outs = self._generate([prompts[i] for i in todo], attempt, seeds)
            still = []
            for i, text in zip(todo, outs):
                r = self._parse(text, items[i])
                if r is None:
                    failures[i] += 1
                    still.append(i)
                else:
                    parsed[i] = r
            todo = still
        if todo:
            log.warning("judge %s: %d of %d items unparseable after %d attempts (score %s by judge.failure=%s; "
                        "counted as failed)", self.judge_id, len(todo), len(items), self.retries + 1,
                        failure_score(self.failure), self.failure)
        out = []
        for i, it in enumerate(items):
            r = parsed[i]
            out.append(self._failed(it, failures[i]) if r is None
                       else JudgeResult(r.score, r.ratings, failures[i], False))
        return out


class TransformersJudge(_LLMJudge):
    def __init__(self, model_ref: str, max_new_tokens: int = 256, batch_size: int = 16, retries: int = 1,
                 seed: int = 0, trust_remote_code: bool = False, use_safetensors: bool = True,
                 device: str = "auto", dtype: str = "auto", model=None, tokenizer=None,
                 aspect_format: str = "numbered", system_turn: bool = False, aggregate: str = "per_aspect",
                 failure: str = "exclude", revision: str | None = None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        protocol = self._protocol(aspect_format, system_turn, aggregate, failure)
        self.device = auto_device(device)
        path = resolve_model_ref(model_ref)
        if model is None:
            # judge.revision, else the locked commit (prbench.revisions); {} for a local folder
            rev = hub_kwargs(path, "model", revision, key="judge.model", trust_remote_code=trust_remote_code)
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **rev)
            spread = multi_gpu_kwargs(self.device)  # a 32B judge over the job's GPUs (device_map="auto")
            model = AutoModelForCausalLM.from_pretrained(
                path, dtype=auto_dtype(dtype, self.device), trust_remote_code=trust_remote_code,
                use_safetensors=use_safetensors, **spread, **rev)
            record_loaded(path, "model", revision, key="judge.model", loaded=model)
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
        # the cache key covers the loaded snapshot's revision (the hub commit pinned or locked,
        # prbench.revisions; "local" for a folder) and the weights' dtype (bf16 and fp32 judgements differ)
        loaded = resolve(path, "model", revision) or getattr(getattr(model, "config", None), "_commit_hash", None)
        self.judge_id = (f"transformers:{model_ref}@{loaded or 'local'}:{protocol}:{max_new_tokens}:{retries}:{seed}"
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
                 trust_remote_code: bool = False, dtype: str = "auto", engine: dict | None = None,
                 aspect_format: str = "numbered", system_turn: bool = False, aggregate: str = "per_aspect",
                 failure: str = "exclude", revision: str | None = None, **_):
        try:
            from vllm import LLM
        except ImportError as exc:  # pragma: no cover - optional dependency
            raise ImportError("config key judge.backend: 'vllm' selected but vllm is not installed "
                              "(pip install 'prbench[vllm]')") from exc
        protocol = self._protocol(aspect_format, system_turn, aggregate, failure)
        path = resolve_model_ref(model_ref)
        rev = hub_kwargs(path, "model", revision, key="judge.model", trust_remote_code=trust_remote_code)
        self.llm = LLM(model=path, trust_remote_code=trust_remote_code, dtype=dtype if dtype != "auto" else "auto",
                       seed=seed, **({**rev, "tokenizer_revision": rev["revision"]} if rev else {}), **(engine or {}))
        record_loaded(path, "model", revision, key="judge.model")
        self.tokenizer = self.llm.get_tokenizer()
        self.max_new_tokens, self.retries, self.seed = max_new_tokens, retries, seed
        # a pinned judge.revision is part of the cache key (a locked one is what the unpinned key loaded)
        pin = f"@{revision}" if revision else ""
        self.judge_id = f"vllm:{model_ref}{pin}:{protocol}:{max_new_tokens}:{retries}:{seed}:{dtype}"

    def _generate(self, prompts, attempt, seeds):  # pragma: no cover - needs vllm + GPU
        from vllm import SamplingParams

        if attempt == 0:
            params = [SamplingParams(max_tokens=self.max_new_tokens, **vllm_sampling_kwargs(0.0, 1.0)) for _ in prompts]
        else:
            params = [SamplingParams(max_tokens=self.max_new_tokens, seed=s, **vllm_sampling_kwargs(0.7, 0.95))
                      for s in seeds]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return [o.outputs[0].text for o in outs]
