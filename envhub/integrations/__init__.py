"""Adapters that plug envhub environments into trainers.

Each adapter is a module of its own (:mod:`envhub.integrations.trl` for TRL's
``GRPOTrainer``, :mod:`envhub.integrations.verl` for verl's agent loops), imported by name;
importing this package imports none of them, and no trainer is a dependency of envhub: an
adapter imports its trainer's libraries (``datasets`` for TRL; ``pyarrow`` and verl itself
for verl) only inside the function that needs them. docs/integrations.md describes them.

This package sits in the top layer (.importlinter): it uses the runtime and never the other
way round.
"""

from __future__ import annotations

__all__: list[str] = []
