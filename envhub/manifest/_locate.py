"""Find the line of a manifest field in TOML text, for messages that say where.

tomllib keeps no positions, so this scans the text: it tracks the current ``[table]``
header and matches ``key = ...`` lines (dotted keys included) against the field's path.
It is a best effort: a location it cannot place is reported without a line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=""")
_KEY_PART = re.compile(r"""\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*(?:\.|$)""")


def _split_key(text: str) -> list[str]:
    return [part.strip("\"'") for part in _KEY_PART.findall(text)]


def locate(text: str, loc: Sequence[str | int]) -> tuple[int, int] | None:
    """The (line, column) of the line that best matches ``loc``, both 1-based."""
    want = [part for part in loc if isinstance(part, str)]
    if not want:
        return None
    best: tuple[int, int, int] | None = None  # (matched, line, column)
    header: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        header_match = _HEADER.match(line)
        if header_match:
            header = _split_key(header_match.group(2))
            path = header
            column = line.index(header_match.group(2)) + 1
        else:
            key_match = _KEY.match(line)
            if not key_match:
                continue
            path = header + _split_key(key_match.group(1))
            column = len(line) - len(line.lstrip()) + 1
        matched = _common_prefix(path, want)
        if matched == len(path) and (best is None or matched > best[0]):
            best = (matched, number, column)
            # Inline tables: a key of ``want`` inside this line's ``{ ... }``.
            rest = want[matched:]
            if rest and "{" in line:
                inline = re.search(rf"[{{,]\s*({re.escape(rest[0])})\s*=", line)
                if inline:
                    best = (matched + 1, number, inline.start(1) + 1)
    if best is None or best[0] == 0:
        return None
    return best[1], best[2]


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
