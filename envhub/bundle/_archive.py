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
import shutil
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from envhub.errors import BundleError
from envhub.problems import Problem

__all__ = ["RECORD", "ArchiveInfo", "extract_archive", "parse_record", "write_archive"]

RECORD = ".envhub/RECORD"
FIXED_MTIME = 315532800  # 1980-01-01T00:00:00Z, as in zip; 0 confuses some tools
_COPY_BUFFER = 1024 * 1024
_MAX_MEMBERS = 1_000_000


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

    def write(self, data) -> int:  # type: ignore[no-untyped-def,override]
        self.hash.update(data)
        self.size += len(data)
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
            with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for name, source in entries:
                    if isinstance(source, bytes):
                        tar.addfile(_info(name, len(source), False), io.BytesIO(source))
                        record.append(f"{name},sha256:{hashlib.sha256(source).hexdigest()},{len(source)}")
                        continue
                    st = source.stat()
                    with open(source, "rb") as f:
                        reader = _HashingReader(f)  # type: ignore[arg-type]
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
    """``.envhub/RECORD`` as ``{path: ("sha256:<hex>", size)}``."""
    out = {}
    for line in text.splitlines():
        if line:
            path, digest, size = line.rsplit(",", 2)
            out[path] = (digest, int(size))
    return out


def _member_problem(member: tarfile.TarInfo, seen: set[str]) -> str | None:
    name = member.name
    if not (member.isreg() or member.isdir()):
        kind = "link" if (member.issym() or member.islnk()) else "special file"
        return f"entry {name!r} is a {kind}; bundles hold only regular files"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return f"entry {name!r} has an absolute path"
    parts = PurePosixPath(name).parts
    if ".." in parts or "\\" in name:
        return f"entry {name!r} leaves the extraction directory"
    if member.isreg() and name in seen:
        return f"entry {name!r} appears twice"
    return None


def _copy_member(tar: tarfile.TarFile, member: tarfile.TarInfo, raw: BinaryIO, out: BinaryIO) -> None:
    """Copy one member's bytes. An uncompressed tar keeps them contiguous at
    ``offset_data``, so the kernel can copy them (copy_file_range) without passing
    through Python; elsewhere, a buffered copy."""
    remaining, offset = member.size, member.offset_data
    if _HAS_COPY_FILE_RANGE and remaining and not member.sparse:
        try:
            while remaining:
                copied = os.copy_file_range(raw.fileno(), out.fileno(), remaining, offset)
                if copied == 0:
                    raise EOFError("unexpected end of data")
                offset += copied
                remaining -= copied
            return
        except OSError:  # e.g. EXDEV on older kernels, or a filesystem that refuses it
            if remaining != member.size:
                raise
    source = tar.extractfile(member)
    assert source is not None  # a regular file
    shutil.copyfileobj(source, out, _COPY_BUFFER)
    if out.tell() != member.size:
        raise EOFError("unexpected end of data")


_HAS_COPY_FILE_RANGE = hasattr(os, "copy_file_range")


def extract_archive(archive: Path, dest: Path, *, max_bytes: int, display: str | None = None) -> int:
    """Extract a bundle archive into ``dest`` (which must not exist) and return its size.

    Refuses links, special files, absolute paths and ``..``, duplicate entries, more than
    ``max_bytes`` of content, and corrupted or truncated archives, raising
    :class:`BundleError`; ``dest`` is removed then.
    """
    shown = display or str(archive)

    def fail(message: str, hint: str | None = None) -> BundleError:
        return BundleError(f"{shown}: cannot extract the bundle", [Problem("error", "bad-archive", message, file=shown, hint=hint)])

    dest.mkdir(parents=True)
    total = 0
    seen: set[str] = set()
    sizes: dict[str, int] = {}
    try:
        with open(archive, "rb") as raw, tarfile.open(fileobj=raw, mode="r:") as tar:
            for count, member in enumerate(tar, start=1):
                if count > _MAX_MEMBERS:
                    raise fail(f"more than {_MAX_MEMBERS} entries")
                why = _member_problem(member, seen)
                if why:
                    raise fail(why, "the archive was not made by 'envhub build'; do not use it")
                if member.isdir():
                    continue
                seen.add(member.name)
                total += member.size
                if total > max_bytes:
                    raise fail(f"the archive expands past the limit of {max_bytes} bytes",
                               "raise ENVHUB_MAX_BUNDLE_BYTES if you trust this bundle")
                target = dest / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as out:
                    _copy_member(tar, member, raw, out)
                if member.mode & stat.S_IXUSR:
                    target.chmod(0o755)
                sizes[member.name] = member.size
        # A tar cut at an entry boundary reads as complete: the RECORD, written last,
        # shows whether every entry is there.
        if RECORD not in sizes:
            raise fail(f"the archive has no {RECORD}: it ends early or was not made by 'envhub build'",
                       "pull it again")
        try:
            listed = parse_record((dest / RECORD).read_text(encoding="utf-8"))
        except ValueError as e:
            raise fail(f"{RECORD} is unreadable ({e})",
                       "the archive was not made by 'envhub build'; do not use it") from e
        del sizes[RECORD]
        if {path: size for path, (_, size) in listed.items()} != sizes:
            raise fail(f"the entries do not match {RECORD}: the archive ends early or was altered", "pull it again")
    except BundleError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (tarfile.TarError, EOFError, OSError) as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise fail(f"the archive is corrupted or truncated ({e})", "pull it again") from e
    return total
