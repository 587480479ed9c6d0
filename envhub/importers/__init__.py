"""Importers: bundles made from task collections in other formats.

:func:`import_terminal_bench` reads task directories in the layout Terminal-Bench and Harbor
use (an instruction, ``task.yaml`` or ``task.toml``, a Dockerfile, ``tests/``, a solution
script) and writes one bundle with state kind ``sandbox`` and verifier ``workspace-tests``,
reporting per task what it could not carry over (docs/importers.md).
"""

from envhub.importers._terminal_bench import ImportReport, ImportSourceError, TaskImport, import_terminal_bench

__all__ = ["ImportReport", "ImportSourceError", "TaskImport", "import_terminal_bench"]
