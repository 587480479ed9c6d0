"""``envhub.lock``: the exact environments a project uses (``spec/lockfile.md``).

Read on every ``envhub sync`` and every ``envhub.load`` inside a project, so this module
imports nothing heavy: the format is small and checked here by hand against
``spec/schema/lock-v1.schema.json`` (tests/test_lockfile.py keeps the two in agreement).
Written sorted, one environment per table, so a change of one version is a small diff.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envhub.errors import EnvhubError

__all__ = ["DEFAULT_SOURCE", "LOCK_FILENAME", "LOCK_VERSION", "LockError", "LockedEnv", "Lockfile", "dumps", "loads",
           "read_lock", "write_lock"]

LOCK_FILENAME = "envhub.lock"
LOCK_VERSION = 1
#: ``source`` of an environment from the embedded registry, which is per machine.
DEFAULT_SOURCE = "default"

_HEADER = "# envhub.lock: written by `envhub lock`; do not edit by hand.\n"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class LockError(EnvhubError):
    """``envhub.lock`` cannot be read or is out of date."""


@dataclass(frozen=True)
class LockedEnv:
    """One locked environment: enough to fetch and verify its bytes without asking the
    registry which version is current."""

    name: str
    version: str
    digest: str
    size: int
    #: The registry it came from: a URL, a directory, or "default" (the embedded one).
    source: str
    #: The immutable place of its bytes in that registry (a blob path; a Hub commit id).
    locator: str | None
    score_version: int = 1
    heldout_digest: str | None = None
    #: Its ``[dependencies]`` as requirements (``acme/b>=1,<2``), sorted.
    dependencies: tuple[str, ...] = ()
    python_dependencies: tuple[str, ...] = ()
    #: The container images its manifest references (``[state] base = "oci:..."``), each
    #: ``REGISTRY/REPOSITORY[:TAG]@sha256:DIGEST``, sorted.
    images: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"

    def dependency_names(self) -> list[str]:
        """The names of its ``dependencies``, in their order."""
        return [_requirement_name(r) for r in self.dependencies]


@dataclass
class Lockfile:
    """The contents of ``envhub.lock`` (``spec/lockfile.md``): read with :func:`read_lock`
    or :func:`loads`, written with :func:`write_lock` or :func:`dumps`."""

    #: The project's requirements when it was locked, normalized and sorted: the lock is
    #: up to date while pyproject.toml asks for the same.
    requires: list[str]
    environments: dict[str, LockedEnv] = field(default_factory=dict)
    prereleases: bool = False

    def get(self, name: str) -> LockedEnv | None:
        """The locked environment called ``name``, or None."""
        return self.environments.get(name)

    def locked_for(self, ref_text: str, *, path: Path | str = LOCK_FILENAME) -> LockedEnv | None:
        """The locked environment ``ref_text`` means: a bare name (``acme/a``), or a name
        whose version or specifier (``acme/a@1.2.0``, ``acme/a>=1.2``) the locked version
        satisfies. None for a name this lock does not have.

        Raises :class:`LockError` when the lock has the name at a version ``ref_text`` does
        not accept (loading it would silently differ from what the project locked), naming
        ``path`` (where this lock was read from) in the message, and
        :class:`envhub.errors.InvalidIdError` for a malformed ``ref_text``.

        >>> lock = Lockfile(["acme/a"], {"acme/a": LockedEnv("acme/a", "1.2.0", "sha256:" + "0" * 64, 1, "default",
        ...                                                   None)})
        >>> lock.locked_for("acme/a>=1").ref
        'acme/a@1.2.0'
        >>> lock.locked_for("acme/b") is None
        True
        >>> try:
        ...     lock.locked_for("acme/a@2.0.0", path="/work/trainer/envhub.lock")
        ... except LockError as e:
        ...     print(e.message)
        acme/a@2.0.0 asks for another version than /work/trainer/envhub.lock locks (acme/a@1.2.0)
        """
        from envhub.ids import parse_ref

        ref = parse_ref(ref_text)
        env = self.get(str(ref.name))
        if env is None:
            return None
        if not ref.accepts(env.version, prereleases=True):
            raise LockError(f"{ref} asks for another version than {path} locks ({env.ref})",
                            hint=f"ask for {ref.name} to use the locked version, or change pyproject.toml and run "
                                 "'envhub lock'")
        return env


def _requirement_name(text: str) -> str:
    match = re.match(r"^\s*([^<>=!~@\s]+)", text)
    return match.group(1) if match else text


# --- writing ----------------------------------------------------------------------------


def dumps(lock: Lockfile) -> str:
    """The lock as TOML: the same lock always gives the same bytes."""
    import tomli_w

    top: dict[str, Any] = {"lock-version": LOCK_VERSION, "requires": sorted(lock.requires)}
    if lock.prereleases:
        top["prereleases"] = True
    out = [_HEADER, tomli_w.dumps(top)]
    for name in sorted(lock.environments):
        env = lock.environments[name]
        table: dict[str, Any] = {"name": env.name, "version": env.version, "digest": env.digest, "size": env.size,
                                 "score-version": env.score_version, "source": env.source}
        if env.locator is not None:
            table["locator"] = env.locator
        if env.heldout_digest is not None:
            table["heldout-digest"] = env.heldout_digest
        table["dependencies"] = sorted(env.dependencies)
        table["python-dependencies"] = sorted(env.python_dependencies)
        if env.images:  # written only when there are some: other locks keep their bytes
            table["images"] = sorted(env.images)
        out.append("\n[[environment]]\n" + tomli_w.dumps(table))
    return "".join(out)


def write_lock(path: Path, lock: Lockfile) -> bool:
    """Write ``lock`` to ``path`` atomically (a temporary file renamed into place); False
    if the file already held exactly these bytes (nothing written)."""
    text = dumps(lock)
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except FileNotFoundError:
        pass
    from envhub._atomic import write_text_atomic

    write_text_atomic(path, text)
    return True


# --- reading ----------------------------------------------------------------------------


def read_lock(path: Path) -> Lockfile | None:
    """The lock at ``path``, or None if there is none. Raises :class:`LockError` naming
    the file, the field and the fix for anything malformed, and for a newer format."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise LockError(f"{path}: cannot read the lock: {e}") from e
    return loads(text, path=path)


def loads(text: str, *, path: Path | str = LOCK_FILENAME) -> Lockfile:
    """The lock in ``text``; :class:`LockError` naming ``path``, the field and the fix for
    anything malformed, and for a newer ``lock-version`` than this envhub reads."""
    from envhub import _toml

    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as e:
        raise LockError(f"{path}: invalid TOML: {e}", hint=_REGENERATE) from e
    return _parse(data, str(path))


_REGENERATE = "regenerate it with 'envhub lock' (it is written by envhub, not by hand)"


def _parse(data: dict[str, Any], path: str) -> Lockfile:
    def bad(where: str, what: str) -> LockError:
        return LockError(f"{path}: {where}: {what}", hint=_REGENERATE)

    version = data.get("lock-version")
    if type(version) is not int or version < 1:
        raise bad("lock-version", "missing or not a positive integer")
    if version > LOCK_VERSION:
        raise LockError(f"{path}: lock-version {version} is newer than this envhub understands ({LOCK_VERSION})",
                        hint="upgrade envhub (pip install -U envhub-rl), or relock with this version: envhub lock")
    known_top = {"lock-version", "requires", "prereleases", "environment"}
    for key in data:
        if key not in known_top:
            raise bad(key, "unknown key")
    requires = data.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise bad("requires", "must be a list of requirement strings")
    prereleases = data.get("prereleases", False)
    if not isinstance(prereleases, bool):
        raise bad("prereleases", "must be true or false")
    tables = data.get("environment", [])
    if not isinstance(tables, list):
        raise bad("environment", "must be an array of tables ([[environment]])")
    environments: dict[str, LockedEnv] = {}
    for i, table in enumerate(tables):
        env = _parse_env(table, f"environment[{i}]", bad)
        if env.name in environments:
            raise bad(f"environment[{i}].name", f"{env.name} is locked twice")
        environments[env.name] = env
    return Lockfile(list(requires), environments, prereleases)


_ENV_KEYS = {"name": str, "version": str, "digest": str, "size": int, "score-version": int, "source": str,
             "locator": str, "heldout-digest": str, "dependencies": list, "python-dependencies": list,
             "images": list}
_REQUIRED = ("name", "version", "digest", "size", "source")


def _parse_env(table: object, where: str, bad: Callable[[str, str], LockError]) -> LockedEnv:
    if not isinstance(table, dict):
        raise bad(where, "must be a table")
    for key, value in table.items():
        kind = _ENV_KEYS.get(key)
        if kind is None:
            raise bad(f"{where}.{key}", "unknown key")
        if type(value) is not kind:
            raise bad(f"{where}.{key}", f"must be a{'n' if kind is int else ''} {kind.__name__}")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise bad(f"{where}.{key}", "must be a list of strings")
    for key in _REQUIRED:
        if key not in table:
            raise bad(f"{where}.{key}", "missing")
    for key in ("digest", "heldout-digest"):
        if key in table and not _DIGEST.match(table[key]):
            raise bad(f"{where}.{key}", f"{table[key]!r} is not a sha256 digest")
    from envhub.manifest import image_problem

    for i, image in enumerate(table.get("images", ())):
        problem = image_problem(image)
        if problem is not None:
            raise bad(f"{where}.images[{i}]", problem[0])
    if table["size"] < 0 or table.get("score-version", 1) < 1:
        raise bad(where, "size must be >= 0 and score-version >= 1")
    return LockedEnv(
        name=table["name"], version=table["version"], digest=table["digest"], size=table["size"],
        source=table["source"], locator=table.get("locator"), score_version=table.get("score-version", 1),
        heldout_digest=table.get("heldout-digest"), dependencies=tuple(table.get("dependencies", ())),
        python_dependencies=tuple(table.get("python-dependencies", ())), images=tuple(table.get("images", ())),
    )
