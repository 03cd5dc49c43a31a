"""README's layout table (the table under "## Layout") names every tracked top-level folder, and
every path it names exists."""
import fnmatch
import re
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, tracked_files


def layout_paths(readme: str) -> list[str]:
    """The backticked paths in the first column of the table under "## Layout"."""
    start = readme.index("\n## Layout\n")
    nxt = readme.find("\n## ", start + 1)
    section = readme[start:] if nxt < 0 else readme[start:nxt]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    paths = []
    for row in rows[2:]:  # past the header and the |---| line
        first = row.strip("|").split("|")[0]
        paths += re.findall(r"`([^`]+)`", first)
    return paths


def named_folders(paths: list[str]) -> set[str]:
    """Top-level folders the table names: the first part of every path with a '/'."""
    return {p.split("/")[0] for p in paths if "/" in p}


def expand_braces(path: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m.group(1).split(",")
            for x in expand_braces(path[:m.start()] + alt + path[m.end():])]


def missing_from_table(folders: set[str], paths: list[str]) -> list[str]:
    return sorted(folders - named_folders(paths))


def not_existing(paths: list[str], root: Path) -> list[str]:
    return sorted(p for p in paths if not all(list(root.glob(x.rstrip("/"))) for x in expand_braces(p)))


def _ignored_names(root: Path) -> list[str]:
    gitignore = root / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.exists() else []
    return [ln.strip().strip("/") for ln in lines if ln.strip() and not ln.startswith("#")] + [".git"]


def tracked_top_folders(root: Path) -> set[str]:
    """Top-level folders holding a tracked file (`git ls-files`); without git, the folders on disk
    that .gitignore does not name."""
    try:
        names = tracked_files(root)
    except (OSError, subprocess.CalledProcessError):
        names = []
    if names:
        return {name.split("/")[0] for name in names if "/" in name}
    ignored = _ignored_names(root)
    return {p.name for p in root.iterdir()
            if p.is_dir() and not any(fnmatch.fnmatch(p.name, pat) for pat in ignored)}


README = (REPO / "README.md").read_text(encoding="utf-8")


def test_every_tracked_top_level_folder_is_in_the_layout_table():
    folders = tracked_top_folders(REPO)
    assert {"src", "rules", "tests", "docs", ".ci"} <= folders
    assert missing_from_table(folders, layout_paths(README)) == []


def test_the_layout_table_names_only_what_exists():
    paths = layout_paths(README)
    assert "Snakefile" in paths and "config.yaml" in paths
    assert not_existing(paths, REPO) == []


SYNTHETIC = """# x

## Layout

| path | what |
|---|---|
| `Snakefile`, `rules/*.smk` | the DAG (`not/a/path` in the second column is not read) |
| `profiles/{demo,local}` | profiles |

## Next
| `gone/` | a table outside the section |
"""


def test_the_check_fails_on_a_missing_or_an_extra_folder(tmp_path: Path):
    paths = layout_paths(SYNTHETIC)
    assert paths == ["Snakefile", "rules/*.smk", "profiles/{demo,local}"]
    assert missing_from_table({"rules", "profiles"}, paths) == []
    assert missing_from_table({"rules", "profiles", ".ci", "docs"}, paths) == [".ci", "docs"]
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "a.smk").write_text("")
    (tmp_path / "Snakefile").write_text("")
    (tmp_path / "profiles" / "demo").mkdir(parents=True)
    assert not_existing(paths, tmp_path) == ["profiles/{demo,local}"]  # profiles/local is absent
    (tmp_path / "profiles" / "local").mkdir()
    assert not_existing(paths, tmp_path) == []


def test_the_filesystem_fallback_skips_ignored_folders(tmp_path: Path):
    for name in ("src", ".ci", "results", "pkg.egg-info"):
        (tmp_path / name).mkdir()
    (tmp_path / ".gitignore").write_text("results/\n*.egg-info/\n# a comment\n")
    assert tracked_top_folders(tmp_path) == {"src", ".ci"}


@pytest.mark.parametrize("path,expected", [("a/{b,c}/d", ["a/b/d", "a/c/d"]), ("x", ["x"])])
def test_expand_braces(path, expected):
    assert expand_braces(path) == expected
