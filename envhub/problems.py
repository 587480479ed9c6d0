"""Problems found while reading or validating a bundle, and their renderings."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Literal

__all__ = ["Problem", "Report", "Severity"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong (``error``) or probably wrong (``warning``) with an input.

    ``file`` is the path as the user knows it; ``line`` and ``column`` are 1-based when
    known; ``field`` is the dotted manifest location (``tasks.splits.test.path``);
    ``code`` is a stable identifier for tools; ``hint`` says how to fix it.
    """

    severity: Severity
    code: str
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    field: str | None = None
    hint: str | None = None

    def where(self) -> str:
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def render(self) -> str:
        """``file:line:col: severity: field: message`` with the hint on the next line."""
        head = f"{self.where()}: {self.severity}: "
        if self.field:
            head += f"{self.field}: "
        text = head + self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def github(self) -> str:
        """A GitHub Actions workflow command (``::error file=...,line=...::message``)."""
        props = []
        if self.file:
            props.append(f"file={_gh_escape_property(self.file)}")
        if self.line is not None:
            props.append(f"line={self.line}")
        if self.column is not None:
            props.append(f"col={self.column}")
        props.append(f"title={_gh_escape_property('envhub ' + self.code)}")
        message = f"{self.field}: {self.message}" if self.field else self.message
        if self.hint:
            message += f"\nhint: {self.hint}"
        return f"::{self.severity} {','.join(props)}::{_gh_escape_data(message)}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _gh_escape_data(text: str) -> str:
    # The escaping GitHub's toolkit (@actions/core) applies to command data.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_escape_property(text: str) -> str:
    return _gh_escape_data(text).replace(":", "%3A").replace(",", "%2C")


@dataclass
class Report:
    """Every problem found in one or more bundles, plus facts worth showing (row counts)."""

    problems: list[Problem] = field(default_factory=list)
    facts: dict[str, object] = field(default_factory=dict)

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)

    def extend(self, problems: Iterable[Problem]) -> None:
        self.problems.extend(problems)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def to_json(self) -> str:
        return json.dumps(
            {
                "ok": not self.errors,
                "errors": len(self.errors),
                "warnings": len(self.warnings),
                "problems": [p.to_dict() for p in self.problems],
                **self.facts,
            },
            indent=2,
        )
