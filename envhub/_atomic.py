"""Writing a file so that readers see the old content or the new, never a part."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, newlines as given) to a temporary file beside ``path`` and
    rename it into place; on any failure ``path`` is untouched and no temporary is left.

    The file keeps its permission bits when it exists; a new file gets the umask's default
    (``0o666 & ~umask``), as ``open(path, "w")`` would give it. A temporary file alone would
    be ``0o600``, turning a shared ``pyproject.toml`` private on every edit.
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # The umask can only be read by setting it; set it back at once.
    current = os.umask(0o022)
    os.umask(current)
    return current
