"""Helpers for the build, registry, cache and push/pull tests: small bundles, archives
crafted by hand, entries planted in a directory registry, and process workers."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from envhub.bundle import BuiltBundle, build_bundle
from envhub.context import make_plugin_manager
from envhub.registry import version_key

NAME = "acme/arith"
SECRET = "HELDOUT-ANSWER"  # only in the held-out split's rows
#: envhub's built-in kinds and registry schemes, nothing installed: what these helpers build
#: and publish with (tests that need other plugins make their own manager).
PLUGINS = make_plugin_manager(autoload=False)

MANIFEST = """\
[environment]
name = "{name}"
version = "{version}"
description = "{description}"
tags = {tags}
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
splits.train = {{ path = "tasks/train.jsonl" }}
{test_split}
[verifier]
kind = "exact-match"
"""
TEST_SPLIT = 'splits.test = { path = "tasks/test.jsonl", held-out = true }\n'


def rows(prefix: str, n: int, *, answer: str = "", salt: str = "") -> str:
    return "".join(json.dumps({"id": f"{prefix}-{i}", "prompt": f"{i}+1?{salt}", "answer": f"{answer}{i + 1}"}) + "\n"
                   for i in range(n))


def write_env(root: Path, name: str = NAME, version: str = "1.0.0", *, salt: str = "", heldout: bool = True,
              description: str = "Arithmetic drills.", tags: Iterable[str] = ("math",),
              files: dict[str, str | bytes] | None = None) -> Path:
    """A valid bundle at ``root``: 3 train rows and, with ``heldout``, 2 held-out test rows.
    ``salt`` changes the train rows, hence the digest."""
    manifest = MANIFEST.format(name=name, version=version, description=description, tags=json.dumps(list(tags)),
                               test_split=TEST_SPLIT if heldout else "")
    contents: dict[str, str | bytes] = {"envhub.toml": manifest, "tasks/train.jsonl": rows("train", 3, salt=salt)}
    if heldout:
        contents["tasks/test.jsonl"] = rows("test", 2, answer=SECRET)
    contents.update(files or {})
    for rel, data in contents.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return root


def built_env(tmp: Path, version: str = "1.0.0", *, name: str = NAME, salt: str = "", **kw: Any) -> BuiltBundle:
    """Write and build a bundle under ``tmp`` (a fresh directory per name, version and salt)."""
    stem = f"{name.replace('/', '--')}-{version}-{salt or 'base'}"
    root = write_env(tmp / "src" / stem, name, version, salt=salt, **kw)
    return build_bundle(root, tmp / "dist" / stem, plugins=PLUGINS)


def members(archive: Path) -> list[str]:
    with tarfile.open(archive, mode="r:") as tar:
        return tar.getnames()


def member_bytes(archive: Path, name: str) -> bytes:
    with tarfile.open(archive, mode="r:") as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` with its size, inode and mtime: to show nothing changed."""
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): (p.lstat().st_size, p.lstat().st_ino, p.lstat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


# --- archives made by hand, as an attacker or a broken tool would --------------------------------

def regular(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def special(name: str, kind: bytes) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info, None


def craft(entries: Iterable[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A tar made of exactly ``entries``, in order, with no checks."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def plant(registry: Path, archive: bytes, *, name: str = NAME, version: str = "1.0.0",
          digest: str | None = None) -> str:
    """Publish ``archive`` in the directory registry as ``name@version`` the way a writer
    would (blob under its digest, then the index entry), without any check on the archive.
    ``digest`` overrides what the index says. Returns the blob's digest."""
    real = sha256(archive)
    blob = registry / "blobs" / "sha256" / real[7:9] / real[7:]
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(archive)
    namespace, short = name.split("/")
    entry = registry / "index" / namespace / short / f"{version_key(version)}.json"
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(json.dumps({"name": name, "version": version, "digest": digest or real, "size": len(archive),
                                 "published-at": "2024-01-01T00:00:00Z", "score-version": 1, "description": "",
                                 "tags": [], "heldout-digest": None, "locator": None}))
    return real


# --- workers for real separate processes (multiprocessing, spawn) ---------------------------------

def push_worker(registry_url: str, bundles: list[BuiltBundle], barrier: Any, results: Any) -> None:
    """Publish each bundle in turn, all workers starting each round together."""
    from envhub.errors import VersionConflictError
    from envhub.registry import open_registry
    from envhub.settings import load_settings

    registry = open_registry(registry_url, load_settings(), plugins=make_plugin_manager(autoload=False))
    for bundle in bundles:
        barrier.wait()
        try:
            result = registry.publish(bundle)
            results.put((bundle.version, "created" if result.created else "noop", bundle.public.digest))
        except VersionConflictError as e:
            results.put((bundle.version, "conflict", str(e)))
        except BaseException as e:  # reported to the test, not lost in the child
            results.put((bundle.version, "error", repr(e)))


def pull_worker(refs: list[str], registry_url: str, home: str, cache: str, barrier: Any, results: Any) -> None:
    """Pull each ref in turn into one shared cache, all workers starting each round together."""
    from envhub.hub import pull
    from envhub.settings import load_settings

    settings = load_settings({"ENVHUB_HOME": home, "ENVHUB_CACHE": cache})
    plugins = make_plugin_manager(autoload=False)
    for ref in refs:
        barrier.wait()
        try:
            result = pull(ref, registry_url, settings, plugins=plugins)
            results.put((ref, "ok", str(result.path), result.cached))
        except BaseException as e:
            results.put((ref, "error", repr(e), None))
