"""Bundle archives: deterministic tar files, written and extracted safely.

An archive is an uncompressed POSIX (pax) tar of regular files in sorted order, with fixed
modification times, owners and modes, ending with ``.envhub/RECORD`` (one
``path,sha256:<hex>,<size>`` line per file). The same files give the same bytes, so the
archive's sha256 is the bundle digest. Archives are not compressed: pulling is then one
pass of hashing and copying (see bench/pull.py), and task data that is worth compressing
is usually stored compressed already (Parquet).
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import re
import shutil
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from envhub.errors import BundleError
from envhub.problems import Problem

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["RECORD", "ArchiveInfo", "extract_archive", "parse_record", "path_problem", "write_archive"]

RECORD = ".envhub/RECORD"
FIXED_MTIME = 315532800  # 1980-01-01T00:00:00Z, as in zip; 0 confuses some tools
_COPY_BUFFER = 1024 * 1024
_MAX_MEMBERS = 1_000_000
_RECORD_SLACK = 64 * 1024


@dataclass(frozen=True)
class ArchiveInfo:
    path: Path
    digest: str  # "sha256:<hex>"
    size: int
    files: int


class _HashingWriter(io.RawIOBase):
    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.hash = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer) -> int:
        self.hash.update(data)
        self.size += memoryview(data).nbytes  # len(data), for any buffer
        return self.raw.write(data)


class _HashingReader(io.RawIOBase):
    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.hash.update(data)
        return data


def _info(name: str, size: int, executable: bool) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = FIXED_MTIME
    info.mode = 0o755 if executable else 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


def write_archive(dest: Path, files: Iterable[tuple[str, Path | bytes]]) -> ArchiveInfo:
    """Write ``files`` (archive name, source path or content) to ``dest`` atomically.

    Entries are written sorted by name, then the RECORD. Returns the archive's digest.
    """
    entries = sorted(files, key=lambda item: item[0])
    record: list[str] = []
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as raw:
            writer = _HashingWriter(raw)
            with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for name, source in entries:
                    if isinstance(source, bytes):
                        tar.addfile(_info(name, len(source), False), io.BytesIO(source))
                        record.append(f"{name},sha256:{hashlib.sha256(source).hexdigest()},{len(source)}")
                        continue
                    st = source.stat()
                    with open(source, "rb") as f:
                        reader = _HashingReader(f)
                        tar.addfile(_info(name, st.st_size, bool(st.st_mode & stat.S_IXUSR)), reader)
                    record.append(f"{name},sha256:{reader.hash.hexdigest()},{st.st_size}")
                data = ("\n".join(record) + "\n").encode()
                tar.addfile(_info(RECORD, len(data), False), io.BytesIO(data))
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ArchiveInfo(dest, f"sha256:{writer.hash.hexdigest()}", writer.size, len(entries))


def parse_record(text: str) -> dict[str, tuple[str, int]]:
    """``.envhub/RECORD`` as ``{path: ("sha256:<hex>", size)}``.

    Raises ValueError naming the line for anything envhub does not write: a path that is
    not normalised, a digest that is not ``sha256:`` and 64 lowercase hex digits, a size
    that is not a non-negative integer, a path listed twice.

    >>> parse_record("a.txt,sha256:" + "0" * 64 + ",3\\n")
    {'a.txt': ('sha256:0000000000000000000000000000000000000000000000000000000000000000', 3)}
    >>> parse_record("./a.txt,sha256:" + "0" * 64 + ",3\\n")
    Traceback (most recent call last):
    ...
    ValueError: line 1: path './a.txt' is not normalised (it would be 'a.txt')
    """
    out: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line:
            continue
        try:
            path, digest, size = line.rsplit(",", 2)
        except ValueError:
            raise ValueError(f"line {number}: expected 'path,sha256:<hex>,size', got {line!r}") from None
        why = path_problem(path)
        if why:
            raise ValueError(f"line {number}: path {why}")
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"line {number}: {digest!r} is not 'sha256:' and 64 lowercase hex digits")
        if not size.isdigit() or not size.isascii():
            raise ValueError(f"line {number}: size {size!r} is not a non-negative integer")
        if path in out:
            raise ValueError(f"line {number}: {path!r} is listed twice")
        out[path] = (digest, int(size))
    return out


def path_problem(name: str) -> str | None:
    """Why ``name`` cannot be a path inside a bundle, or None if it can: it must be relative,
    ``/``-separated and normalised (no ``.``, ``..`` or empty segment, no ``\\``), so that
    one file has exactly one spelling and duplicates cannot hide as ``./a`` and ``a``.

    >>> path_problem("tasks/train.jsonl") is None
    True
    >>> path_problem("a//b")
    "'a//b' is not normalised (it would be 'a/b')"
    >>> path_problem("tasks/../../x")
    "'tasks/../../x' leaves the bundle directory"
    """
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return f"{name!r} is absolute"
    if "\\" in name or ".." in name.split("/"):
        return f"{name!r} leaves the bundle directory"
    if any(part in ("", ".") for part in name.split("/")):
        return f"{name!r} is not normalised (it would be {posixpath.normpath(name)!r})"
    return None


def _member_problem(member: tarfile.TarInfo, seen: set[str]) -> str | None:
    name = member.name
    if member.issparse():
        return f"entry {name!r} is a sparse file; bundles hold only regular files"
    if not (member.isreg() or member.isdir()):
        kind = "link" if (member.issym() or member.islnk()) else "special file"
        return f"entry {name!r} is a {kind}; bundles hold only regular files"
    why = path_problem(name)
    if why:
        if why.endswith("is absolute"):
            return f"entry {name!r} has an absolute path"
        if why.endswith("leaves the bundle directory"):
            return f"entry {name!r} leaves the extraction directory"
        return f"entry {why}"
    if name in seen:
        return f"entry {name!r} appears twice"
    return None


def _copy_member(raw: BinaryIO, member: tarfile.TarInfo, out: int) -> str:
    """Copy one member's bytes (contiguous at ``offset_data`` in an uncompressed tar) to the
    file descriptor ``out``, hashing them on the way; returns ``sha256:<hex>``."""
    h = hashlib.sha256()
    remaining, offset = member.size, member.offset_data
    while remaining:
        block = _read_at(raw, offset, min(remaining, _COPY_BUFFER))
        if not block:
            raise EOFError("unexpected end of data")
        h.update(block)
        view = memoryview(block)
        while view:
            view = view[os.write(out, view):]
        offset += len(block)
        remaining -= len(block)
    return f"sha256:{h.hexdigest()}"


def _read_at(raw: BinaryIO, offset: int, size: int) -> bytes:
    raw.seek(offset)
    return raw.read(size)


_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _record_line_length(member: tarfile.TarInfo) -> int:
    """The bytes of ``member``'s RECORD line as :func:`write_archive` writes it, newline included.

    >>> _record_line_length(tarfile.TarInfo("a.txt"))  # size 0
    80
    """
    return len(member.name.encode()) + len(",sha256:") + 64 + len(f",{member.size}") + 1


def _makedirs(root: Path, relative: str, mode: int) -> None:
    """Create ``root/relative`` and the directories on the way, each with ``mode``."""
    path = root
    for part in relative.split("/"):
        path = path / part
        try:
            path.mkdir(mode=mode)
        except FileExistsError:
            if not path.is_dir():
                raise


def extract_archive(archive: Path, dest: Path, *, max_bytes: int, display: str | None = None,
                    private: bool = False) -> int:
    """Extract a bundle archive into ``dest`` (which must not exist) and return its size.

    Nothing is written until every header has been read and agrees with ``.envhub/RECORD``:
    the entries are exactly the files the RECORD lists, with the sizes it gives, and add up
    to at most ``max_bytes``. Then each file is hashed as it is written and must have the
    RECORD's digest. Refuses links, special and sparse files, paths that are absolute, leave
    ``dest`` or are not normalised, duplicate entries, entries that claim more bytes than
    the archive holds, and corrupted or truncated archives, raising :class:`BundleError`;
    ``dest`` is removed then. ``private`` makes directories 0700 and files 0600 (0700 if
    executable), from their creation on: for held-out splits.
    """
    shown = display or str(archive)

    def fail(message: str, hint: str | None = None) -> BundleError:
        return BundleError(f"{shown}: cannot extract the bundle",
                           [Problem("error", "bad-archive", message, file=shown, hint=hint)])

    not_ours = "the archive was not made by 'envhub build'; do not use it"
    dir_mode, file_mode = (0o700, 0o600) if private else (0o777, 0o666)  # the umask applies to the latter
    dest.mkdir(parents=True, mode=dir_mode)
    try:
        with open(archive, "rb") as raw, tarfile.open(fileobj=raw, mode="r:") as tar:
            archive_size = os.fstat(raw.fileno()).st_size
            # Pass 1: headers only (tarfile seeks over the data of an uncompressed tar).
            seen: set[str] = set()
            files: list[tarfile.TarInfo] = []
            directories: list[str] = []
            total = 0
            for count, member in enumerate(tar, start=1):
                if count > _MAX_MEMBERS:
                    raise fail(f"more than {_MAX_MEMBERS} entries")
                why = _member_problem(member, seen)
                if why:
                    raise fail(why, not_ours)
                seen.add(member.name)
                if member.isdir():
                    directories.append(member.name)
                    continue
                if member.offset_data + member.size > archive_size:
                    raise fail("the archive is corrupted or truncated (unexpected end of data)", "pull it again")
                total += member.size
                if total > max_bytes:
                    raise fail(f"the archive expands past the limit of {max_bytes} bytes",
                               "raise ENVHUB_MAX_BUNDLE_BYTES if you trust this bundle")
                files.append(member)
            # A tar cut at an entry boundary reads as complete: the RECORD, written last,
            # shows whether every entry is there.
            record_member = next((m for m in files if m.name == RECORD), None)
            if record_member is None:
                raise fail(f"the archive has no {RECORD}: it ends early or was not made by 'envhub build'",
                           "pull it again")
            # One line per other entry: a RECORD far longer than those lines (gigabytes of blank
            # lines, say) is refused before it is read, not parsed into memory. The slack keeps
            # the precise complaint of parse_record for RECORDs that are merely malformed.
            most = 2 * sum(_record_line_length(m) for m in files if m is not record_member) + _RECORD_SLACK
            if record_member.size > most:
                raise fail(f"{RECORD} is {record_member.size} bytes, far more than the lines of "
                           f"{len(files) - 1} entries need", not_ours)
            try:
                record_text = _read_at(raw, record_member.offset_data, record_member.size).decode("utf-8")
                listed = parse_record(record_text)
            except ValueError as e:
                raise fail(f"{RECORD} is unreadable ({e})", not_ours) from e
            sizes = {m.name: m.size for m in files if m is not record_member}
            if {path: size for path, (_, size) in listed.items()} != sizes:
                raise fail(f"the entries do not match {RECORD}: the archive ends early or was altered", "pull it again")
            # Pass 2: write, hashing each file against its RECORD line.
            for name in directories:
                _makedirs(dest, name, dir_mode)
            mismatches: list[Problem] = []
            for member in files:
                if "/" in member.name:
                    _makedirs(dest, member.name.rsplit("/", 1)[0], dir_mode)
                executable = bool(member.mode & stat.S_IXUSR) and member is not record_member
                # O_EXCL: a name that a case- or normalisation-insensitive filesystem folds onto
                # an earlier one is refused instead of overwriting it.
                target = dest / member.name
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), file_mode)
                try:
                    actual = _copy_member(raw, member, fd)
                finally:
                    os.close(fd)
                if executable:
                    target.chmod(0o700 if private else 0o755)
                expected = listed.get(member.name, (actual, 0))[0]
                if actual != expected:
                    mismatches.append(Problem("error", "bad-archive",
                                              f"{member.name} does not match {RECORD}: its sha256 is {actual}, "
                                              f"the RECORD says {expected}", file=shown,
                                              hint="the archive was altered after it was built; do not use it"))
            if mismatches:
                raise BundleError(f"{shown}: cannot extract the bundle", mismatches)
    except BundleError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (tarfile.TarError, EOFError, OSError) as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise fail(f"the archive is corrupted or truncated ({e})", "pull it again") from e
    return total
