"""Finding a container engine that works here, and pulling images by digest, verified."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from envhub.plugin import EnvhubError
from envhub_containers._commands import image_digest, inspect_digests_command, pull_command

__all__ = ["ENGINES", "Engine", "NoEngineError", "find_engine", "pull"]

#: The engines tried, in order: podman first (rootless, no daemon), then docker.
ENGINES = ("podman", "docker")
#: How long ``ENGINE info`` may take to say whether the engine works.
INFO_TIMEOUT_S = 30.0


class NoEngineError(EnvhubError):
    """Neither podman nor docker works on this machine."""


@dataclass(frozen=True)
class Engine:
    """A container engine whose ``info`` succeeded: its command (``podman`` or ``docker``)."""

    command: str

    def run(self, argv: Sequence[str], *, timeout_s: float = 600.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)


def find_engine(candidates: Sequence[str] = ENGINES) -> Engine:
    """The first of ``candidates`` on ``PATH`` whose ``info`` succeeds. Raises
    :class:`NoEngineError` saying what each one answered."""
    answers = []
    for name in candidates:
        path = shutil.which(name)
        if path is None:
            answers.append(f"{name} is not installed")
            continue
        try:
            done = subprocess.run([path, "info"], capture_output=True, text=True, timeout=INFO_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            answers.append(f"{name} info failed: {e}")
            continue
        if done.returncode == 0:
            return Engine(path)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        answers.append(f"{name} info exited with {done.returncode}: {last}")
    raise NoEngineError("no container engine: neither podman info nor docker info succeeds here "
                        f"({'; '.join(answers)})",
                        hint="install podman (rootless, preferred) or docker and check that 'podman info' or "
                             "'docker info' works for this user")


def pull(engine: Engine, image: str) -> None:
    """Make ``image`` (``REGISTRY/REPOSITORY[:TAG]@sha256:...``) available locally: pulled by
    its digest unless it is there, then its digest checked against the reference. Raises
    :class:`EnvhubError` when the pull fails or the local image has another digest."""
    digest = image_digest(image)
    if _has_digest(engine, image, digest):
        return
    done = engine.run(pull_command(engine.command, image))
    if done.returncode != 0:
        raise EnvhubError(f"cannot pull {image} with {engine.command}: {done.stderr.strip()[-500:]}",
                          hint="check the reference and that this machine reaches the registry")
    if not _has_digest(engine, image, digest):
        raise EnvhubError(f"{engine.command} pulled {image}, but the image it has does not carry the digest {digest}",
                          hint="the registry served other bytes than the digest names; do not run it")


def _has_digest(engine: Engine, image: str, digest: str) -> bool:
    done = engine.run(inspect_digests_command(engine.command, image), timeout_s=60)
    if done.returncode != 0:
        return False
    try:
        digests = json.loads(done.stdout.strip() or "[]") or []
    except ValueError:
        return False
    return any(isinstance(d, str) and d.endswith("@" + digest) for d in digests)
