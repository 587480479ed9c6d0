"""envhub plugin: reasoning-gym's procedural datasets as envhub environments.

It registers, through envhub's hooks (entry point ``envhub-reasoning-gym`` in the group
``envhub``):

- the task generator ``reasoning-gym``: ``generate(seed, split, difficulty, params)``
  makes the task of dataset ``params["dataset"]`` at a curriculum level for a seed;
- the verifier kind ``reasoning-gym``: the dataset's own ``score_answer`` on the text in
  the completion's last ``<answer>...</answer>``;
- one environment ``reasoning-gym/<dataset>`` per dataset that passed
  ``scripts/generate_bundles.py``'s probe, each a bundle shipped in ``bundles/``.

This module imports only :mod:`envhub.plugin` (the plugin authors' API, which imports its
heavier names on first use) and the standard library: ``envhub plugins``
imports it to list what it registers, and reasoning-gym takes seconds to import, so
:mod:`envhub_reasoning_gym._datasets` imports it on the first task made or scored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envhub.plugin import EnvironmentPackage, TaskGenerator, VerifierKind, hookimpl

__all__ = [
    "BUNDLES",
    "DISTRIBUTION",
    "NAMESPACE",
    "RG_VERSION",
    "envhub_environments",
    "envhub_task_generators",
    "envhub_verifier_kinds",
    "generate",
]

#: This distribution, and the reasoning-gym release its bundles were generated from (the
#: environments' version).
DISTRIBUTION = "envhub-reasoning-gym"
RG_VERSION = "0.1.25"
#: The namespace of the environments: ``reasoning-gym/basic-arithmetic``.
NAMESPACE = "reasoning-gym"
#: One directory per environment, named after it (``basic-arithmetic``), with its envhub.toml.
BUNDLES = Path(__file__).resolve().parent / "bundles"


def generate(seed: int, split: str = "train", difficulty: int | None = None,
             params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``reasoning-gym`` task generator: see :func:`envhub_reasoning_gym._datasets.generate`."""
    from envhub_reasoning_gym._datasets import generate as _generate

    return _generate(seed, split, difficulty, params)


def _make_verifier(options: Any, ctx: Any, factories: Any) -> Any:
    from envhub_reasoning_gym._verifier import ReasoningGymVerifier

    return ReasoningGymVerifier(options)


@hookimpl
def envhub_task_generators() -> list[TaskGenerator]:
    return [TaskGenerator("reasoning-gym", generate,
                          description="a reasoning-gym dataset's task for a seed, at a curriculum level")]


@hookimpl
def envhub_verifier_kinds() -> list[VerifierKind]:
    return [VerifierKind("reasoning-gym", _make_verifier, options="envhub_reasoning_gym._verifier:Options",
                         description="the dataset's own score_answer on the <answer>...</answer> text")]


@hookimpl
def envhub_environments() -> list[EnvironmentPackage]:
    # The bundles are generated with the environment's id as their directory name and
    # RG_VERSION as their version (tests/test_reasoning_gym_plugin.py checks every
    # manifest agrees), so listing reads a directory, not a hundred manifests.
    from importlib import metadata  # envhub has imported it already, to find the plugins

    try:
        version: str | None = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # imported from a source tree, not installed
        version = None
    return [EnvironmentPackage(f"{NAMESPACE}/{path.name}", path, DISTRIBUTION, version, RG_VERSION)
            for path in sorted(BUNDLES.iterdir()) if (path / "envhub.toml").is_file()]
