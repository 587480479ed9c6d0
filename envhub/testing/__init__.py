"""Testing environments: the conformance checks and the temporary registry behind envhub's
pytest plugin (:mod:`envhub.testing.pytest_plugin`), usable without pytest too.

>>> from envhub.testing import Conformance
>>> Conformance("path/to/bundle", trust=True).run("noop-scores-below-1").status  # doctest: +SKIP
'passed'
"""

from __future__ import annotations

from envhub.testing._conformance import CHECKS, Conformance, Outcome
from envhub.testing._registry import TemporaryRegistry

__all__ = ["CHECKS", "Conformance", "Outcome", "TemporaryRegistry"]
