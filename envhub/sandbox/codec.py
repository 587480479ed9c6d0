"""Values as data: what crosses a sandbox's boundary, in either direction.

A value is encoded into JSON, so that only data, never an object with behaviour (an
``__eq__`` that always says yes, a ``__del__``, a pickle), reaches the other side. Plain JSON
types are themselves; the Python types JSON lacks are tagged objects:

>>> encode((1, "a", {2, 3}, b"hi", float("inf")))
{'$tuple': [1, 'a', {'$set': [2, 3]}, {'$bytes': 'aGk='}, {'$float': 'inf'}]}
>>> decode(encode({"k": [1.5, None], 3: "three"}))
{'k': [1.5, None], 3: 'three'}

Anything else is not data: :func:`encode` raises :class:`NotData`, or, given ``handle``, asks it
for a reference (``{"$ref": n, "type": "Node"}``) that the other side can use to point back at
the object without holding it. :func:`decode` builds only built-in types and turns a reference
into whatever its ``ref`` argument makes of it (by default it refuses one).

This module is standard library only: sandboxed guests run it as it is.
"""

from __future__ import annotations

import base64
import contextlib
import math
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "NotData", "decode", "encode", "same"]

#: Deepest nesting encoded or decoded.
MAX_DEPTH = 100
#: Most containers and scalars in one value.
MAX_ITEMS = 1_000_000


class NotData(TypeError):
    """A value that cannot cross as data (an object of another type, too deep, too big)."""


def encode(value: Any, handle: Callable[[Any], dict[str, Any]] | None = None) -> Any:
    """``value`` as JSON-ready data (see the module's docstring).

    Raises :class:`NotData` for a value that is not data and no ``handle`` is given, for
    nesting deeper than :data:`MAX_DEPTH`, and for more than :data:`MAX_ITEMS` items."""
    count = [0]

    def walk(v: Any, depth: int) -> Any:
        count[0] += 1
        if count[0] > MAX_ITEMS:
            raise NotData(f"more than {MAX_ITEMS} items")
        if depth > MAX_DEPTH:
            raise NotData(f"nested more than {MAX_DEPTH} deep")
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            return v if -(2**63) <= v < 2**63 else {"$int": str(v)}
        if t is float:
            if math.isnan(v):
                return {"$float": "nan"}
            if math.isinf(v):
                return {"$float": "inf" if v > 0 else "-inf"}
            return v
        if t is list:
            return [walk(x, depth + 1) for x in v]
        if t is tuple:
            return {"$tuple": [walk(x, depth + 1) for x in v]}
        if t is set or t is frozenset:
            items = [walk(x, depth + 1) for x in v]
            with contextlib.suppress(TypeError):  # unorderable items: in the set's order
                items.sort(key=_order)
            return {"$set" if t is set else "$frozenset": items}
        if t is dict:
            if all(type(k) is str and not k.startswith("$") for k in v):
                return {k: walk(x, depth + 1) for k, x in v.items()}
            return {"$dict": [[walk(k, depth + 1), walk(x, depth + 1)] for k, x in v.items()]}
        if t is bytes or t is bytearray:
            return {"$bytes": base64.b64encode(bytes(v)).decode("ascii")}
        if t is complex:
            return {"$complex": [walk(v.real, depth + 1), walk(v.imag, depth + 1)]}
        if handle is None:
            raise NotData(f"a {t.__name__} is not data")
        return handle(v)

    return walk(value, 0)


def _order(item: Any) -> str:
    return repr(item)


def decode(data: Any, ref: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """The value ``data`` encodes, built of built-in types only.

    Raises :class:`NotData` for a malformed tag, for nesting deeper than :data:`MAX_DEPTH` and
    for a reference when no ``ref`` is given."""
    count = [0]

    def walk(d: Any, depth: int) -> Any:
        count[0] += 1
        if count[0] > MAX_ITEMS:
            raise NotData(f"more than {MAX_ITEMS} items")
        if depth > MAX_DEPTH:
            raise NotData(f"nested more than {MAX_DEPTH} deep")
        t = type(d)
        if d is None or t in (bool, int, float, str):
            return d
        if t is list:
            return [walk(x, depth + 1) for x in d]
        if t is not dict:
            raise NotData(f"a {t.__name__} is not encoded data")
        tags = [k for k in d if k.startswith("$")]
        if not tags:
            return {k: walk(x, depth + 1) for k, x in d.items()}
        tag = tags[0]
        body = d[tag]
        try:
            if tag == "$tuple":
                return tuple(walk(x, depth + 1) for x in _list(body, tag))
            if tag == "$set":
                return {walk(x, depth + 1) for x in _list(body, tag)}
            if tag == "$frozenset":
                return frozenset(walk(x, depth + 1) for x in _list(body, tag))
            if tag == "$dict":
                return {walk(k, depth + 1): walk(x, depth + 1) for k, x in _list(body, tag)}
            if tag == "$bytes":
                return base64.b64decode(str(body), validate=True)
            if tag == "$int":
                return int(str(body))
            if tag == "$float":
                return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[body]
            if tag == "$complex":
                real, imag = _list(body, tag)
                return complex(float(real), float(imag))
            if tag == "$ref":
                if ref is None:
                    raise NotData("a reference to an object of the other side is not data")
                return ref(d)
        except NotData:
            raise
        except (TypeError, ValueError, KeyError) as e:
            raise NotData(f"malformed {tag}: {e}") from e
        raise NotData(f"unknown tag {tag!r}")

    return walk(data, 0)


def _list(body: Any, tag: str) -> list[Any]:
    if type(body) is not list:
        raise NotData(f"malformed {tag}: expected a list, got a {type(body).__name__}")
    return body


def same(actual: Any, expected: Any, *, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    """Whether a decoded ``actual`` equals ``expected`` as a test means it: Python's ``==`` on
    built-in types, except that a bool equals only a bool, floats are equal within the
    tolerances (NaN equals NaN), and a tuple equals a list of the same items (JSON, in which
    expected values are written, has no tuples).

    >>> same((1, 2.0000000001), [1, 2]), same(True, 1), same({"a": [1]}, {"a": (1,)})
    (True, False, True)
    """
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        if isinstance(actual, float) or isinstance(expected, float):
            if math.isnan(actual) and math.isnan(expected):
                return True
            return math.isclose(actual, expected, rel_tol=rel_tol, abs_tol=abs_tol)
        return bool(actual == expected)
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(
            same(a, e, rel_tol=rel_tol, abs_tol=abs_tol) for a, e in zip(actual, expected, strict=True))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(
            same(actual[k], expected[k], rel_tol=rel_tol, abs_tol=abs_tol) for k in expected)
    if type(actual) is not type(expected) and not (
            isinstance(actual, (set, frozenset)) and isinstance(expected, (set, frozenset))):
        return False
    return bool(actual == expected)
