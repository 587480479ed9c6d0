"""Turn pydantic's validation errors into envhub problems: the field path as the user
wrote it, a message in TOML's terms, and a "did you mean" for unknown keys and values."""

from __future__ import annotations

import datetime as dt
import difflib
import re
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from envhub.manifest._locate import locate
from envhub.manifest._models import VERIFIER_KINDS, Manifest
from envhub.problems import Problem

_TOML_TYPES: list[tuple[type, str]] = [
    (bool, "boolean"),
    (int, "integer"),
    (float, "float"),
    (str, "string"),
    (list, "array"),
    (dict, "table"),
    (dt.datetime, "datetime"),
    (dt.date, "date"),
    (dt.time, "time"),
]
_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean (true or false)",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}
_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "at least"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
}


def show(value: object) -> str:
    """A value as it would be written in TOML (``true``, ``'text'``, ``2024-01-01``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (list, dict)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return repr(value)


def toml_type(value: object) -> str:
    for cls, name in _TOML_TYPES:
        if isinstance(value, cls):
            return name
    return type(value).__name__


def format_field(loc: Sequence[str | int]) -> str:
    """``('tasks', 'splits', 'test', 'path')`` -> ``tasks.splits.test.path``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            out += f".{part}" if out else part
        else:
            quoted = '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out += f".{quoted}" if out else quoted
    return out


def _user_loc(loc: Sequence[str | int]) -> tuple[tuple[str | int, ...], bool]:
    """Drop the discriminator tags pydantic inserts into union locations, and the
    ``[key]`` marker of dictionary keys. Returns the path and whether it names a key."""
    out: list[str | int] = []
    is_key = False
    for part in loc:
        if part == "[key]":
            is_key = True
            continue
        if isinstance(part, str) and (part in VERIFIER_KINDS or part == "plugin") and out and (
            out[-1] == "verifier" or isinstance(out[-1], int)
        ):
            continue
        if part in ("specifier", "table") and len(out) == 2 and out[0] == "dependencies":
            continue  # the tag of a [dependencies] value's form
        out.append(part)
    return tuple(out), is_key


def _model_at(data: Any, loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the table at ``loc`` (for listing its keys)."""
    import envhub.manifest._models as _models

    kinds = {
        kind: cls
        for cls in (
            _models.ExactMatch, _models.Numeric, _models.RegexMatch, _models.JsonMatch,
            _models.PythonVerifier, _models.CodeTests, _models.Rubric, _models.LlmJudge,
        )
        for kind in typing.get_args(cls.model_fields["kind"].annotation)
    }
    model: Any = Manifest
    node = data
    for part in loc:
        if isinstance(node, Mapping):
            node = node[part]
        elif isinstance(node, list):
            node = node[part] if isinstance(part, int) else None  # a list's part is always an index
        else:
            node = None
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = next((f for name, f in model.model_fields.items() if f.alias == part or name == part), None)
            if field is None:
                return None
            model = field.annotation
        else:
            model = _item_type(model)
        model = _unwrap(model)
        if model == "verifier-union" or model == "criterion-union":
            kind = node.get("kind") if isinstance(node, Mapping) else None
            model = kinds.get(kind) if isinstance(kind, str) else None
            if model is not None and model is not _models.Rubric and isinstance(part, int):
                model = getattr(_models, model.__name__ + "Criterion", model)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    import envhub.manifest._models as _models

    # pydantic moves Annotated's metadata into FieldInfo, so a field's annotation is the
    # bare Union; accept both spellings.
    if annotation is _models.Verifier or annotation == typing.get_args(_models.Verifier)[0]:
        return "verifier-union"
    if annotation is _models.Criterion or annotation == typing.get_args(_models.Criterion)[0]:
        return "criterion-union"
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0])
    return annotation


def _item_type(annotation: Any) -> Any:
    import envhub.manifest._models as _models

    if annotation == "criterion-union":
        return _models.Criterion
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is list and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _allowed_keys(data: Any, parent: Sequence[str | int]) -> list[str]:
    model = _model_at(data, parent)
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def _quoted_list(choices: Sequence[str]) -> str:
    return ", ".join(repr(c) for c in choices)


def _message(err: ErrorDetails, data: Any, loc: tuple[str | int, ...], is_key: bool) -> tuple[str, str | None]:
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "missing":
        key = str(loc[-1])
        if len(loc) == 1:
            return f"missing required table [{key}]", f"add a [{key}] table"
        parent = format_field(loc[:-1])
        where = f"[{parent}]" if not any(isinstance(p, int) for p in loc[:-1]) else parent
        return f"missing required key {key!r}", f"add {key} = ... to {where}"
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = _allowed_keys(data, loc[:-1])
        hint = _did_you_mean(key, allowed) or (f"allowed keys: {_quoted_list(allowed)}" if allowed else "remove it")
        return f"unknown key {key!r}", hint
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {toml_type(value)} {show(value)}", None
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = _did_you_mean(str(value), choices) if isinstance(value, str) else ""
        return f"{show(value)} is not one of {_quoted_list(choices)}", hint or None
    in_criteria = any(isinstance(p, int) for p in loc)
    kinds = [k for k in VERIFIER_KINDS if not (in_criteria and k == "rubric")]
    if kind == "union_tag_invalid":
        tag = ctx.get("tag")
        if in_criteria and tag == "rubric":
            return "a criterion cannot itself be a rubric", "list its criteria in this rubric directly"
        hint = _did_you_mean(str(tag), kinds) or f"use one of {_quoted_list(kinds)}"
        return f"unknown verifier kind {tag!r}", hint
    if kind == "union_tag_not_found":
        return "missing required key 'kind'", f"add kind = one of {_quoted_list(kinds)}"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {ctx.get(key)}, got {show(value)}", None
    if kind == "finite_number":
        return f"must be a finite number, got {show(value)}", None
    if kind == "string_too_short":
        return "must not be empty", None
    if kind == "too_short":
        what = "table" if isinstance(value, Mapping) else "array"
        return f"the {what} is empty; at least {ctx.get('min_length')} entry is needed", None
    if kind == "value_error":
        message = str(ctx.get("error", err["msg"]))
        return message, None
    return err["msg"], None


def problems_from_validation(
    errors: Sequence[ErrorDetails], data: Any, *, file: str, text: str
) -> list[Problem]:
    """One :class:`Problem` per pydantic error, in the order of the file."""
    problems = []
    for err in errors:
        loc, is_key = _user_loc(err["loc"])
        message, hint = _message(err, data, loc, is_key)
        position = locate(text, loc if err["type"] != "missing" else loc[:-1])
        problems.append(
            Problem(
                severity="error",
                code=err["type"].replace("_", "-"),
                message=message,
                file=file,
                line=position[0] if position else None,
                column=position[1] if position else None,
                field=format_field(loc) or None,
                hint=hint,
            )
        )
    problems.sort(key=lambda p: (p.line or 0, p.column or 0))
    return problems
