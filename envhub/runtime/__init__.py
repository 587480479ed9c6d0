"""The runtime: load an environment, run episodes, score them, and roll out policies.

Names are imported on first use, so ``import envhub.runtime`` costs nothing until a name
is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envhub.runtime._curriculum import Curriculum, Draw, LevelChange
    from envhub.runtime._environment import Environment, SplitInfo
    from envhub.runtime._episode import Episode
    from envhub.runtime._load import load
    from envhub.runtime._runner import Executor, RolloutJob, RolloutPlan, run_rollout
    from envhub.runtime._state import StateFactory, StateHandle
    from envhub.runtime._types import Observation, Score, StepResult, Task, Trajectory

_WHERE = {
    "Curriculum": "_curriculum", "Draw": "_curriculum", "LevelChange": "_curriculum",
    "Environment": "_environment", "SplitInfo": "_environment", "Episode": "_episode", "load": "_load",
    "Observation": "_types", "Score": "_types", "StepResult": "_types", "Task": "_types", "Trajectory": "_types",
    # What plugins implement (docs/plugins.md): state kinds and rollout executors.
    "StateFactory": "_state", "StateHandle": "_state",
    "Executor": "_runner", "RolloutJob": "_runner", "RolloutPlan": "_runner", "run_rollout": "_runner",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'envhub.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(f"envhub.runtime.{_WHERE[name]}"), name)
