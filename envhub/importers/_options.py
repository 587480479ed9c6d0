"""Reading an importer's options (``--option KEY=VALUE`` text) into typed values.

Each reader raises :class:`envhub.errors.UsageError` naming the option, the value and what
would do instead, so ``envhub import`` exits 2 with a message rather than a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from envhub.errors import UsageError

_TRUE = ("true", "yes", "1", "on")
_FALSE = ("false", "no", "0", "off")


def flag(options: Mapping[str, str], key: str) -> bool:
    """``options[key]`` as a bool (false when absent)."""
    value = options.get(key, "false").strip().lower()
    if value not in _TRUE + _FALSE:
        raise UsageError(f"option {key}={options[key]!r} is not true or false", hint=f"use {key}=true or {key}=false")
    return value in _TRUE


def integer(options: Mapping[str, str], key: str, default: int, *, minimum: int, maximum: int) -> int:
    """``options[key]`` as an integer in [minimum, maximum] (``default`` when absent)."""
    if key not in options:
        return default
    try:
        value = int(options[key])
    except ValueError:
        value = minimum - 1
    if not minimum <= value <= maximum:
        raise UsageError(f"option {key}={options[key]!r} is not a whole number from {minimum} to {maximum}",
                         hint=f"for example {key}={default}")
    return value


def choice(options: Mapping[str, str], key: str, default: str, choices: Iterable[str]) -> str:
    """``options[key]``, one of ``choices`` (``default`` when absent)."""
    allowed = list(choices)
    value = options.get(key, default)
    if value not in allowed:
        raise UsageError(f"option {key}={value!r} is not one of {', '.join(allowed)}",
                         hint=f"use {' or '.join(f'{key}={c}' for c in allowed)}")
    return value
