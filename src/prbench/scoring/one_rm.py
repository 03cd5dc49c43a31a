"""Score one more RM without editing the config: `make score RM=<hub id or local folder>`.

    python -m prbench.scoring.one_rm --rm Skywork/Skywork-Reward-V2-Qwen3-4B [--kind classifier]
        [--profile] [--name NAME] [--config config.yaml] [--directory .] [--cores all] [-- SNAKEMAKE ARGS]

1. Writes an overlay config `results/score_one/<name>.yaml` that adds one `reward_models` entry
   (`kind`, `path`, `use_profile`, `trust_remote_code`, optional `revision` and `params_b`) and passes it to
   Snakemake as a second `--configfile` after the chosen config (a bare `--config` would not do:
   the Snakefile reads config.yaml only when no config is given, and this overlay must sit on top
   of it). The name defaults to the model's last path part, lower-cased, other characters `_`.
2. Asks Snakemake only for that RM's benchmark score files (`results/scores/<name>/<bench>.*`):
   data preparation, retrieval and its scoring jobs run, nothing downstream and no other RM.
3. Recomputes the accuracy rows of the new RM and of every configured RM whose score files already
   exist there (`prbench.scoring.benchmark.accuracy_table`, the config's `scoring.bootstrap` and
   `seed`, i.e. the numbers of `benchmark_accuracy.csv`; an RM family, an entry with a `grid`, counts as
   the members it expands to, `prbench.rms.family`), writes them to
   `results/score_one/<name>.csv` (tidy) and `results/score_one/<name>.md` (the leaderboard's
   benchmark columns, `prbench.scoring.leaderboard`), and prints the board with the new RM marked.
"""
from __future__ import annotations

import argparse
import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from ..config import entry_with_defaults
from ..rms import kind_info
from ..rms.family import expand_families
from .benchmark import accuracy_table
from .leaderboard import benchmark_board, markdown

OUT_DIR = "results/score_one"


def default_name(ref: str) -> str:
    """'Skywork/Skywork-Reward-V2-Qwen3-4B' -> 'skywork_reward_v2_qwen3_4b' (a valid RM name)."""
    last = Path(ref.rstrip("/")).name or ref
    name = re.sub(r"[^a-z0-9_]+", "_", last.lower()).strip("_")
    if not name:
        raise ValueError(f"RM {ref!r}: cannot derive a name from it; give one (NAME=...)")
    return name


def overlay(ref: str, kind: str, name: str, use_profile: bool, trust_remote_code: bool = False,
            params_b: float | None = None, revision: str | None = None) -> dict:
    """The overlay config: one `reward_models` entry."""
    info = kind_info(kind, name)
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise ValueError(f"RM name {name!r}: use letters, digits and _ only (config key reward_models)")
    entry: dict = {"kind": kind, "use_profile": bool(use_profile)}
    if info.needs_model:
        entry["path"] = ref
        entry["trust_remote_code"] = bool(trust_remote_code)
        if revision:
            entry["revision"] = revision  # a hub commit, branch or tag (prbench.revisions)
    if params_b is not None:
        entry["params_b"] = float(params_b)
    return {"reward_models": {name: entry}}


def benchmarks(config: dict) -> list[str]:
    return ["personalized"] + list((config.get("data") or {}).get("baselines") or {})


def score_paths(rm: str, bench: str) -> tuple[str, str]:
    return f"results/scores/{rm}/{bench}.accuracy.json", f"results/scores/{rm}/{bench}.pairs.jsonl"


def configured_rms(config: dict) -> tuple[list[str], dict[str, list[str]]]:
    """(every RM name the run scores, in config order, each RM family, an entry with a `grid`,
    replaced by its members; family -> member names). The config itself is left as it is."""
    expanded = copy.deepcopy(config)
    try:
        families = expand_families(expanded)
    except ValueError as exc:
        raise ValueError(f"config: {exc}") from None
    return list(expanded.get("reward_models") or {}), families


def not_scored_text(missing: list[str], families: dict[str, list[str]]) -> str:
    """The RMs left out, a family whose members are all missing named once with its member count."""
    out, left = [], set(missing)
    for fam, members in families.items():
        if members and set(members) <= left:
            out.append(f"{fam} (all {len(members)} members)")
            left -= set(members)
    return ", ".join(out + [rm for rm in missing if rm in left])


def board(directory: Path, config: dict, name: str):
    """The tidy accuracy rows and the ranked board of `name` and every configured RM whose score
    files exist in `directory` (an RM family counts as its members); also the configured RMs left
    out (not scored there yet), by member name."""
    benches = benchmarks(config)
    names, _ = configured_rms(config)
    rms = [r for r in names if r != name] + [name]
    scored, missing = [], []
    for rm in rms:
        paths = [score_paths(rm, b) for b in benches]
        if all((directory / a).exists() and (directory / p).exists() for a, p in paths):
            scored.append(rm)
        elif rm == name:
            raise FileNotFoundError(f"{directory}: the score files of {name} are missing after the run: "
                                    f"{[a for a, _ in paths]}")
        else:
            missing.append(rm)
    acc_paths = [directory / score_paths(rm, b)[0] for rm in scored for b in benches]
    pairs_paths = [directory / score_paths(rm, b)[1] for rm in scored for b in benches]
    scoring = entry_with_defaults(config.get("scoring") or {}, "scoring")
    tidy = accuracy_table(acc_paths, directory / OUT_DIR / f"{name}.csv", pairs_paths=pairs_paths,
                          n_boot=int(scoring["bootstrap"]), seed=int(config["seed"]))
    return tidy, benchmark_board(tidy, scored), missing


def snakemake_exe() -> str:
    here = Path(sys.executable).with_name("snakemake")
    exe = str(here) if here.exists() else shutil.which("snakemake")
    if not exe:
        raise FileNotFoundError("snakemake not found next to this Python nor on PATH (make install)")
    return exe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m prbench.scoring.one_rm", description=__doc__.split("\n")[0])
    ap.add_argument("--rm", required=True, help="hub id or local model folder")
    ap.add_argument("--kind", default="classifier", help="RM kind (prbench.rms.KINDS); default classifier")
    ap.add_argument("--profile", action="store_true", help="show the RM the user's profile (use_profile: true)")
    ap.add_argument("--name", help="its name in the tables (default: from --rm)")
    ap.add_argument("--config", default="config.yaml", help="the run's config (default config.yaml)")
    ap.add_argument("--directory", default=".", help="the run's working directory (default .)")
    ap.add_argument("--snakefile", default="Snakefile")
    ap.add_argument("--cores", default="all")
    ap.add_argument("--trust-remote-code", action="store_true", help="opt in to the model's own code")
    ap.add_argument("--params-b", type=float, help="billions of parameters (GPU count and memory)")
    ap.add_argument("--revision", help="hub commit, branch or tag to load (default: the revision lock's commit)")
    ap.add_argument("snakemake_args", nargs="*", help="more Snakemake arguments, after --")
    a = ap.parse_args(argv)

    config_path = Path(a.config).resolve()
    if not config_path.is_file():
        raise FileNotFoundError(f"config {a.config}: no such file (CONFIG=...)")
    config = yaml.safe_load(config_path.read_text())
    name = a.name or default_name(a.rm)
    names, families = configured_rms(config)
    if name in (config.get("reward_models") or {}):
        raise ValueError(f"{a.config}: reward_models.{name} already exists; give the new RM another name (NAME=...)")
    family = next((f for f, members in families.items() if name in members), None)
    if family is not None:
        raise ValueError(f"{a.config}: {name} is a member of the RM family reward_models.{family}; give the new "
                         f"RM another name (NAME=...)")
    directory = Path(a.directory).resolve()
    ref = a.rm
    if Path(ref).exists() and not (directory / ref).exists():
        ref = str(Path(ref).resolve())  # a local folder named from here, not from the run's directory
    extra = overlay(ref, a.kind, name, a.profile, a.trust_remote_code, a.params_b, a.revision)
    over_path = directory / OUT_DIR / f"{name}.yaml"
    over_path.parent.mkdir(parents=True, exist_ok=True)
    over_path.write_text(yaml.safe_dump(extra, sort_keys=True))
    merged = {**config, "reward_models": {**config["reward_models"], **extra["reward_models"]}}
    targets = [p for b in benchmarks(merged) for p in score_paths(name, b)]
    cmd = [snakemake_exe(), "--snakefile", str(Path(a.snakefile).resolve()), "--directory", str(directory),
           "--configfile", str(config_path), str(over_path), "--cores", str(a.cores), *targets, *a.snakemake_args]
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd)
    if rc != 0:
        print(f"snakemake failed (exit {rc}); see its log above", file=sys.stderr)
        return rc
    if "-n" in a.snakemake_args or "--dry-run" in a.snakemake_args:
        return 0
    print(report(directory, merged, name))
    return 0


def report(directory: Path, config: dict, name: str) -> str:
    """Writes `results/score_one/<name>.csv` and `.md` and returns the text `make score` prints: the
    board of `name` beside every RM of `config` scored in `directory` (family members included), then
    the configured RMs that are not."""
    _, ranked, missing = board(directory, config, name)
    text = markdown(ranked, mark=name)
    (directory / OUT_DIR / f"{name}.md").write_text(text)
    out = [f"\n{name} (marked *) beside the RMs already scored in {directory} "
           f"(accuracy [95% bootstrap CI]; baselines: official score):\n\n{text}"]
    if missing:
        out.append(f"not scored there yet: {not_scored_text(missing, configured_rms(config)[1])}")
    out.append(f"tables: {OUT_DIR}/{name}.csv (tidy rows), {OUT_DIR}/{name}.md")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
