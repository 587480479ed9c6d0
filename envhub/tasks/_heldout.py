"""Held-out generator splits drawn from a secret.

A procedural held-out split is only held out if nobody can make its tasks from what is
public. So its seeds are not a range written anywhere: they are drawn from a public
``seed-space = [lo, hi)`` with a keyed hash (HMAC-SHA256) under a random 256-bit key, the
split's *secret*. The key lives in a file of the source bundle (``secret``) and, once
built, only in the held-out archive, as ``heldout-seeds/<split>.json``
(:func:`sealed_seeds_bytes`). The public manifest records that file's sha256: it holds the
key, so the digest cannot be searched for by trying seed ranges.

Everything that turns a key into seeds is here, in :func:`heldout_seeds`; the runtime,
``envhub build`` and plugins that write bundles all use it.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

__all__ = [
    "SEED_DOMAIN",
    "SecretError",
    "heldout_seeds",
    "new_secret",
    "parse_sealed_seeds",
    "read_secret",
    "sealed_seeds_bytes",
    "sealed_seeds_path",
    "write_secret",
]

#: The prefix of the HMAC message for seed ``j`` of a split: ``envhub-heldout-seed:<split>:<j>``.
SEED_DOMAIN = "envhub-heldout-seed"
_KEY_TEXT = re.compile(r"[0-9a-f]{64}")


class SecretError(ValueError):
    """A secret file that is missing or does not hold one 256-bit key (64 lowercase hex digits)."""


def heldout_seeds(key: bytes, split: str, rows: int, seed_space: tuple[int, int] | list[int]) -> list[int]:
    """The ``rows`` distinct seeds of held-out split ``split``, drawn from ``[lo, hi)`` with ``key``.

    For ``j = 0, 1, 2, ...`` the candidate is ``lo + int.from_bytes(HMAC-SHA256(key,
    "envhub-heldout-seed:<split>:<j>")[:8], "big") % (hi - lo)``; candidates already drawn
    are skipped, until there are ``rows`` seeds. Task ``i`` of the split is made from seed
    ``i``. Raises :class:`ValueError` if the space holds fewer than ``rows`` seeds.

    >>> key = bytes.fromhex("00" * 32)
    >>> heldout_seeds(key, "test", 3, [1_000_000_000, 2_147_483_648])
    [1340890419, 1981354318, 2040776465]
    >>> heldout_seeds(key, "test", 4, (0, 4))  # every seed of a small space, in a keyed order
    [3, 2, 1, 0]
    >>> space = [1_000_000_000, 2_147_483_648]
    >>> heldout_seeds(key, "other", 3, space) == heldout_seeds(key, "test", 3, space)
    False
    """
    lo, hi = seed_space
    if rows < 0 or hi - lo < rows:
        raise ValueError(f"seed-space [{lo}, {hi}) holds {max(hi - lo, 0)} seeds, fewer than rows = {rows}")
    size = hi - lo
    drawn: dict[int, None] = {}  # insertion-ordered set
    j = 0
    while len(drawn) < rows:
        digest = hmac.new(key, f"{SEED_DOMAIN}:{split}:{j}".encode(), "sha256").digest()
        drawn.setdefault(lo + int.from_bytes(digest[:8], "big") % size, None)
        j += 1
    return list(drawn)


def new_secret() -> str:
    """A fresh key: 64 lowercase hex digits (256 random bits)."""
    return secrets.token_hex(32)


def write_secret(path: str | Path) -> str:
    """Write a fresh key to ``path`` (creating its directory), readable by its owner only,
    and return it. Raises :class:`FileExistsError` rather than replace a key: a new key
    makes other tasks."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = new_secret()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(key + "\n")
    return key


def read_secret(path: str | Path) -> bytes:
    """The key in the secret file ``path``: one line of 64 lowercase hex digits. Raises
    :class:`SecretError` (saying why) if the file is missing or holds anything else."""
    path = Path(path)
    text: str | None
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise SecretError("not found") from None
    except (UnicodeDecodeError, IsADirectoryError):
        text = None
    if text is None or not _KEY_TEXT.fullmatch(text.removesuffix("\n")):
        raise SecretError("does not hold one line of 64 lowercase hex digits (a 256-bit key)")
    return bytes.fromhex(text.strip())


def sealed_seeds_path(split: str) -> str:
    """Where a built bundle keeps what a held-out generator split's seeds come from: a file
    of the held-out archive only."""
    return f"heldout-seeds/{split}.json"


def sealed_seeds_bytes(split: str, rows: int, seed_space: tuple[int, int] | list[int], key: bytes) -> bytes:
    """The exact bytes of ``heldout-seeds/<split>.json`` for a split drawn from a secret.

    >>> sealed_seeds_bytes("test", 2, [10, 20], bytes(32)).decode().replace("0" * 64, "<64 zeros>")
    '{"split": "test", "rows": 2, "seed-space": [10, 20], "key": "<64 zeros>"}\\n'
    """
    lo, hi = seed_space
    return (json.dumps({"split": split, "rows": rows, "seed-space": [lo, hi], "key": key.hex()}) + "\n").encode()


def parse_sealed_seeds(data: bytes) -> dict[str, Any]:
    """The fields of a ``heldout-seeds/<split>.json`` file: ``seeds`` (the old form, a
    public-range ``[start, stop]``) or ``rows``, ``seed-space`` and ``key`` (bytes).
    Raises :class:`ValueError` for anything else."""
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if "seeds" in doc:
        start, stop = doc["seeds"]
        return {"seeds": (int(start), int(stop))}
    lo, hi = doc["seed-space"]
    key = doc["key"]
    if not isinstance(key, str) or not _KEY_TEXT.fullmatch(key):
        raise ValueError("its key is not 64 lowercase hex digits")
    return {"rows": int(doc["rows"]), "seed-space": (int(lo), int(hi)), "key": bytes.fromhex(key)}
