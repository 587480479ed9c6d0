"""envhub-containers: state kind ``sandbox`` on podman or docker.

A bundle whose ``[state]`` says ``base = "oci:REGISTRY/REPOSITORY[:TAG]@sha256:DIGEST"`` runs
each episode's workspace in a container of that image, with podman (preferred: rootless, no
daemon) or docker, whichever answers ``info`` here. The image is pulled by its digest and the
digest checked after the pull. The workspace's limits become the engine's flags: no network
(``--network none``), a read-only root, ``--cap-drop ALL``, ``no-new-privileges``,
``--memory``, ``--pids-limit``, ``--ulimit cpu``, and the workspace a tmpfs of ``disk-mb``.
docs/containers.md says what is contained, how, and what is tested where.

This module is the plugin (the entry point ``containers`` in the group ``envhub``); it
imports envhub's public names only (``envhub.plugin``).
"""

from __future__ import annotations

from envhub.plugin import WorkspaceBackend, hookimpl

__all__ = ["envhub_workspace_backends", "pull_image"]


def pull_image(image: str) -> None:
    """The backend's ``pull``: make ``image`` available here, verified by its digest (``envhub sync``)."""
    from envhub_containers._engine import find_engine, pull

    pull(find_engine(), image)


def _start(**kwargs):  # type: ignore[no-untyped-def]
    from envhub_containers._workspace import start_workspace

    return start_workspace(**kwargs)


@hookimpl
def envhub_workspace_backends() -> list[WorkspaceBackend]:
    return [WorkspaceBackend("oci", _start, pull=pull_image,
                             description="a container of an image pinned by digest, with podman or docker")]
