"""Multi-process PPO launcher: one training process per GPU the job holds.

`run_ppo_job(spec, processes)` runs `prbench.downstream.ppo.train.train_ppo` in this process when `processes` is
0 or 1 (the default), else through `torchrun` (`python -m torch.distributed.run --standalone
--nproc_per_node N -m prbench.downstream.ppo.launch SPEC.json`): every process trains on its slice of each
rollout batch (DDP over NCCL on GPUs, gloo on CPU), process 0 writes checkpoints, the final policy,
the log and the summary. With more than one GPU the RM is put on the last GPU (`rm_device`), so the
job holds `processes + 1` GPUs. The spec is a JSON-able dict of train_ppo's arguments.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from ...io import read_json, write_json
from ...log import setup_logging
from ...prompts import configure

log = logging.getLogger("prbench.downstream.ppo.launch")

SPEC_KEYS = ("policy_path", "rm_spec", "train_prompts", "out_dir", "model_out", "log_csv", "ppo_cfg", "seed")
# train_ppo's keyword arguments; absent = its defaults
OPTIONAL_KEYS = ("run_name", "trust_remote_code", "subset", "revision")


def _train(spec: dict, device: str = "auto") -> dict:
    from .train import train_ppo

    if spec.get("prompts") is not None:  # the config's prompt templates, in every process
        configure(spec["prompts"])

    missing = [k for k in SPEC_KEYS if k not in spec]
    if missing:
        raise ValueError(f"PPO launch spec lacks {missing}")
    return train_ppo(*(spec[k] for k in SPEC_KEYS), device=device, **{k: spec[k] for k in OPTIONAL_KEYS if k in spec})


def run_ppo_job(spec: dict, processes: int, *, cpu: bool = False, timeout: float | None = None) -> dict:
    """Train one PPO run with `processes` training processes (<= 1: in this process)."""
    if processes <= 1:
        return _train(spec, spec.get("device", "auto"))
    cmd, env, summary_path = launch_command(spec, processes, cpu=cpu)
    log.info("launching %d PPO processes: %s", processes, " ".join(cmd))
    proc = subprocess.run(cmd, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"PPO training processes failed (exit {proc.returncode}); see the log above")
    return read_json(summary_path)


def launch_command(spec: dict, processes: int, *, cpu: bool = False) -> tuple[list[str], dict, Path]:
    """(torchrun command, environment, summary path) of a `processes`-process PPO run."""
    out_dir = Path(spec["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_path = out_dir / "launch_spec.json"
    summary_path = out_dir / "launch_summary.json"
    summary_path.unlink(missing_ok=True)
    write_json(spec_path, dict(spec, summary_out=str(summary_path), cpu=cpu))
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3])  # src/: this file is src/prbench/downstream/ppo/launch.py
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if cpu:  # gloo backend
        env["ACCELERATE_USE_CPU"] = "true"
        env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
           "-m", "prbench.downstream.ppo.launch", str(spec_path)]
    return cmd, env, summary_path


def main(argv=None) -> int:
    import torch

    argv = sys.argv[1:] if argv is None else argv
    spec = read_json(argv[0])
    rank, local = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    if spec.get("log"):
        setup_logging(f"{spec['log']}.rank{rank}")  # beside the job's log, which the parent writes
    else:
        logging.basicConfig(level=logging.INFO, format=f"[rank {rank}] %(levelname)s %(name)s: %(message)s")
    if spec.get("cpu") or not torch.cuda.is_available():
        device = "cpu"
        torch.set_num_threads(max(1, int(spec.get("threads_per_process", 1))))
    else:
        device = f"cuda:{local}"
        torch.cuda.set_device(local)
        n_gpu = torch.cuda.device_count()
        rm_spec = dict(spec["rm_spec"] or {})
        if n_gpu > int(os.environ.get("LOCAL_WORLD_SIZE", 1)) and "device" not in rm_spec:
            rm_spec["device"] = f"cuda:{n_gpu - 1}"  # the RM's own GPU
        spec["rm_spec"] = rm_spec
    summary = _train(spec, device)
    if rank == 0 and spec.get("summary_out"):
        write_json(spec["summary_out"], summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
