"""Every reference to a section of a project document (`perf/README.md, "CI time"`, `docs/DESIGN.md,
"Judge cache"`, `README.md "..."`) names a heading that exists: the quoted words start a heading (or a
paragraph's bold opening) of that file. The documents are rewritten as the project changes (history
moves to CHANGELOG.md, which is not checked); a reference left pointing at a heading that is gone is
a dead end for the reader."""
import re
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, tracked_files

SUFFIXES = (".md", ".py", ".smk", ".yaml", ".yml", ".txt", ".sh", ".rst")
NAMED = {"Makefile", "Snakefile", ".ci/run"}
BREAK = "\x00"  # a line break (and the next line's indent and comment sign) in the joined text
# `<path>.md, "words"` (the comma's form may break the line before the quote) or `<path>.md "words"`
# on one line; the quoted words may run over a line break; a bare README is the project's README.md
REFERENCE = re.compile(r'((?:[\w.-]+/)*[\w.-]+\.md|(?<![\w/.-])README)(?:,[ \x00]+| )"([^"\x00]+(?:\x00[^"\x00]+)*)"')


def tracked(root: Path) -> list[Path]:
    names = tracked_files(root)
    this = Path(__file__).resolve()  # its examples name headings on purpose
    return [root / n for n in names if n != "CHANGELOG.md" and (n.endswith(SUFFIXES) or n in NAMED)
            and (root / n).resolve() != this]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "")).strip().lower()


def headings(doc: Path) -> list[str]:
    out = []
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#+\s+(.*)", line) or re.match(r"\*\*([^*]+)\*\*", line)
        if m:
            out.append(_norm(m.group(1)))
    return out


def references(path: Path) -> list[tuple[str, str]]:
    text = path.read_text(encoding="utf-8", errors="replace").replace('\\"', '"')  # quotes escaped in strings
    text = re.sub(r"[ \t]*\n[ \t]*(?:#+ |// |> )?", BREAK, text)
    # a bare "README" is the project's README.md
    return [("README.md" if m.group(1) == "README" else m.group(1), m.group(2).replace(BREAK, " "))
            for m in REFERENCE.finditer(text)]


def dangling(root: Path) -> tuple[int, list[str]]:
    """(how many references resolved to a document, those whose words start none of its headings)."""
    seen, bad, cache = 0, [], {}
    for path in tracked(root):
        if not path.is_file():
            continue
        for doc, words in references(path):
            target = root / doc
            if not target.is_file():  # a file's own name for another document ("there", a sibling): not ours
                continue
            seen += 1
            heads = cache.setdefault(target, headings(target))
            want = _norm(words)
            if not any(h == want or (h.startswith(want) and not h[len(want)].isalnum()) for h in heads):
                bad.append(f"{path.relative_to(root)}: {doc}, {words!r}")
    return seen, bad


def test_every_section_reference_names_a_heading():
    seen, bad = dangling(REPO)
    assert seen >= 50  # the pattern still finds the project's references
    assert bad == [], "references to headings that do not exist:\n" + "\n".join(bad)


@pytest.mark.parametrize("source,ok", [
    ('See perf/README.md, "CI time".', True),
    ('See perf/README.md,\n    "CI time".', True),
    ('# see perf/README.md, "The demo\'s\n# wall time"', True),
    ('See perf/README.md "CI"', True),  # a heading's leading words
    ('See perf/README.md "CI ti"', False),  # whole words only
    ('"see perf/README.md, \\"CI time\\""', True),  # quotes escaped in a string
    ('See perf/README.md, "CI budget".', False),
    ('See perf/README.md, "Bold opening".', True),
    ('See perf/README.md, "Old heading".', False),
    ('x = ["perf/README.md"\n    "Old heading"]', True),  # a new line without the comma is code, not a reference
])
def test_a_reference_resolves_only_to_a_heading(tmp_path: Path, source: str, ok: bool):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "perf").mkdir()
    (tmp_path / "perf" / "README.md").write_text(
        "# perf\n\n## CI time (`.ci/run`)\n\n## The demo's wall time: where it goes\n\n**Bold opening.** text\n",
        encoding="utf-8")
    (tmp_path / "notes.py").write_text(source + "\n", encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    _, bad = dangling(tmp_path)
    assert (bad == []) is ok, bad
