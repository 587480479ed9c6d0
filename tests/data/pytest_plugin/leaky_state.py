"""State that claims reset = "per-episode" but hands every episode the same directory."""

import tempfile
from pathlib import Path

_SHARED = Path(tempfile.mkdtemp(prefix="envhub-leaky-state-"))


class Workspace:
    def reset(self, task):
        return _SHARED
