"""Base filesystems: a root filesystem shipped as a tar archive, extracted once per digest.

:func:`prepare_base` extracts ``archive`` (tar, tar.gz, tar.bz2, tar.xz) into
``cache_dir/<sha256 of the archive>/root`` the first time, and returns that directory after;
a sandbox given it as ``base`` binds its top-level entries read-only as its root. Extraction
trusts nothing in the archive: a member whose path is absolute or climbs out with ``..``, or
whose path goes through a symbolic link, or a hard link to outside the tree, is refused
(:class:`~envhub.sandbox.WorkspaceError`); device files and FIFOs are left out (the sandbox
has its own ``/dev``); set-id and sticky bits are dropped, and every entry is made readable
by all (the sandbox's user is nobody's uid on the host when envhub runs as root).
Symbolic links are kept as they are: inside the sandbox they resolve within its root.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
import uuid
from pathlib import Path

from envhub.sandbox._sandbox import _remove_tree

__all__ = ["prepare_base"]

_COMPLETE = ".envhub-complete"


class BaseArchiveError(ValueError):
    """An archive that cannot be a base filesystem (wrapped in WorkspaceError by the caller)."""


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def prepare_base(archive: Path, cache_dir: Path) -> Path:
    """The extracted root of ``archive`` (see the module's docstring); raises
    :class:`BaseArchiveError` for an archive that is not a safe tar archive."""
    archive = Path(archive)
    digest = _digest(archive)
    final = Path(cache_dir) / digest
    if (final / _COMPLETE).exists():
        return final / "root"
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    staging = Path(cache_dir) / f".{digest}.{os.getpid()}.{uuid.uuid4().hex}"
    staging.mkdir(mode=0o755)
    try:
        _extract(archive, staging / "root")
        (staging / _COMPLETE).write_text(f"sha256:{digest}\n")
        try:
            os.rename(staging, final)
        except OSError:
            if not (final / _COMPLETE).exists():  # a half-made one, left by a process that died: replace it
                _remove_tree(final)
                os.rename(staging, final)
    finally:
        if staging.exists():
            _remove_tree(staging)
    return final / "root"


def _extract(archive: Path, root: Path) -> None:
    root.mkdir(mode=0o755)
    real_root = os.path.realpath(root)
    try:
        tar = tarfile.open(archive, "r:*")  # noqa: SIM115 - closed by the `with` below
    except (tarfile.TarError, OSError) as e:
        raise BaseArchiveError(f"{archive}: not a tar archive ({e})") from e
    dirs: list[tuple[str, int]] = []
    with tar:
        for member in tar:
            rel = _member_path(archive, member.name)
            if rel is None:
                continue  # the archive's root itself
            path = os.path.join(real_root, rel)
            parent = os.path.dirname(path)
            os.makedirs(parent, mode=0o755, exist_ok=True)
            if os.path.realpath(parent) != parent:
                raise BaseArchiveError(f"{archive}: member {member.name!r} goes through a symbolic link")
            mode = (member.mode & 0o777) | 0o444  # readable by all; no set-id, no sticky bit
            if member.isdir():
                if not os.path.isdir(path) or os.path.islink(path):
                    _unlink(path)
                    os.mkdir(path, 0o755)
                dirs.append((path, mode | 0o111))
            elif member.isreg():
                _unlink(path)
                source = tar.extractfile(member)
                assert source is not None
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                with os.fdopen(fd, "wb") as out, source:
                    shutil.copyfileobj(source, out)
                os.chmod(path, mode)
            elif member.issym():
                _unlink(path)
                os.symlink(member.linkname, path)
            elif member.islnk():
                try:
                    target_rel = _member_path(archive, member.linkname)
                except BaseArchiveError:
                    target_rel = None
                target = os.path.join(real_root, target_rel or "")
                if target_rel is None or os.path.realpath(target) != target or not os.path.isfile(target):
                    raise BaseArchiveError(f"{archive}: hard link {member.name!r} to {member.linkname!r}, "
                                           f"not a file of the archive")
                _unlink(path)
                os.link(target, path, follow_symlinks=False)
            # device files, FIFOs: left out; the sandbox mounts its own /dev
    for path, mode in reversed(dirs):
        os.chmod(path, mode)


def _unlink(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _member_path(archive: Path, name: str) -> str | None:
    """The normalised relative path of a member; None for the archive's root."""
    if name.startswith("/") or "\0" in name:
        raise BaseArchiveError(f"{archive}: member {name!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BaseArchiveError(f"{archive}: member {name!r} climbs out of the archive with '..'")
    return "/".join(parts) or None
