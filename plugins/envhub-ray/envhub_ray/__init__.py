"""envhub plugin: the ``ray`` executor, one eval across the machines of a Ray cluster.

It registers, through envhub's hooks (entry point ``ray`` in the group ``envhub``), the
executor ``ray``: ``envhub eval ... --executor ray`` joins the cluster at ``--address``, else
at ``RAY_ADDRESS`` (Ray's own variable; in code, ``RayExecutor(address=...)``), or starts a local one, loads the
environment in long-lived Ray actors (one per node by default, ``-j N`` for N) and writes
the records they send back to the run's one records file (:class:`RayExecutor`).

This module imports neither Ray nor envhub's runtime: ``envhub plugins`` imports it to list
what it registers, and Ray takes seconds to import. :mod:`envhub_ray._executor` is imported
when the executor is made, and imports Ray when it runs (with a clear error if Ray is not
installed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envhub.plugin import ExecutorKind, hookimpl

if TYPE_CHECKING:
    from envhub_ray._executor import RayExecutor

__all__ = ["DISTRIBUTION", "RayExecutor", "envhub_executors"]

#: This distribution: what an error asks to install.
DISTRIBUTION = "envhub-ray"


def _make(address: str | None = None) -> Any:
    """The executor ``ray``; ``address`` is the cluster to join (None: ``RAY_ADDRESS``, else a
    local cluster)."""
    from envhub_ray._executor import RayExecutor

    return RayExecutor(address=address)


@hookimpl
def envhub_executors() -> list[ExecutorKind]:
    return [ExecutorKind("ray", _make, options=("address",),
                         description="rollouts in Ray actors across a Ray cluster's nodes (--address or "
                                     "RAY_ADDRESS, else a local cluster)")]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":
        from envhub_ray._executor import RayExecutor

        return RayExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
