"""Faults a real run meets (issue 24, item 6): a job killed with SIGKILL mid-write, a full disk.

- prbench.io.write_jsonl kills its own process after N rows when PRBENCH_FAULT_KILL_AFTER_ROWS=N
  (and the output's name contains PRBENCH_FAULT_MATCH): a deterministic kill point mid-write. The
  output never appears half-written (temp file + rename) and the rerun gives the same file as an
  uninterrupted run. Checked on the writer, and on a copy of a complete test-config run for a
  scoring (score_benchmark), a sampling (sample_bon) and a judging (judge_bon, its cache shard
  removed so the judge really runs) job.
- A write that runs out of space, on a 64 KiB tmpfs mounted for the test (never the real disk),
  fails with an error naming the file and leaves neither the output nor a temp file.
"""
import filecmp
import json
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from helpers import REPO, SNAKEFILE, snakemake, snakemake_env

from prbench import io

ROWS = [{"i": i, "text": "x" * 50} for i in range(200)]


def _write_in_child(path, kill_after=None, match=""):
    env = snakemake_env()
    env.pop(io.FAULT_ROWS, None)
    if kill_after is not None:
        env.update({io.FAULT_ROWS: str(kill_after), io.FAULT_MATCH: match})
    code = ("import sys; from prbench.io import write_jsonl; "
            "write_jsonl(sys.argv[1], [{'i': i, 'text': 'x' * 50} for i in range(200)])")
    return subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, timeout=60)


def test_kill_mid_write_leaves_no_output_and_the_rerun_is_whole(tmp_path):
    out = tmp_path / "rows.jsonl"
    proc = _write_in_child(out, kill_after=37)
    assert proc.returncode == -9, proc.stderr  # SIGKILL at row 37
    assert not out.exists()
    leftovers = list(tmp_path.glob(".rows.jsonl.*.tmp"))
    assert len(leftovers) == 1 and leftovers[0].read_text().count("\n") >= 37  # it did die mid-write
    assert _write_in_child(out, kill_after=37, match="other_file").returncode == 0  # the match filters
    assert io.read_jsonl(out) == ROWS
    assert not list(tmp_path.glob("*.tmp"))  # the next write of the output removes the leftover


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here (needs root/CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_out_of_space_names_the_file_and_leaves_nothing(small_fs):
    rows = [{"i": i, "text": "y" * 1000} for i in range(200)]  # about 200 KB > 64 KiB
    target = small_fs / "scores" / "pairs.jsonl"
    with pytest.raises(OSError, match=r"pairs\.jsonl: no space left on the device"):
        io.write_jsonl(target, rows)
    assert not target.exists() and not list(target.parent.glob("*.tmp"))
    with pytest.raises(OSError, match=r"table\.csv: no space left"):
        io.write_csv(small_fs / "table.csv", pd.DataFrame(rows))
    assert [p.name for p in small_fs.rglob("*") if p.is_file()] == []
    io.write_jsonl(target, rows[:5])  # the filesystem itself is fine once the write fits
    assert len(io.read_jsonl(target)) == 5


JOBS = [  # (output, the rule that writes it, files to delete first besides the output)
    ("results/scores/length_only/personalized.pairs.jsonl", "score_benchmark", []),
    ("results/bon/demo_policy/shards/0.jsonl", "sample_bon", []),
    ("results/bon/demo_policy/judged.jsonl", "judge_bon", [
     "results/cache/judge/results+bon+demo_policy+judged.jsonl"]),
]


@pytest.mark.slow
@pytest.mark.dag
@pytest.mark.parametrize("target,rule,extra", JOBS, ids=[j[1] for j in JOBS])
def test_killed_job_reruns_to_the_same_output(test_config_run, tmp_path, target, rule, extra):
    base, _ = test_config_run
    work = tmp_path / "w"
    shutil.copytree(base, work, symlinks=True)
    for rel in [target, *extra]:
        (work / rel).unlink(missing_ok=True)
    args = ["--snakefile", SNAKEFILE, "--directory", work, "--configfile", REPO / "configs/test.yaml", "--cores", "1",
            target]
    name = target.rsplit("/", 1)[1]
    killed = snakemake(*args, env=snakemake_env(HF_HUB_OFFLINE="1", PYTHONHASHSEED="0",
                                                **{io.FAULT_ROWS: "5", io.FAULT_MATCH: name}), timeout=600)
    out = killed.stdout + killed.stderr
    assert killed.returncode != 0 and f"Error in rule {rule}" in out, out[-3000:]
    assert not (work / target).exists()
    rerun = snakemake(*args, env=snakemake_env(HF_HUB_OFFLINE="1", PYTHONHASHSEED="0"), timeout=600)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
    assert filecmp.cmp(base / target, work / target, shallow=False)
    for rel in extra:  # the judge cache: every key once
        keys = [json.loads(line)["key"] for line in (work / rel).read_text().splitlines() if line.strip()]
        assert keys and len(keys) == len(set(keys)), rel


def test_truncated_dataset_names_the_config_key_and_path(tmp_path):
    from prbench.data.sources import DataError, iter_source

    folder = tmp_path / "bench" / "Lifestyle"
    folder.mkdir(parents=True)
    full = "".join(json.dumps({"id": i, "question": "q" * 40}) + "\n" for i in range(5))
    (folder / "test.jsonl").write_text(full[: len(full) - 30])  # cut inside the last row
    with pytest.raises(DataError, match=r"config key data.personalized.source: .*test\.jsonl: row 5: invalid JSON "
                                        r".*the file ends mid-row: truncated\?"):
        list(iter_source(str(tmp_path / "bench"), "test", "Lifestyle", key="data.personalized.source"))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": list(range(100))}), folder / "train-00000.parquet")
    data = (folder / "train-00000.parquet").read_bytes()
    (folder / "train-00000.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"config key data.personalized.source: .*train-00000\.parquet: unreadable "
                                        r"parquet file, truncated or corrupt"):
        list(iter_source(str(tmp_path / "bench"), "train", "Lifestyle", key="data.personalized.source"))
