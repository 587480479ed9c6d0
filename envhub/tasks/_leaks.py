"""Finding held-out tasks in the public files of a bundle.

A held-out split is only held out if nothing published gives its tasks away. Authors leak
them by accident: a README quoting a test question, a few-shot prompt copied from the test
file, a script that writes the test file again from a fixed seed. :func:`find_leaks` looks
for held-out text (:class:`Needle`) in files; :func:`regenerating_scripts` flags scripts
that could plausibly make a held-out file again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from envhub.problems import Problem

__all__ = ["DISTINCTIVE_CHARS", "Needle", "PublicFile", "distinctive", "find_leaks", "regenerating_scripts"]

#: The fewest characters (whitespace runs counted as one) a held-out prompt or answer needs
#: before finding it in a public file means it leaked rather than that it is common.
DISTINCTIVE_CHARS = 12
_NUMBER = re.compile(r"[-+]?(\d[\d,_]*)?\.?\d+([eE][-+]?\d+)?%?")
_MAX_PER_FILE = 10
_SEEDS_A_GENERATOR = re.compile(
    rb"\b(?:random\.seed|(?:Random|RandomState|default_rng|SystemRandom|manual_seed|PRNGKey)\s*)\(\s*[^)\s]")


@dataclass(frozen=True)
class Needle:
    """Held-out text to look for: ``what`` it is (``prompt``, ``row``, ``answer``, ``key``),
    of which split and task."""

    text: str
    what: str
    split: str
    task_id: str | None = None

    def forms(self) -> list[bytes]:
        """The bytes the text may take in a file: as is, and escaped as in a JSON string."""
        out = [self.text.encode()]
        for ensure_ascii in (False, True):
            escaped = json.dumps(self.text, ensure_ascii=ensure_ascii)[1:-1].encode()
            if escaped not in out:
                out.append(escaped)
        return out


@dataclass(frozen=True)
class PublicFile:
    """A file that goes into the public archive: ``display`` names it to the user; answers
    are not looked for in the agent's state (``is_state``), where finding them is the task."""

    display: str
    path: Path
    is_state: bool = False


def distinctive(value: object) -> str | None:
    """``value`` as text to look for, if it is distinctive enough that finding it elsewhere
    means it was copied: a string of at least :data:`DISTINCTIVE_CHARS` characters (runs of
    whitespace counted once) that is not a plain number; a list or table as compact JSON, under
    the same rule. None otherwise.

    >>> distinctive("What is 17 apples plus 25 apples?")
    'What is 17 apples plus 25 apples?'
    >>> distinctive("42") is None, distinctive("3,141,592,653.5") is None, distinctive("short one") is None
    (True, True, True)
    >>> distinctive({"total": 1250, "city": "Oslo"})
    '{"total":1250,"city":"Oslo"}'
    """
    if isinstance(value, (dict, list)):
        value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if len(" ".join(text.split())) < DISTINCTIVE_CHARS or _NUMBER.fullmatch(text):
        return None
    return text


def find_leaks(files: Iterable[PublicFile], needles: Iterable[Needle]) -> list[Problem]:
    """An error for each held-out needle found in a public file (at most ten per file, then
    a count), naming the file, the line, the split and the task."""
    needles = list(needles)
    problems: list[Problem] = []
    for file in files:
        try:
            data = file.path.read_bytes()
        except OSError:
            continue
        found = list(_found(data, needles, file.is_state))
        for needle, at in found[:_MAX_PER_FILE]:
            task = f" of task {needle.task_id!r}" if needle.task_id is not None else ""
            problems.append(Problem(
                "error", "heldout-leak",
                f"the held-out {needle.what}{task} (split {needle.split!r}) is in this public file",
                file=file.display, line=data.count(b"\n", 0, at) + 1,
                hint="remove it, or keep the file out of the public build (add it to .envhubignore)"))
        if len(found) > _MAX_PER_FILE:
            problems.append(Problem("error", "heldout-leak",
                                    f"... and {len(found) - _MAX_PER_FILE} more like this ({len(found)} in all)",
                                    file=file.display))
    return problems


def _found(data: bytes, needles: list[Needle], is_state: bool) -> Iterator[tuple[Needle, int]]:
    for needle in needles:
        if is_state and needle.what == "answer":
            continue
        hits = [i for i in (data.find(form) for form in needle.forms()) if i >= 0]
        if hits:
            yield needle, min(hits)


def regenerating_scripts(files: Iterable[PublicFile], heldout_paths: dict[str, str]) -> list[Problem]:
    """A warning for each public Python file that could plausibly make a held-out file again:
    it seeds a random generator, or it names a held-out file (``heldout_paths``: path -> split)."""
    problems = []
    for file in files:
        if file.path.suffix != ".py":
            continue
        try:
            source = file.path.read_bytes()
        except OSError:
            continue
        reasons = [f"it names the held-out file {path} (split {split!r})" for path, split in heldout_paths.items()
                   if path.encode() in source]
        seeded = _SEEDS_A_GENERATOR.search(source)
        if seeded:
            line = source.count(b"\n", 0, seeded.start()) + 1
            reasons.append(f"it seeds a random generator (line {line})")
        if reasons:
            problems.append(Problem(
                "warning", "regenerating-script",
                f"a public script that could make held-out tasks again: {'; '.join(reasons)}",
                file=file.display,
                hint="keep it out of the public build (add it to .envhubignore), or draw held-out tasks from a "
                     "secret (a generator split with seed-space and secret)"))
    return problems
