"""Testing environments: the conformance checks and the temporary registry behind envhub's
pytest plugin (:mod:`envhub.testing.pytest_plugin`), usable without pytest too.

>>> from envhub.testing import Conformance
>>> Conformance("path/to/bundle", trust=True).run("noop-scores-below-1").status  # doctest: +SKIP
'passed'

Names are imported on first use: pytest imports the plugin, and so this package, in every
test run of an environment where envhub is installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envhub.testing._conformance import CHECKS, Conformance, Outcome
    from envhub.testing._registry import TemporaryRegistry

_WHERE = {"CHECKS": "_conformance", "Conformance": "_conformance", "Outcome": "_conformance",
          "TemporaryRegistry": "_registry"}
# Written out (not computed from _WHERE) so type checkers see the re-exports;
# tests/test_architecture.py checks that the two agree.
__all__ = [
    "CHECKS", "Conformance", "Outcome", "TemporaryRegistry"
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'envhub.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"envhub.testing.{_WHERE[name]}"), name)
