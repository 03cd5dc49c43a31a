"""Compare two results/ trees file by file: byte-identical, except that JSON files may differ in
wall-clock fields (tests/helpers.py WALL_CLOCK_KEYS: timings are measurements, not results).
Usage: python compare_outputs.py REF_DIR OTHER_DIR  -> exit 1 and a list of differences."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the helpers the suite shares
from helpers import same_but_wall_clock  # noqa: E402


def compare(ref: Path, other: Path) -> list[str]:
    files_a = {p.relative_to(ref) for p in ref.rglob("*") if p.is_file()}
    files_b = {p.relative_to(other) for p in other.rglob("*") if p.is_file()}
    problems = [f"only in {ref}: {p}" for p in sorted(files_a - files_b)]
    problems += [f"only in {other}: {p}" for p in sorted(files_b - files_a)]
    dropped: set[str] = set()
    for rel in sorted(files_a & files_b):
        try:
            if same_but_wall_clock(rel.name, (ref / rel).read_bytes(), (other / rel).read_bytes(), dropped):
                continue
        except json.JSONDecodeError as e:
            problems.append(f"{rel}: invalid JSON ({e})")
            continue
        problems.append(f"{rel}: contents differ")
    if dropped:
        print(f"ignored wall-clock fields: {sorted(dropped)}", file=sys.stderr)
    print(f"compared {len(files_a & files_b)} files", file=sys.stderr)
    return problems


if __name__ == "__main__":
    probs = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    for p in probs:
        print(p)
    sys.exit(1 if probs else 0)
