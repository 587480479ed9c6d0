"""The one grammar for environment ids.

An environment is named ``namespace/name``. A reference to it may pin a version with
``@`` (``acme/sql-shop@1.2.0``) or constrain it with a PEP 440 specifier
(``acme/sql-shop>=1.2,<2``). Both halves of a name are lowercase ASCII letters, digits
and ``. _ -``, start and end with a letter or digit, and contain neither ``--`` nor
``..`` (the Hugging Face Hub refuses those in repo ids, and a name must be publishable
to every registry backend).

Lengths are bounded so that no id, version or reference can overflow a file name or the
interpreter's integer conversion: a segment is at most 64 characters, a version at most 64,
a specifier set at most 256 and a whole reference at most 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from envhub.errors import InvalidIdError

if TYPE_CHECKING:
    # Imported where used: packaging.specifiers costs a warm `envhub pull` a third of its time.
    from packaging.specifiers import SpecifierSet

__all__ = [
    "EnvName",
    "EnvRef",
    "parse_name",
    "parse_ref",
    "parse_specifier",
    "parse_version",
]

_SEGMENT_MAX = 64
_VERSION_MAX = 64
_SPECIFIER_MAX = 256
_REF_MAX = 400
#: How much of an overlong input a message quotes.
_SHOWN_MAX = 80
_SEGMENT = re.compile(r"[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?")
# Where the name ends and a version constraint begins: '@' or a specifier operator.
_CONSTRAINT_START = re.compile(r"\s*(@|[<>=!~])")
_EXAMPLE = "'acme/sql-shop'"


@dataclass(frozen=True, order=True)
class EnvName:
    """A namespaced environment name, ``namespace/name``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class EnvRef:
    """A name plus what versions it accepts.

    ``version`` is set for an exact pin written ``name@version``; ``specifier`` for a
    constraint written ``name>=1.2,<2``. Neither is set for a bare name (any version).
    """

    name: EnvName
    specifier: SpecifierSet | None = None
    version: Version | None = None

    @property
    def pinned(self) -> Version | None:
        """The one version this reference accepts, if it accepts exactly one."""
        if self.version is not None:
            return self.version
        specs = list(self.specifier or ())
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            return Version(specs[0].version)
        return None

    def accepts(self, version: Version | str, *, prereleases: bool | None = None) -> bool:
        """Whether ``version`` satisfies this reference (an exact pin always admits itself)."""
        version = version if isinstance(version, Version) else Version(version)
        if self.version is not None:
            return version == self.version
        if self.specifier is None:
            return prereleases is not False or not version.is_prerelease
        return self.specifier.contains(version, prereleases=prereleases)

    def __str__(self) -> str:
        if self.version is not None:
            return f"{self.name}@{self.version}"
        return f"{self.name}{self.specifier or ''}"


def parse_name(text: str) -> EnvName:
    """Parse ``namespace/name``; raise :class:`InvalidIdError` saying what is wrong."""
    if not isinstance(text, str):
        raise InvalidIdError(f"invalid environment id {_show(text)}: expected a string like {_EXAMPLE}")
    parts = text.split("/")
    if len(parts) != 2:
        raise InvalidIdError(
            f"invalid environment id {_show(text)}: expected 'namespace/name', e.g. {_EXAMPLE}",
        )
    for part, what in zip(parts, ("namespace", "name"), strict=True):
        _check_segment(text, part, what)
    return EnvName(parts[0], parts[1])


def _show(text: object, *, length: bool = True) -> str:
    """``repr(text)``, cut short (saying its length unless ``length`` is false) when it is
    too long to print whole.

    >>> _show("a" * 100)
    "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' (100 characters)"
    """
    if isinstance(text, str) and len(text) > _SHOWN_MAX:
        return f"{text[:_SHOWN_MAX]!r}"[:-1] + "...'" + (f" ({len(text)} characters)" if length else "")
    return repr(text)


def _check_length(text: str, what: str, limit: int, context: str | None = None) -> None:
    if len(text) > limit:
        where = f" in {_show(context)}" if context else ""
        raise InvalidIdError(
            f"invalid {what} {_show(text, length=False)}{where}: it is {len(text)} characters long; "
            f"the limit is {limit}"
        )


def _check_segment(text: str, part: str, what: str) -> None:
    if not part:
        raise InvalidIdError(f"invalid environment id {_show(text)}: the {what} is empty")
    if len(part) > _SEGMENT_MAX:
        raise InvalidIdError(
            f"invalid environment id {_show(text)}: the {what} is {len(part)} characters long; "
            f"the limit is {_SEGMENT_MAX}"
        )
    if _SEGMENT.fullmatch(part) and "--" not in part and ".." not in part:
        return
    lowered = part.lower()
    suggestion = _suggest(text)
    did_you_mean = f"; did you mean {suggestion!r}?" if suggestion else ""
    if lowered != part and _SEGMENT.fullmatch(lowered):
        rule = "lowercase" if suggestion == text.lower() else "lowercase letters, digits, '.', '_' and '-'"
        raise InvalidIdError(f"invalid environment id {_show(text)}: ids are {rule}{did_you_mean}")
    if "--" in part or ".." in part:
        raise InvalidIdError(
            f"invalid environment id {_show(text)}: the {what} {part!r} contains '--' or '..'"
        )
    bad = sorted({c for c in part if not (c.isascii() and (c.isalnum() or c in "._-"))})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise InvalidIdError(
            f"invalid environment id {_show(text)}: the {what} {part!r} contains {shown}; "
            f"use lowercase letters, digits, '.', '_' and '-'{did_you_mean}"
        )
    raise InvalidIdError(
        f"invalid environment id {_show(text)}: the {what} {part!r} must start and end "
        "with a letter or digit"
    )


def _suggest(text: str) -> str | None:
    """A valid id close to ``text`` (``Acme/SQL Shop`` -> ``acme/sql-shop``), or None: only
    an id that is itself valid is worth suggesting."""
    import re

    parts = [re.sub(r"\.{2,}", ".", re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9._-]+", "-", p.lower()))).strip("._-")
             for p in text.split("/")]
    if len(parts) != 2 or not all(_SEGMENT.fullmatch(p) and len(p) <= _SEGMENT_MAX for p in parts):
        return None
    return "/".join(parts)


def parse_version(text: str, *, context: str | None = None) -> Version:
    """Parse a PEP 440 version of at most 64 characters; ``context`` names where it came
    from in the message. Raises :class:`InvalidIdError`."""
    if isinstance(text, str):
        _check_length(text, "version", _VERSION_MAX, context)
    try:
        return Version(text)
    except (InvalidVersion, TypeError):
        where = f" in {_show(context)}" if context else ""
        raise InvalidIdError(
            f"invalid version {_show(text)}{where}: not a PEP 440 version (e.g. '1.2.0', '2.0rc1')"
        ) from None


def parse_specifier(text: str, *, context: str | None = None) -> SpecifierSet:
    """Parse a PEP 440 specifier set such as ``>=1.2,<2`` of at most 256 characters;
    ``""`` and ``"*"`` mean any. Raises :class:`InvalidIdError`.

    Arbitrary equality (``===``) must name a PEP 440 version: ``===x`` could match no
    version that can be published.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if isinstance(text, str):
        _check_length(text, "version specifier", _SPECIFIER_MAX, context)
    if isinstance(text, str) and text.strip() in ("", "*"):
        return SpecifierSet()
    where = f" in {_show(context)}" if context else ""
    try:
        specifiers = SpecifierSet(text)
    except (InvalidSpecifier, TypeError):
        raise InvalidIdError(
            f"invalid version specifier {_show(text)}{where}: expected PEP 440 clauses such as "
            "'>=1.2,<2' or '==1.4.*'"
        ) from None
    for clause in specifiers:
        if clause.operator == "===":
            try:
                Version(clause.version)
            except InvalidVersion:
                raise InvalidIdError(
                    f"invalid version specifier {_show(text)}{where}: '==={clause.version}' names no "
                    f"PEP 440 version, so no published version can match it; write '===' with a "
                    "version such as '===1.0.0', or use '=='"
                ) from None
    return specifiers


def parse_ref(text: str) -> EnvRef:
    """Parse ``namespace/name``, ``namespace/name@1.2.0`` or ``namespace/name>=1.2,<2``
    (at most 400 characters). Raises :class:`InvalidIdError`."""
    if not isinstance(text, str):
        raise InvalidIdError(f"invalid environment id {_show(text)}: expected a string like {_EXAMPLE}")
    _check_length(text, "environment reference", _REF_MAX)
    stripped = text.strip()
    match = _CONSTRAINT_START.search(stripped)
    if match is None:
        return EnvRef(parse_name(stripped))
    name = parse_name(stripped[: match.start()])
    rest = stripped[match.start() :].strip()
    if rest.startswith("@"):
        return EnvRef(name, version=parse_version(rest[1:].strip(), context=text))
    return EnvRef(name, specifier=parse_specifier(rest, context=text))
