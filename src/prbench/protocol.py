"""The protocol card as data: `docs/protocol.yaml` holds one row per protocol choice (the authors'
value, where their released code sets it, the config key that selects it and the value `config.yaml`
holds, the project's alternative, the demo's value); `docs/PROTOCOL.md` is rendered from it.

    python -m prbench.protocol            # rewrite docs/PROTOCOL.md from docs/protocol.yaml
    python -m prbench.protocol --check    # exit 1 when PROTOCOL.md is stale or config.yaml departs

`check_card` lists every problem: a row's value not held by config.yaml, a key the schema does not
know, a missing field. tests/test_protocol.py runs it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping

import yaml

from .config import SCHEMA_PATH

ROOT = SCHEMA_PATH.parents[1]  # the repository (the schema's folder is schemas/)
CARD = ROOT / "docs" / "protocol.yaml"
CARD_MD = ROOT / "docs" / "PROTOCOL.md"
CONFIG = ROOT / "config.yaml"
ROW_FIELDS = ("choice", "authors", "source", "config", "project")
HEADER = "| choice | authors' value (their code) | config key: `config.yaml` value | project's alternative | demo |"


def load_card(path: str | Path = CARD) -> dict:
    path = Path(path)
    card = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(card, dict) or not isinstance(card.get("groups"), list):
        raise ValueError(f"{path}: a protocol card needs a list `groups`")
    for field in ("title", "intro", "pinned"):
        if field not in card:
            raise ValueError(f"{path}: field {field!r} missing")
    for g, group in enumerate(card["groups"]):
        for r, row in enumerate(group.get("rows") or []):
            missing = [f for f in ROW_FIELDS if f not in row]
            if missing:
                raise ValueError(f"{path}: groups[{g}].rows[{r}] ({row.get('choice')!r}) lacks {missing}")
            if not isinstance(row["config"], dict) or not isinstance(row["source"], list):
                raise ValueError(f"{path}: groups[{g}].rows[{r}] ({row['choice']!r}): `config` must be a mapping "
                                 "and `source` a list")
            if not row["config"] and not row.get("reason"):
                raise ValueError(f"{path}: groups[{g}].rows[{r}] ({row['choice']!r}): a row without config keys "
                                 "needs a `reason`")
    return card


def rows(card: Mapping) -> list[dict]:
    return [row for group in card["groups"] for row in group.get("rows") or []]


# ---- rendering -------------------------------------------------------------------------------------


def _value(v: Any) -> str:
    """A config value as YAML on one line (a string that needs quoting in double quotes, escaped)."""
    if isinstance(v, str):
        plain = "\n" not in v and yaml.safe_load(v) == v if v.strip() == v and v else False
        return v if plain and ": " not in v and " #" not in v else json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    text = yaml.safe_dump(v, default_flow_style=True, allow_unicode=True, width=10_000).strip()
    return text[:-4].strip() if text.endswith("\n...") else text


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") if text not in (None, "") else "—"


def _source(card: Mapping, ref: str) -> str:
    path, _, lines = ref.partition(":")
    url = f"https://github.com/{card['pinned']['repo']}/blob/{card['pinned']['commit']}/{path}"
    if lines:
        first, _, last = lines.partition("-")
        url += f"#L{first}" + (f"-L{last}" if last else "")
    return f"[`{ref}`]({url})"


def _config_cell(row: Mapping) -> str:
    if not row["config"]:
        keys = ", ".join(f"`{k}`" for k in row.get("keys") or [])
        return f"none: {_cell(row['reason'])}" + (f" (see {keys})" if keys else "")
    parts = [f"`{k}: {_value(v)}`" for k, v in row["config"].items()]
    where = row.get("where")
    if where:
        parts.append("(on entries with " + ", ".join(f"{k} {v}" for k, v in where.items()) + ")")
    return " ".join(parts).replace("|", "\\|")


def render(card: Mapping) -> str:
    pin = card["pinned"]
    out = [f"# {card['title']}", "", "<!-- generated from docs/protocol.yaml by `python -m prbench.protocol` "
           "(make protocol): edit the yaml, not this file -->", "", card["intro"].strip(), "",
           f"Their code: `{pin['repo']}` at commit `{pin['commit']}`.", ""]
    for group in card["groups"]:
        out += [f"## {group['name']}", "", HEADER, "|---|---|---|---|---|"]
        for row in group.get("rows") or []:
            src = ", ".join(_source(card, s) for s in row["source"]) or "not in their code"
            out.append(f"| {_cell(row['choice'])} | {_cell(row['authors'])} ({src}) | {_config_cell(row)} | "
                       f"{_cell(row['project'])} | {_cell(row.get('demo'))} |")
        out.append("")
    for section in card.get("sections") or []:
        out += [f"## {section['title']}", "", section["text"].strip(), ""]
    return "\n".join(out).rstrip("\n") + "\n"


# ---- checks against config.yaml and the schema ------------------------------------------------------


def config_values(config: Mapping, key: str, where: Mapping | None = None) -> list[tuple[str, Any]]:
    """[(concrete key, value)] of a dotted key in a config; `*` stands for every entry of a section,
    kept when the entry matches `where` ({field: value}). A missing key gives a KeyError naming it."""
    found: list[tuple[str, Any]] = [("", config)]
    for part in key.split("."):
        nxt = []
        for path, node in found:
            if not isinstance(node, Mapping):
                raise KeyError(f"{key}: {path or 'the config'} is not a section")
            if part == "*":
                for name, entry in node.items():
                    if not where or all(isinstance(entry, Mapping) and entry.get(f) == v for f, v in where.items()):
                        nxt.append((f"{path}.{name}".lstrip("."), entry))
            elif part in node:
                nxt.append((f"{path}.{part}".lstrip("."), node[part]))
            else:
                raise KeyError(f"{key}: {path or 'the config'} has no {part!r}")
        found = nxt
    if not found:
        raise KeyError(f"{key}: no entry matches {dict(where or {})}")
    return found


def schema_has(schema: Mapping, key: str) -> bool:
    """Whether a dotted key (with `*` for a section's entries) is a key of the config schema."""
    node = schema
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return False
        if part == "*":
            node = node.get("additionalProperties")
        else:
            node = (node.get("properties") or {}).get(part)
        if node is None or node is False:
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def row_problems(row: Mapping, config: Mapping, schema: Mapping) -> list[str]:
    """Every way one row disagrees with the config or the schema ([] = none)."""
    out = []
    for key in list(row["config"]) + list(row.get("keys") or []):
        if not schema_has(schema, key):
            out.append(f"{row['choice']!r}: config key {key} is not in the schema ({SCHEMA_PATH.name})")
    for key, want in row["config"].items():
        if not schema_has(schema, key):
            continue
        try:
            found = config_values(config, key, row.get("where") if "*" in key else None)
        except KeyError as e:
            out.append(f"{row['choice']!r}: config.yaml lacks {e.args[0]} (the authors' value: {_value(want)})")
            continue
        for concrete, have in found:
            if not _same(have, want):
                out.append(f"{row['choice']!r}: config.yaml has {concrete}: {_value(have)}, the authors' value is "
                           f"{_value(want)}")
    return out


def check_card(card: Mapping, config: Mapping, schema: Mapping) -> list[str]:
    return [p for row in rows(card) for p in row_problems(row, config, schema)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m prbench.protocol", description=__doc__.splitlines()[0])
    ap.add_argument("--card", default=str(CARD))
    ap.add_argument("--out", default=str(CARD_MD))
    ap.add_argument("--config", default=str(CONFIG))
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on a stale card or a departure")
    args = ap.parse_args(argv)
    card = load_card(args.card)
    text = render(card)
    if not args.check:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out} ({len(rows(card))} rows)")
        return 0
    problems = []
    if not Path(args.out).exists() or Path(args.out).read_text(encoding="utf-8") != text:
        problems.append(f"{args.out} is not current: run python -m prbench.protocol")
    config = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
    schema = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    problems += check_card(card, config, schema)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
