"""envhub: versioned, verifiable environments for RL with LLM agents.

The public surface is re-exported here and imported on first use, so that importing
``envhub`` (as the ``envhub`` command does) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from envhub._version import __version__

if TYPE_CHECKING:
    from envhub._evaluate import evaluate
    from envhub._load import load
    from envhub.bundle import BuiltBundle, BundleCheck, build_bundle, validate_bundle
    from envhub.context import Context
    from envhub.errors import (
        BundleError,
        EnvhubError,
        EnvNotFoundError,
        IntegrityError,
        InvalidIdError,
        ManifestError,
        PolicyError,
        RegistryError,
        TrustError,
        VersionConflictError,
    )
    from envhub.hookspecs import hookimpl
    from envhub.ids import EnvName, EnvRef, parse_name, parse_ref
    from envhub.manifest import Manifest, dump_manifest, load_manifest, parse_manifest
    from envhub.registry import Registry, VersionEntry, open_registry
    from envhub.runtime import (
        Environment,
        EnvironmentProtocol,
        Episode,
        EpisodeProtocol,
        EvalResult,
        EvalSummary,
        Observation,
        RolloutRecord,
        Score,
        StepResult,
        Task,
        Trajectory,
    )

_WHERE = {
    "BuiltBundle": "envhub.bundle", "BundleCheck": "envhub.bundle", "build_bundle": "envhub.bundle",
    "validate_bundle": "envhub.bundle",
    "BundleError": "envhub.errors", "EnvhubError": "envhub.errors", "EnvNotFoundError": "envhub.errors",
    "IntegrityError": "envhub.errors", "InvalidIdError": "envhub.errors", "ManifestError": "envhub.errors",
    "RegistryError": "envhub.errors", "VersionConflictError": "envhub.errors",
    "EnvName": "envhub.ids", "EnvRef": "envhub.ids", "parse_name": "envhub.ids", "parse_ref": "envhub.ids",
    "Manifest": "envhub.manifest", "dump_manifest": "envhub.manifest", "load_manifest": "envhub.manifest",
    "parse_manifest": "envhub.manifest",
    "Registry": "envhub.registry", "VersionEntry": "envhub.registry", "open_registry": "envhub.registry",
    "Environment": "envhub.runtime", "Episode": "envhub.runtime", "Observation": "envhub.runtime",
    "EnvironmentProtocol": "envhub.runtime", "EpisodeProtocol": "envhub.runtime",
    "Score": "envhub.runtime", "StepResult": "envhub.runtime", "Task": "envhub.runtime",
    "Trajectory": "envhub.runtime", "load": "envhub._load",
    "evaluate": "envhub._evaluate", "EvalResult": "envhub.runtime", "EvalSummary": "envhub.runtime",
    "RolloutRecord": "envhub.runtime", "Context": "envhub.context",
    "TrustError": "envhub.errors", "PolicyError": "envhub.errors",
    "hookimpl": "envhub.hookspecs",
}
# Written out (not computed from _WHERE) so type checkers see the re-exports;
# tests/test_architecture.py checks that the two agree.
__all__ = [
    "__version__", "BuiltBundle", "BundleCheck", "BundleError", "Context", "EnvName", "EnvNotFoundError",
    "EnvRef", "EnvhubError", "Environment", "EnvironmentProtocol", "Episode", "EpisodeProtocol", "EvalResult",
    "EvalSummary", "IntegrityError",
    "InvalidIdError", "Manifest", "ManifestError", "Observation", "PolicyError", "Registry", "RegistryError",
    "RolloutRecord", "Score", "StepResult", "Task", "Trajectory", "TrustError", "VersionConflictError",
    "VersionEntry", "build_bundle", "dump_manifest", "evaluate", "hookimpl", "load", "load_manifest",
    "open_registry", "parse_manifest", "parse_name", "parse_ref", "validate_bundle"
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'envhub' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
