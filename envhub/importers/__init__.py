"""Importers: bundles made from task collections and environments in other formats.

Each importer is registered through the ``envhub_importers`` plugin hook (an
:class:`envhub.hookspecs.ImporterKind`), envhub's own ones too, and run by
``envhub import KIND SOURCE OUT`` (docs/importers.md):

- ``terminal-bench``: :func:`import_terminal_bench` reads task directories in the layout
  Terminal-Bench and Harbor use and writes one bundle with state kind ``sandbox`` and verifier
  ``workspace-tests``, reporting per task what it could not carry over;
- ``openenv``: :func:`import_openenv` reads an OpenEnv environment package and writes a bundle
  that runs its ``Environment`` class in the episode (state kind ``python``, one ``step``
  tool, a ``python`` verifier over the step rewards);
- ``inspect``: :func:`import_inspect` reads an inspect_ai task (``file.py@task``) and writes
  its samples as tasks with a verifier that gives inspect's own scorer's verdict (or
  ``llm-judge`` for its model-graded scorers);
- ``verifiers``: :func:`import_verifiers` reads a verifiers (v1) environment package and
  writes its tasks as rows, with the rewards that are data in all but name (exact match,
  boxed math, the reference judge) as the verifier, weighted as a rubric.
"""

from envhub.importers._inspect import InspectImport, import_inspect, run_inspect
from envhub.importers._openenv import OpenEnvImport, import_openenv, run_openenv
from envhub.importers._terminal_bench import (
    ImportReport,
    ImportSourceError,
    TaskImport,
    import_terminal_bench,
    run_terminal_bench,
)
from envhub.importers._verifiers import VerifiersImport, import_verifiers, run_verifiers

__all__ = ["ImportReport", "ImportSourceError", "InspectImport", "OpenEnvImport", "TaskImport", "VerifiersImport",
           "import_inspect", "import_openenv", "import_terminal_bench", "import_verifiers", "run_inspect",
           "run_openenv", "run_terminal_bench", "run_verifiers"]
