"""Find the line of a manifest field in TOML text, for messages that say where.

tomllib keeps no positions, so this scans the text: it tracks the current ``[table]``
header (counting ``[[array]]`` tables), ``key = ...`` lines (dotted keys included) and the
items of multi-line arrays, and matches them against the field's path. It is a best
effort: a location it cannot place is reported without a line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_SEGMENT = r"""(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)"""  # a bare or quoted key
_KEY = re.compile(rf"^\s*({_KEY_SEGMENT}(?:\s*\.\s*{_KEY_SEGMENT})*)\s*=\s*(.*)$")
_KEY_PART = re.compile(r"""\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*(?:\.|$)""")

Path = list[str | int]


def _split_key(text: str) -> list[str | int]:
    return [part.strip("\"'") for part in _KEY_PART.findall(text)]


def _lines(text: str) -> list[tuple[int, int, Path, str]]:
    """(line, column, path, rest of line) for every header, key and array item line."""
    out: list[tuple[int, int, Path, str]] = []
    header: Path = []
    array_counts: dict[tuple[str | int, ...], int] = {}
    array: Path | None = None  # inside a multi-line array value: its path
    item = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip()) + 1
        if array is not None:
            if stripped.startswith("]"):
                array = None
            elif stripped and not stripped.startswith("#"):
                out.append((number, indent, [*array, item], stripped))
                item += 1
            continue
        header_match = _HEADER.match(line)
        if header_match:
            header = _split_key(header_match.group(2))
            if header_match.group(1) == "[[":
                key = tuple(header)
                array_counts[key] = array_counts.get(key, -1) + 1
                header = [*header, array_counts[key]]
            out.append((number, line.index(header_match.group(2)) + 1, header, ""))
            continue
        key_match = _KEY.match(line)
        if not key_match:
            continue
        path = header + _split_key(key_match.group(1))
        value = key_match.group(2)
        out.append((number, indent, path, value))
        if value.startswith("[") and value.count("[") > value.count("]"):
            array, item = path, 0
    return out


@functools.lru_cache(maxsize=4)
def _index(text: str) -> dict[tuple[str | int, ...], list[tuple[int, int, Path, str]]]:
    # One scan per text, however many problems it has: each is looked up by its path's
    # prefixes, so a manifest with thousands of problems is not scanned thousands of times.
    index: dict[tuple[str | int, ...], list[tuple[int, int, Path, str]]] = {}
    for entry in _lines(text):
        index.setdefault(tuple(entry[2]), []).append(entry)
    return index


def locate(text: str, loc: Sequence[str | int]) -> tuple[int, int] | None:
    """The (line, column) of the line that best matches ``loc``, both 1-based."""
    want = list(loc)
    if not want:
        return None
    index = _index(text)
    # Only lines whose path is a prefix of ``want`` can match; visit them in file order.
    candidates = sorted((entry for k in range(len(want) + 1) for entry in index.get(tuple(want[:k]), ())),
                        key=lambda entry: entry[0])
    best: tuple[int, int, int] | None = None  # (matched, line, column)
    for number, column, path, rest in candidates:
        matched = _common_prefix(path, want)
        if matched != len(path) or (best is not None and matched <= best[0]):
            continue
        best = (matched, number, column)
        # Inline tables: a key of ``want`` inside this line's ``{ ... }``.
        remaining = want[matched:]
        if remaining and isinstance(remaining[0], str) and "{" in rest:
            inline = re.search(rf"[{{,]\s*({re.escape(remaining[0])})\s*=", rest)
            if inline:
                line_text = text.splitlines()[number - 1]
                offset = line_text.rfind(rest) if rest else 0
                best = (matched + 1, number, offset + inline.start(1) + 1)
    if best is None or best[0] == 0:
        return None
    return best[1], best[2]


def _common_prefix(a: Sequence[str | int], b: Sequence[str | int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
