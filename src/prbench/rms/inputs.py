"""Shared helpers of the model-backed RM kinds: loading options and fitting inputs to max_length."""
from __future__ import annotations

import importlib
import logging
import re
from pathlib import Path
from typing import Callable

from ..config import entry_with_defaults
from ..models import auto_device, auto_dtype, multi_gpu_kwargs, resolve_model_ref
from ..revisions import hub_kwargs, record_loaded

log = logging.getLogger("prbench.rms")


def spec_with_defaults(spec: dict, kind: str) -> dict:
    """An RM spec with every default filled, so the RM classes read spec[key]: the schema's
    `reward_models.*` entry defaults, and for the runtime keys the rules add beside the entry
    (rules/common.smk rm_spec, DOWNSTREAM_RM_SPEC) the schema's `scoring` defaults of
    max_length / max_tokens_per_batch /
    add_special_tokens / truncation; a direct caller's spec without a name, seed or progress gets
    the kind's name, seed 0 and progress bars. Idempotent."""
    scoring = entry_with_defaults({}, "scoring")
    runtime = {"name": kind, "seed": 0, "progress": True, "max_length": scoring["max_length"],
               "max_tokens_per_batch": scoring["max_tokens_per_batch"],
               "add_special_tokens": scoring["add_special_tokens"], "truncation": scoring["truncation"],
               "order_rule": scoring["order_rule"]}
    return {**runtime, **entry_with_defaults(spec, "reward_models.*")}


def spec_key(spec: dict, key: str) -> str:
    return f"reward_models.{spec.get('name', '<unnamed>')}.{key}"


def model_path(spec: dict) -> str:
    path = spec.get("path")
    if not path:
        raise ValueError(f"config key {spec_key(spec, 'path')}: RM kind {spec.get('kind')!r} needs a model "
                         "(path, train or from_policy)")
    return resolve_model_ref(str(path))


def load_options(spec: dict) -> dict:
    """from_pretrained options of an RM entry: device/dtype auto (bf16 on GPU, fp32 on CPU),
    safetensors by default, remote code only when the entry opts in."""
    spec = entry_with_defaults(spec, "reward_models.*")
    device = auto_device(spec["device"] or "auto")
    return {
        "device": device,
        "dtype": auto_dtype(spec["dtype"] or "auto", device),
        "trust_remote_code": bool(spec["trust_remote_code"]),
        "use_safetensors": bool(spec["use_safetensors"]),
    }


def revision_kwargs(spec: dict, path: str, trust_remote_code: bool | None = None) -> dict:
    """{"revision": ...} for a hub model: the entry's `revision`, else its locked commit; {} for local
    folders and first loads (prbench.revisions). Refuses remote code from an unpinned, unlocked hub id."""
    trust = bool(spec.get("trust_remote_code")) if trust_remote_code is None else trust_remote_code
    return hub_kwargs(path, "model", spec.get("revision"), key=spec_key(spec, "path"), trust_remote_code=trust)


_MISSING_NAME = re.compile(r"cannot import name '(\w+)' from '(transformers(?:\.\w+)*)'")


def _remote_compat(exc: ImportError, patched: set) -> str | None:
    """Compatibility for hub remote code written for transformers 4.x: a docstring constant it
    imports (ArmoRM's `LLAMA_INPUTS_DOCSTRING`) that transformers 5 removed is defined as an empty
    string in that module, in this process only. Returns what was patched, or None."""
    m = _MISSING_NAME.search(str(exc))
    if not m or not m.group(1).endswith("_DOCSTRING") or (m.group(2), m.group(1)) in patched:
        return None
    module = importlib.import_module(m.group(2))
    setattr(module, m.group(1), "")
    patched.add((m.group(2), m.group(1)))
    return f"{m.group(2)}.{m.group(1)}"


def _has_only_pickle_weights(path: str) -> bool:
    p = Path(path)
    if not p.is_dir():
        return False
    names = {f.name for f in p.iterdir()}
    return not any(n.endswith(".safetensors") or n.endswith(".safetensors.index.json") for n in names) and any(
        n.endswith(".bin") or n.endswith(".bin.index.json") for n in names)


def from_pretrained(cls, path: str, spec: dict, **kwargs):
    """cls.from_pretrained with the entry's options, and an error naming the config key that says
    what happened: remote code that does not import, an architecture the class cannot load, or
    weights that are not safetensors."""
    import transformers

    opts = load_options(spec)
    kwargs = {**multi_gpu_kwargs(opts["device"]), **revision_kwargs(spec, path, opts["trust_remote_code"]), **kwargs}
    if opts["use_safetensors"] and _has_only_pickle_weights(path):
        raise RuntimeError(f"config key {spec_key(spec, 'use_safetensors')}: {path!r} has only pickle (.bin) weights; "
                           "safetensors are required by default. Set it to false to allow them.")
    patched: set = set()
    while True:
        try:
            model = cls.from_pretrained(path, dtype=opts["dtype"], trust_remote_code=opts["trust_remote_code"],
                                        use_safetensors=opts["use_safetensors"], **kwargs)
            record_loaded(path, "model", spec.get("revision"), key=spec_key(spec, "path"), loaded=model)
            return model
        except ImportError as exc:
            fixed = _remote_compat(exc, patched)
            if fixed:
                log.warning("RM %s: remote code of %s imports %s, which transformers %s no longer has; defined it "
                            "as an empty docstring (compatibility path, this process only)", spec.get("name"), path,
                            fixed, transformers.__version__)
                continue
            raise RuntimeError(f"config key {spec_key(spec, 'path')}: the remote code of {path!r} does not import "
                               f"under transformers {transformers.__version__}: {exc}") from exc
        except (OSError, ValueError) as exc:
            text = str(exc)
            if "Unrecognized configuration class" in text or "does not recognize this architecture" in text:
                raise RuntimeError(f"config key {spec_key(spec, 'path')}: {cls.__name__} cannot load {path!r} "
                                   f"({text.splitlines()[0]}). If it is a reward model with its own interface, "
                                   f"set {spec_key(spec, 'adapter')} (prbench/rms/adapters.py)") from exc
            if "trust_remote_code" in text and not opts["trust_remote_code"]:
                raise RuntimeError(f"config key {spec_key(spec, 'trust_remote_code')}: {path!r} needs its own "
                                   "modelling code; set it to true if you trust that code") from exc
            hint = ""
            if opts["use_safetensors"] and "safetensors" in text.lower():
                hint = (f" (safetensors weights are required by default; set {spec_key(spec, 'use_safetensors')}: "
                        "false to allow pickle .bin weights)")
            raise RuntimeError(f"config key {spec_key(spec, 'path')}: cannot load {cls.__name__} from {path!r}{hint}: "
                               f"{exc}") from exc
        except Exception as exc:
            if type(exc).__name__ != "SafetensorError":  # safetensors' own error: a corrupt or truncated file
                raise
            raise RuntimeError(f"config key {spec_key(spec, 'path')}: corrupt or truncated safetensors weights in "
                               f"{path!r}: {exc}") from exc


def model_config_dict(spec: dict) -> dict:
    """The raw config.json of an entry's model (local folder or hub cache), without running remote code."""
    from transformers import PretrainedConfig

    path = model_path(spec)
    try:
        cfg, _ = PretrainedConfig.get_config_dict(path, **revision_kwargs(spec, path, False))
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"config key {spec_key(spec, 'path')}: cannot read the model config of {path!r}: {exc}") \
            from exc
    return cfg


def place_model(model, opts: dict, spec: dict):
    """Move a model to the entry's device, unless from_pretrained already spread it over GPUs."""
    if getattr(model, "hf_device_map", None):
        log.info("RM %s: spread over devices %s", spec.get("name"), sorted(set(map(str, model.hf_device_map.values()))))
        return model
    return model.to(opts["device"])


def model_device(model, default: str) -> str:
    """Where inputs go: the device of the input embeddings (the first shard under device_map)."""
    try:
        return str(model.get_input_embeddings().weight.device)
    except (AttributeError, NotImplementedError):
        return default


def load_model_and_tokenizer(auto_cls, spec: dict, name: str, model=None, tokenizer=None, pad_fallback: bool = True):
    """Load (or take) an RM's model and tokenizer. With pad_fallback, a tokenizer with no pad token
    gets its eos as pad (left-padded generation); classifiers choose their own (ClassifierRM).
    Raises naming the RM when neither exists."""
    if model is None or tokenizer is None:
        from transformers import AutoTokenizer

        path = model_path(spec)
        trust = load_options(spec)["trust_remote_code"]
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust, **revision_kwargs(spec, path, trust))
        model = from_pretrained(auto_cls, path, spec)
    if tokenizer.pad_token is None and pad_fallback:
        if tokenizer.eos_token is None:
            raise ValueError(f"RM {name}: tokenizer has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def fit_profile(encode: Callable[[int], list[int]], n_posts: int, max_length: int) -> tuple[list[int], int, bool]:
    """Encode with as many of the top-ranked profile posts as fit in max_length.

    `encode(k)` returns the token ids built with the first k posts. Posts are dropped from the
    lowest-ranked end until the input fits; returns (ids, posts kept, still_too_long).
    """
    k = n_posts
    ids = encode(k)
    while len(ids) > max_length and k > 0:
        k -= 1
        ids = encode(k)
    return ids, k, len(ids) > max_length
