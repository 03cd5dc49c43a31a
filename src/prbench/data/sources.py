"""Where benchmark rows come from: a Hugging Face hub id or a local folder.

A source is local when the path exists or starts with `results/`, `./`, `../`, `/` or `~`;
anything else is a hub id loaded with `datasets.load_dataset` (network needed at job time
only, never at DAG parse time). Rows come back with a label (file path or hub coordinates)
and a 1-based row number so every error can name the file, row and field.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from ..config import with_defaults
from ..models import LOCAL_PREFIXES
from ..revisions import hub_kwargs, record_loaded
from .checks import DataError
from .demo_world import DEMO_PREFIX, demo_general_dirs, demo_outputs


def is_local(source: str) -> bool:
    return source.startswith(LOCAL_PREFIXES) or Path(os.path.expanduser(source)).exists()


def _local_candidates(folder: Path, split: str) -> list[Path]:
    jsonl = [folder / f"{split}.jsonl", folder / f"{split}.jsonl.gz"]
    found = [p for p in jsonl if p.exists()]
    if found:
        return found[:1]
    # a hub snapshot (e.g. `huggingface-cli download --repo-type dataset`) stores parquet shards
    shards = sorted(folder.glob(f"{split}-*.parquet")) + sorted(folder.glob(f"{split}.parquet"))
    return shards


def local_split_files(folder: str | os.PathLike, split: str, key: str = "source") -> list[Path]:
    folder = Path(os.path.expanduser(str(folder)))
    files = _local_candidates(folder, split)
    if not files:
        raise DataError(
            f"config key {key}: no file for split {split!r} in {folder} "
            f"(expected {folder / (split + '.jsonl')} or {split}-*.parquet shards)"
        )
    return files


def iter_local(files: list[Path], key: str | None = None) -> Iterator[tuple[str, int, dict]]:
    """(origin label, 1-based row/line number, row) from jsonl or parquet files. A file that does
    not read (truncated, corrupt) is a DataError naming the config `key` and the path."""
    where = f"config key {key}: " if key else ""
    for path in files:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                table = pq.read_table(path)
            except Exception as exc:  # pyarrow.ArrowInvalid / OSError on a truncated or corrupt file
                raise DataError(f"{where}{path}: unreadable parquet file, truncated or corrupt "
                                f"({type(exc).__name__}: {exc})") from None
            for i, row in enumerate(table.to_pylist(), 1):
                yield str(path), i, row
            continue
        import gzip

        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    cut = "" if line.endswith("\n") else ", the file ends mid-row: truncated?"
                    raise DataError(f"{where}{path}: row {lineno}: invalid JSON ({exc.msg}{cut})") from None
                if not isinstance(row, dict):
                    raise DataError(f"{where}{path}: row {lineno}: expected a JSON object, got {type(row).__name__}")
                yield str(path), lineno, row


def iter_hub(repo: str, name: str | None, split: str, revision: str | None = None,
             key: str = "source") -> Iterator[tuple[str, int, dict]]:
    """Rows of a hub dataset config/split via datasets.load_dataset, at `revision` (the entry's
    pinned one), else the lock's commit, else the default branch, recorded in the lock
    (prbench.revisions)."""
    import datasets

    rev = hub_kwargs(repo, "dataset", revision, key=key)
    label = f"hf://{repo}" + (f"@{rev['revision']}" if rev else "") + (f"[{name}]" if name else "") + f"/{split}"
    try:
        ds = datasets.load_dataset(repo, name, split=split, **rev) if name else \
            datasets.load_dataset(repo, split=split, **rev)
    except Exception as exc:  # network, unknown config, unknown split: say which source failed
        raise DataError(f"{label}: could not load hub dataset ({type(exc).__name__}: {exc})") from exc
    record_loaded(repo, "dataset", revision, key=key)
    for i, row in enumerate(ds, 1):
        yield label, i, dict(row)


def iter_source(
    source: str, split: str, subset: str | None = None, key: str = "source", revision: str | None = None
) -> Iterator[tuple[str, int, dict]]:
    """Rows of one split: local `{source}[/{subset}]/{split}.jsonl` or the hub config `subset`."""
    if is_local(source):
        folder = Path(os.path.expanduser(source))
        if subset:
            folder = folder / subset
        yield from iter_local(local_split_files(folder, split, key), key)
    else:
        yield from iter_hub(source, subset, split, revision, key)


def local_input_files(source: str, split: str, subset: str | None = None) -> list[str]:
    """The files a local source will read (for Snakemake inputs); [] for hub ids."""
    if not is_local(source):
        return []
    folder = Path(os.path.expanduser(source)) / (subset or "")
    try:
        return [str(p) for p in local_split_files(folder, split)]
    except DataError:
        return [str(folder / f"{split}.jsonl")]


# ---- Snakemake input helpers (rules/data.smk) -----------------------------------------------
def personalized_input_files(config: dict) -> list[str]:
    """Files rule prepare_personalized reads: the demo world's outputs in the demo, the files of
    a local folder (edits rerun the job), nothing for a hub id."""
    pers = with_defaults(config["data"]["personalized"], "data.personalized")
    demo = with_defaults(config.get("demo"), "demo")["enabled"]
    if demo and pers["source"].startswith(DEMO_PREFIX):
        files = list(demo_outputs(config)["personalized"])
    else:
        splits = [pers["split"]] + ([pers["train_split"]] if pers["train_split"] else [])
        files = [f for s in pers["subsets"] for sp in splits for f in local_input_files(pers["source"], sp, s)]
    ds = pers["downstream"]
    if ds:  # the downstream prompt source (LaMP-QA schema): its local files, or the demo world's
        subs = ds["subsets"] or pers["subsets"]
        splits = [ds["train_split"], ds["eval_split"]]
        if demo and ds["source"].startswith(DEMO_PREFIX):
            extra = [f"{ds['source'].rstrip('/')}/{s}/{sp}.jsonl" for s in subs for sp in splits]
        else:
            extra = [f for s in subs for sp in splits for f in local_input_files(ds["source"], sp, s)]
        files += [f for f in extra if f not in files]
    return files


def baseline_input_files(config: dict, name: str) -> list[str]:
    if with_defaults(config.get("demo"), "demo")["enabled"] and name in demo_general_dirs(config):
        return demo_outputs(config)[name]
    b = with_defaults(config["data"]["baselines"][name], f"data.baselines.{name}")
    splits = [b["split"]] + ([b["train_split"]] if b["train_split"] else [])
    return [f for sp in splits for f in local_input_files(b["source"], sp)]
