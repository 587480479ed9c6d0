"""TOML reading: tomllib from Python 3.11, its backport tomli before."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["TOMLDecodeError", "loads"]

loads = tomllib.loads
TOMLDecodeError = tomllib.TOMLDecodeError
