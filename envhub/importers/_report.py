"""What the reports of the importers that make one environment (openenv, inspect,
verifiers) share: the count of what did not carry over, and the Markdown of
``IMPORT-REPORT.md`` (a heading, the importer's own paragraph, what was kept, what was not)."""

from __future__ import annotations

__all__ = ["CarriedOver"]


class CarriedOver:
    """A mixin for a report dataclass with ``name``, ``kept`` and ``not_carried`` fields."""

    name: str
    kept: list[str]
    not_carried: list[str]

    @property
    def dropped(self) -> int:
        """How many things could not be carried over."""
        return len(self.not_carried)

    def markdown(self, intro: str) -> str:
        """The report: ``intro`` (what was imported, and how) under its heading, then the
        lists of what was kept and what was not carried over."""
        lines = [f"# Import report: {self.name}", "", intro, "", "## Kept", ""]
        lines += [f"- {item}" for item in self.kept] or ["- nothing"]
        lines += ["", "## Not carried over", ""]
        lines += [f"- {item}" for item in self.not_carried] or ["- nothing"]
        return "\n".join(lines) + "\n"
