"""sha256 of files, the one way envhub computes it."""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 8 * 1024 * 1024


def file_sha256(path: str | Path) -> str:
    """``sha256:<hex>`` of a file's bytes."""
    with open(path, "rb") as f:
        if hasattr(hashlib, "file_digest"):  # Python 3.11+
            return "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()
        h = hashlib.sha256()  # pragma: no cover - Python 3.10
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
        return "sha256:" + h.hexdigest()
