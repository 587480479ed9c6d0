"""The command lines this plugin runs, built by pure functions (tests assert them as they are).

Every engine command is a list of arguments, never a shell string: an image reference, a
path or a variable's value is always one argument. podman and docker take the same flags
for everything used here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KEEPALIVE", "STATE_DIR", "WORKSPACE", "ContainerLimits", "create_command", "exec_command",
           "image_digest", "inspect_digests_command", "kill_others_command", "pull_command", "remove_command",
           "shell_script", "tar_in_command", "tar_out_command"]

#: The workspace inside the container: a size-limited tmpfs, as in envhub's own sandbox.
WORKSPACE = "/workspace"
#: Where the shell's state between commands (cwd, exported variables) is kept in the container.
STATE_DIR = "/tmp/.envhub-shell"
#: The container's main process: a shell that waits until the container is removed.
KEEPALIVE = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
#: The uid:gid commands run as (nobody), so nothing runs as the container's root.
USER = "65534:65534"

_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")


@dataclass(frozen=True)
class ContainerLimits:
    """The limits of :class:`envhub.plugin.ShellLimits` that the container itself enforces."""

    memory_mb: int
    processes: int
    cpu_s: int
    disk_mb: int
    network: bool
    #: Size of the container's /tmp (the shell's state lives there too).
    tmp_mb: int = 64


def image_digest(image: str) -> str:
    """The ``sha256:...`` digest an image reference ends with.

    >>> image_digest("docker.io/library/python@sha256:" + "0" * 64)[:10]
    'sha256:000'
    """
    match = _DIGEST.search(image)
    if match is None:
        raise ValueError(f"image {image!r} is not referenced by digest (@sha256:...)")
    return match.group(1)


def pull_command(engine: str, image: str) -> list[str]:
    """Pull ``image`` (by its digest) quietly."""
    return [engine, "pull", "--quiet", image]


def inspect_digests_command(engine: str, image: str) -> list[str]:
    """Print the repository digests of the local ``image`` as a JSON list."""
    return [engine, "image", "inspect", "--format", "{{json .RepoDigests}}", image]


def create_command(engine: str, image: str, name: str, limits: ContainerLimits, *,
                   mounts: Mapping[str, Path] | None = None, labels: Mapping[str, str] | None = None) -> list[str]:
    """Start a detached container ``name`` from ``image`` that waits for ``exec`` s: no network
    (unless ``limits.network``, then the engine's default network), a read-only root, no
    capabilities, no new privileges, memory, process and CPU-time limits, the workspace a
    size-limited tmpfs, and each of ``mounts`` (container path -> host directory) read-only."""
    command = [engine, "run", "--detach", "--name", name, *([] if limits.network else ["--network", "none"]),
               "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
               "--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m",
               "--pids-limit", str(limits.processes),
               "--ulimit", f"cpu={limits.cpu_s}:{limits.cpu_s}",
               "--tmpfs", f"{WORKSPACE}:rw,exec,size={limits.disk_mb}m,mode=1777",
               "--tmpfs", f"/tmp:rw,exec,size={limits.tmp_mb}m,mode=1777",
               "--user", USER, "--workdir", WORKSPACE]
    for key, value in sorted((labels or {}).items()):
        command += ["--label", f"{key}={value}"]
    for target, source in sorted((mounts or {}).items()):
        command += ["--mount", f"type=bind,source={source},target={target},readonly"]
    return [*command, "--entrypoint", "/bin/sh", image, "-c", KEEPALIVE]


def shell_script(command: str, shell: str = "bash") -> str:
    """The script one ``run`` executes: the previous command's directory and exported variables
    restored, ``command`` run in this same shell (so ``cd`` and ``export`` last), stderr into
    stdout, and the new directory and variables saved when it ends, however it ends.

    >>> print(shell_script("make", "sh").splitlines()[-1])
    make
    """
    state = shlex.quote(STATE_DIR)
    save = f"__envhub_s=$?; pwd > {state}/cwd; export -p > {state}/env; exit $__envhub_s"
    return "\n".join([
        "exec 2>&1",
        f"mkdir -p {state}",
        f"cd {WORKSPACE}",
        f"[ -f {state}/env ] && . {state}/env",
        f'[ -f {state}/cwd ] && cd "$(cat {state}/cwd)" 2>/dev/null',
        f"trap {shlex.quote(save)} EXIT",
        command,
    ])


def exec_command(engine: str, name: str, argv: Sequence[str], *, stdin: bool = False,
                 workdir: str = WORKSPACE) -> list[str]:
    """Run ``argv`` in the container ``name`` as the unprivileged user."""
    return [engine, "exec", *(["--interactive"] if stdin else []), "--user", USER, "--workdir", workdir, name,
            *argv]


def kill_others_command(engine: str, name: str) -> list[str]:
    """End every process of the container but its main one (background processes, a fork
    bomb, a command whose ``exec`` client was killed at its timeout)."""
    return [engine, "exec", "--user", USER, name, "/bin/sh", "-c", "kill -9 -1 2>/dev/null; true"]


def tar_in_command(engine: str, name: str) -> list[str]:
    """Unpack a tar stream from stdin into the workspace (how the seed goes in: a tmpfs is
    invisible to ``cp``)."""
    return exec_command(engine, name, ["tar", "-x", "-f", "-", "-C", WORKSPACE], stdin=True)


def tar_out_command(engine: str, name: str) -> list[str]:
    """Write the workspace as a tar stream to stdout (how ``export`` copies it out)."""
    return exec_command(engine, name, ["tar", "-c", "-f", "-", "-C", WORKSPACE, "."])


def remove_command(engine: str, name: str) -> list[str]:
    """Remove the container, ending whatever runs in it."""
    return [engine, "rm", "--force", "--volumes", name]
