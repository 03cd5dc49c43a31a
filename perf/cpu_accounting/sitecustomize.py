"""Per-process CPU accounting for perf/demo_cpu.py: imported by every Python process whose
PYTHONPATH holds this folder (Python imports `sitecustomize` at start-up). At exit, a process appends
one JSON line to the file named by PRB_CPU_LOG: its pid, parent pid, first arguments, its own user +
system CPU seconds (getrusage) and the wall seconds since this import. Without PRB_CPU_LOG it does
nothing. Numerics of the process are untouched."""
import atexit
import json
import os
import resource
import sys
import time

_T0 = time.time()


def _record():
    path = os.environ.get("PRB_CPU_LOG")
    if not path:
        return
    own = resource.getrusage(resource.RUSAGE_SELF)
    rec = {"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv[:4],
           "cpu": round(own.ru_utime + own.ru_stime, 3), "wall": round(time.time() - _T0, 3)}
    with open(path, "a", encoding="utf-8") as f:  # one short append per process
        f.write(json.dumps(rec) + "\n")


atexit.register(_record)
