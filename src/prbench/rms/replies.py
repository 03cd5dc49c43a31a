"""Reading generative RMs' replies: the pairwise verdict (`PAIRWISE_PARSERS`, config key
`scoring.pairwise_parse`), the 1-10 pointwise score (`parse_score`) and the downstream 0-1 score
(`UNIT_PARSERS`, config key `reward.generative_parse`). Each returns None / NaN when a reply is
unparseable; the caller counts it (prbench.rms.generative)."""
from __future__ import annotations

import re

_RESULT_RE = re.compile(r"result\s*\**\s*[:：]\s*\**\s*\[{0,2}\s*(?:answer\s+|response\s+)?([ab])\b", re.IGNORECASE)
_BRACKET_RE = re.compile(r"\[\[\s*([ab])\s*\]\]", re.IGNORECASE)
_BARE_CHOICE_RE = re.compile(r"^\s*\**\[?\s*(?:answer\s+)?([ab])\s*\]?\**\s*[.!]?\s*$", re.IGNORECASE)
_SCORE_RE = re.compile(r"score\s*[:：]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_BARE_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*\.?\s*$")


def parse_choice(text: str) -> str | None:
    """'A' or 'B' from a judge output; None when unparseable.

    Accepted verdicts: `Result: A`, `**Result:** A`, `Result: [[A]]`, `[[A]]` (the last verdict in
    the text wins, so reasoning that mentions a format first does not count), or a reply that is
    only the letter."""
    if not isinstance(text, str):
        return None
    hits = [(m.start(), m.group(1)) for rx in (_RESULT_RE, _BRACKET_RE) for m in rx.finditer(text)]
    if hits:
        return max(hits)[1].upper()
    m = _BARE_CHOICE_RE.match(text)
    return m.group(1).upper() if m else None


def parse_first_result(text: str) -> str | None:
    """'A' or 'B' by the authors' rule (evaluation/pairwise.py): the reply after its last "</think>",
    with double quotes and asterisks removed and lower-cased; the verdict is the first letter of the
    text after the first "result:" (leading whitespace skipped): "a" or "b", anything else None."""
    if not isinstance(text, str):
        return None
    t = text.strip().split("</think>")[-1].strip()
    t = t.replace('"', "").replace("*", "").strip().lower()
    head, sep, tail = t.partition("result:")
    if not sep:
        return None
    rest = tail.split("result:")[0].strip()
    return rest[0].upper() if rest[:1] in ("a", "b") else None


def _unclamped(text: str, parse: str = "first_number") -> float:
    """The number the `parse` rule (`UNIT_PARSERS`) read before clamping (for the clamped count)."""
    t = text.strip()
    try:
        return float(t)
    except ValueError:
        m = (_AUTHORS_UNIT_RE if parse == "authors" else _UNIT_RE).search(t)
        return float(m.group(0)) if m else float("nan")


PAIRWISE_PARSERS = {"last_verdict": parse_choice, "first_result": parse_first_result}
_UNIT_RE = re.compile(r"(?<![\d.])-?(?:\d+(?:\.\d*)?|\.\d+)")


def _read_unit(text: str, number_re: re.Pattern, inf_is_nan: bool) -> float:
    """The stripped reply as a float, else the first `number_re` match, clamped into [0, 1]; NaN
    when neither reads a number (and for NaN, and for +-inf where `inf_is_nan`)."""
    if not isinstance(text, str):
        return float("nan")
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        m = number_re.search(t)
        if not m:
            return float("nan")
        v = float(m.group(0))
    if v != v or (inf_is_nan and v in (float("inf"), float("-inf"))):
        return float("nan")
    return min(1.0, max(0.0, v))


def parse_unit_score(text: str) -> float:
    """A 0-1 score from a reply (`reward.generative_parse: first_number`, the project's rule): the
    whole reply as a number, else its first number of any form ("Score: 7" -> 7); clamped into
    [0, 1]; NaN when the reply holds no number or an infinite one. The authors' rule is
    `parse_unit_score_authors`."""
    return _read_unit(text, _UNIT_RE, inf_is_nan=True)


_AUTHORS_UNIT_RE = re.compile(r"0?\.\d+|[01]\.?\d*")


def parse_unit_score_authors(text: str) -> float:
    """A 0-1 score by the authors' rule (`reward.generative_parse: authors`; BoN/score.py and
    PPO/reward_server.py at a5c6814): the stripped reply as a float, else the first match of
    `0?\\.\\d+|[01]\\.?\\d*` (a number starting with 0, 1 or a point: "Score: 7" has none,
    "7/10" reads 10), clamped into [0, 1] (as theirs, "inf" reads 1.0); NaN when neither reads a
    number (the caller scores it `reward_failure_score`, the authors' 0.5, and counts it as a failure)."""
    return _read_unit(text, _AUTHORS_UNIT_RE, inf_is_nan=False)


UNIT_PARSERS = {"first_number": parse_unit_score, "authors": parse_unit_score_authors}


def parse_score(text: str) -> float:
    """The number of "Score: <number>" (or a bare number); NaN when unparseable."""
    if not isinstance(text, str):
        return float("nan")
    m = _SCORE_RE.search(text) or _BARE_NUMBER_RE.match(text)
    return float(m.group(1)) if m else float("nan")
