"""Constrained string types shared by the manifest models.

Each type validates with a precise message (the message is part of the interface: the
conformance vectors in ``spec/conformance`` pin it) and documents itself in the JSON
Schema with a pattern, so editors that read the schema flag mistakes early too.
"""

from __future__ import annotations

import re
from typing import Annotated

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import AfterValidator, WithJsonSchema

from envhub.errors import InvalidIdError
from envhub.ids import parse_name, parse_specifier, parse_version

_ENTRY_POINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_SLUG = re.compile(r"[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?")
_CANARY = re.compile(r"envhub-canary:[0-9a-f]{32}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Names plugins register (verifier kinds, protocols, state kinds, formats, generators).
_PLUGIN_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._/-]*[a-z0-9])?")
CANARY_PREFIX = "envhub-canary:"


def _id_error(check):  # type: ignore[no-untyped-def]
    """Turn the id grammar's error into the ``ValueError`` pydantic reports per field."""

    def validate(value: str) -> str:
        try:
            check(value)
        except InvalidIdError as e:
            raise ValueError(e.message) from None
        return value

    return validate


def _check_entry_point(value: str) -> str:
    if not _ENTRY_POINT.fullmatch(value):
        raise ValueError(
            f"invalid entry point {value!r}: expected 'module:attribute', "
            "e.g. 'sql_shop.tools:run_sql'"
        )
    return value


def _check_generator(value: str) -> str:
    if ":" in value:
        return _check_entry_point(value)
    if not _PLUGIN_NAME.fullmatch(value):
        raise ValueError(
            f"invalid generator {value!r}: expected 'module:function' (the bundle's own code) or the "
            "name of a task generator an installed plugin provides (lowercase, e.g. 'arithmetic')"
        )
    return value


def _check_bundle_path(value: str) -> str:
    if not value:
        raise ValueError("the path is empty")
    if value.startswith("/") or re.match(r"[A-Za-z]:", value) or value.startswith("\\"):
        raise ValueError(
            f"absolute path {value!r}: paths are relative to the directory of envhub.toml"
        )
    if "\\" in value:
        raise ValueError(f"path {value!r} uses '\\': write paths with '/'")
    control = sorted({c for c in value if ord(c) < 0x20 or ord(c) == 0x7F})
    if control:
        shown = ", ".join(repr(c) for c in control)
        raise ValueError(f"path {value!r} contains the control character(s) {shown}: "
                         "name a file without control characters")
    parts = value.rstrip("/").split("/")
    if ".." in parts:
        raise ValueError(f"path {value!r} leaves the bundle: use a path inside the bundle directory")
    if any(part in ("", ".") for part in parts):
        raise ValueError(f"path {value!r} has empty or '.' segments: write it as a plain relative path")
    return value


def _check_requirement(value: str) -> str:
    try:
        Requirement(value)
    except InvalidRequirement as e:
        raise ValueError(f"invalid requirement {value!r}: {e}") from None
    return value


def _check_slug(what: str):  # type: ignore[no-untyped-def]
    def validate(value: str) -> str:
        if not _SLUG.fullmatch(value):
            raise ValueError(
                f"invalid {what} {value!r}: use lowercase letters, digits, '-' and '_', "
                "starting and ending with a letter or digit"
            )
        return value

    return validate


def _check_canary(value: str) -> str:
    if not _CANARY.fullmatch(value):
        raise ValueError(
            f"invalid canary {value!r}: expected 'envhub-canary:' and 32 lowercase hex digits; "
            "run 'envhub canary' for a fresh one"
        )
    return value


def _check_sha256(value: str) -> str:
    if not _SHA256.fullmatch(value):
        raise ValueError(f"invalid sha256 {value!r}: expected 64 lowercase hex digits")
    return value


def _check_field_name(value: str) -> str:
    if not value or value != value.strip():
        raise ValueError(f"invalid field name {value!r}: it must be non-empty, without outer spaces")
    return value


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as e:
        raise ValueError(f"invalid regular expression {value!r}: {e}") from None
    except OverflowError:
        # A repetition count past the engine's limit, such as 'a{99999999999}'.
        raise ValueError(f"invalid regular expression {value!r}: a repetition count is too large "
                         "(the limit is 4294967294)") from None
    except RecursionError:
        raise ValueError(f"invalid regular expression {value!r}: groups are nested too deeply") from None
    return value


def _schema(**extra: object) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", **extra})


EnvNameStr = Annotated[
    str,
    AfterValidator(_id_error(parse_name)),
    _schema(
        pattern=r"^(?!.*(--|\.\.))(?=[^/]{1,64}/[^/]{1,64}$)[a-z0-9]([a-z0-9._-]*[a-z0-9])?/[a-z0-9]([a-z0-9._-]*[a-z0-9])?$"
    ),
]
def _check_release_version(value: str) -> str:
    _id_error(parse_version)(value)
    if "+" in value:
        raise ValueError(
            f"invalid version {value!r}: local versions ('+...') cannot be published; "
            f"use a release version such as {value.split('+')[0]!r}"
        )
    return value


VersionStr = Annotated[
    str, AfterValidator(_check_release_version), _schema(description="PEP 440 version, without a local part")
]
SpecifierStr = Annotated[
    str, AfterValidator(_id_error(parse_specifier)), _schema(description="PEP 440 version specifier")
]
RequirementStr = Annotated[str, AfterValidator(_check_requirement), _schema(description="PEP 508 requirement")]
EntryPoint = Annotated[str, AfterValidator(_check_entry_point), _schema(pattern=f"^{_ENTRY_POINT.pattern}$")]
BundlePath = Annotated[
    str,
    AfterValidator(_check_bundle_path),
    _schema(
        description="relative POSIX path inside the bundle",
        pattern=r"^(?![/\\])(?![A-Za-z]:)(?!.*\\)(?!(.*/)?\.\.?(/|$))(?!.*//).+$",
    ),
]
SplitName = Annotated[str, AfterValidator(_check_slug("split name")), _schema(pattern=f"^{_SLUG.pattern}$")]
Tag = Annotated[str, AfterValidator(_check_slug("tag")), _schema(pattern=f"^{_SLUG.pattern}$")]
CriterionName = Annotated[str, AfterValidator(_check_slug("criterion name")), _schema(pattern=f"^{_SLUG.pattern}$")]
ServerName = Annotated[str, AfterValidator(_check_slug("server name")), _schema(pattern=f"^{_SLUG.pattern}$")]
Canary = Annotated[str, AfterValidator(_check_canary), _schema(pattern=f"^{_CANARY.pattern}$")]
Sha256 = Annotated[str, AfterValidator(_check_sha256), _schema(pattern=f"^{_SHA256.pattern}$")]
FieldName = Annotated[str, AfterValidator(_check_field_name), _schema(minLength=1)]
Regex = Annotated[str, AfterValidator(_check_regex), _schema(format="regex")]
GeneratorRef = Annotated[
    str,
    AfterValidator(_check_generator),
    _schema(
        description="the bundle's 'module:function', or the name of an installed plugin's task generator",
        pattern=f"^(?:{_ENTRY_POINT.pattern}|{_PLUGIN_NAME.pattern})$",
    ),
]


def open_name(builtins: tuple[str, ...], what: str) -> object:
    """A string naming a built-in ``what`` or one an installed plugin provides. The models
    take any string: ``envhub.manifest._plugins`` checks names that are not built in
    against the installed plugins. The JSON Schema offers the built-in names to editors."""
    return Annotated[
        str,
        WithJsonSchema({"anyOf": [
            {"enum": list(builtins)},
            {"type": "string", "pattern": f"^{_PLUGIN_NAME.pattern}$",
             "description": f"a {what} an installed plugin provides"},
        ]}),
    ]
