"""The protocol card (docs/protocol.yaml -> docs/PROTOCOL.md): config.yaml holds the authors' value
in every row that names a key, every key named exists in the schema, PROTOCOL.md is current, and the
card speaks of the project only (no issue numbers, no branches)."""
import copy
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from prbench import protocol as P
from prbench.config import SCHEMA_PATH

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "config.yaml").read_text())
SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())
CARD = P.load_card(ROOT / "docs" / "protocol.yaml")

# Rows whose key or config.yaml value arrives with work merged later: key -> what is pending. The
# test fails as soon as one of them is satisfied, so the list only shrinks (empty it as they land).
PENDING: dict[str, str] = {}


def _problems_by_key():
    out = {}
    for row in P.rows(CARD):
        for key in list(row["config"]) + list(row.get("keys") or []):
            one = dict(row, config={key: row["config"][key]} if key in row["config"] else {},
                       keys=[] if key in row["config"] else [key])
            probs = P.row_problems(one, CONFIG, SCHEMA)
            if probs:
                out.setdefault(key, []).extend(probs)
    return out


def test_config_yaml_holds_the_authors_value_in_every_row():
    problems = _problems_by_key()
    unexpected = {k: v for k, v in problems.items() if k not in PENDING}
    assert not unexpected, "config.yaml or the schema departs from the card:\n" + "\n".join(
        p for v in unexpected.values() for p in v)
    landed = sorted(set(PENDING) - set(problems))
    assert not landed, (f"these keys now match the card: remove them from PENDING in {Path(__file__).name}: "
                        f"{landed}")


def test_every_named_key_exists_in_the_schema():
    for row in P.rows(CARD):
        for key in list(row["config"]) + list(row.get("keys") or []):
            if key not in PENDING:
                assert P.schema_has(SCHEMA, key), f"{row['choice']!r}: {key} is not a schema key"


def test_the_checks_catch_a_departure_and_an_unknown_key():
    bad = copy.deepcopy(CONFIG)
    bad["judge"]["failure"] = "exclude"
    bad["retriever"]["max_length"] = 256
    found = "\n".join(P.check_card(CARD, bad, SCHEMA))
    assert "config.yaml has judge.failure: exclude, the authors' value is zero" in found
    assert "retriever.max_length: 256" in found
    row = {"choice": "x", "authors": "a", "source": [], "config": {"judge.nope": 1, "reward_models.*.kind": "k"},
           "project": "p", "where": {"kind": "classifier"}}
    probs = P.row_problems(row, CONFIG, SCHEMA)
    assert any("judge.nope is not in the schema" in p for p in probs)
    assert any("reward_models.skywork_v2_llama8b.kind: classifier" in p for p in probs)  # `*` over classifiers
    assert not any("qwen25_7b_pairwise" in p for p in probs)  # `where` keeps classifier entries only


def test_protocol_md_is_current():
    current = (ROOT / "docs" / "PROTOCOL.md").read_text(encoding="utf-8")
    assert current == P.render(CARD), "docs/PROTOCOL.md is stale: run `make protocol` (python -m prbench.protocol)"


def test_the_card_speaks_of_the_project_only():
    for path in (ROOT / "docs" / "protocol.yaml", ROOT / "docs" / "PROTOCOL.md"):
        text = path.read_text(encoding="utf-8")
        hits = re.findall(r"(?i)\bissues?\s*#?\d+|#\d+\b|\bbranch(?:es)?\b|\bPR\s*#?\d+", text)
        assert not hits, f"{path.name} mentions {hits}: the card describes the project, not its history"


def test_every_row_is_complete_and_sources_are_well_formed():
    for row in P.rows(CARD):
        assert row["choice"] and row["authors"] and row["project"]
        for ref in row["source"]:
            assert re.fullmatch(r"[\w./-]+(:\d+(-\d+)?)?", ref), f"{row['choice']!r}: bad source {ref!r}"


MIRROR = Path(os.environ.get("PRBENCH_AUTHORS_MIRROR",
                             "/work/.mirror/Martin-qyma+Personalized-RewardBench/repo"))


@pytest.mark.skipif(not MIRROR.is_dir(), reason="the authors' repository is not mirrored on this machine")
def test_sources_exist_at_the_pinned_commit():
    commit = CARD["pinned"]["commit"]
    for row in P.rows(CARD):
        for ref in row["source"]:
            path, _, lines = ref.partition(":")
            text = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"{commit}:{path}"], check=True,
                                  capture_output=True, text=True).stdout
            n = len(text.splitlines())
            last = int(lines.split("-")[-1]) if lines else 1
            assert last <= n, f"{row['choice']!r}: {ref} is past the end of {path} ({n} lines)"


def test_render_tables_sections_and_escaping():
    card = {"title": "T", "intro": "Intro.", "pinned": {"repo": "o/r", "commit": "c0ffee"},
            "groups": [{"name": "G", "rows": [
                {"choice": "a|b", "authors": "x", "source": ["f.py:3-5", "g.txt"], "config": {"s.k": "P {i}:\n{t}"},
                 "project": "p"},
                {"choice": "c", "authors": "y", "source": [], "config": {}, "reason": "why", "keys": ["s.k"],
                 "project": "q", "demo": "d"}]}],
            "sections": [{"title": "What each uncertainty covers", "text": "Free text.\n"}]}
    md = P.render(card)
    assert "| a\\|b | x ([`f.py:3-5`](https://github.com/o/r/blob/c0ffee/f.py#L3-L5), " \
           "[`g.txt`](https://github.com/o/r/blob/c0ffee/g.txt)) | `s.k: \"P {i}:\\n{t}\"` | p | — |" in md
    assert "| c | y (not in their code) | none: why (see `s.k`) | q | d |" in md
    assert md.index("## G") < md.index("## What each uncertainty covers\n\nFree text.\n")
