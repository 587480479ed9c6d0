"""The code-tests guest that runs a task's test code (stdlib only; runs in its own sandbox
after :mod:`envhub.sandbox.codec`, whose names it uses). It never runs candidate code: the
candidate lives in another sandbox, and every use of it here (``add(1, 2)``, ``from solution
import Stack``, ``Stack().push(3)``) is a request that the verifier relays there, whose
answer comes back as data or as a reference to an object kept on the candidate's side.

``INPUT = {"plan": [...]}``, the steps ``_code_tests.plan_tests`` made of the test file. The
first line on stdin is ``{"names": {...}}``, the candidate's top-level names; then each
request this guest sends (``{"event": "call", ...}``) is answered by one line on stdin. It
reports ``{"event": "test", "name": ..., "passed": ..., "error": ...}`` per test, then
``{"event": "done"}``.
"""

from __future__ import annotations

import builtins
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time these are in the namespace the sandbox runs this module in
    from collections.abc import Iterator

    from envhub.runtime.verifiers._guest_globals import CHANNEL, INPUT
    from envhub.sandbox.codec import NotData, decode, encode

# The names of the codec module, run before this one in the same namespace.
_encode, _decode, _NotData = encode, decode, NotData
_requests = [0]


class CandidateError(Exception):
    """An exception the candidate raised, of a type that is not built in."""


def _ask(op: str, target: dict[str, Any], **fields: Any) -> Any:
    _requests[0] += 1
    rid = _requests[0]
    CHANNEL.report(event="call", id=rid, op=op, target=target, **fields)
    reply = CHANNEL.receive()
    if reply is None:
        raise CandidateError("the candidate's sandbox ended")
    if "error" in reply:
        error = reply["error"]
        if error.get("type") == "candidate-ended":
            raise CandidateError(error.get("message", "the candidate's sandbox ended"))
        kind = getattr(builtins, str(error.get("type")), None)
        message = str(error.get("message", ""))
        if isinstance(kind, type) and issubclass(kind, Exception) and kind.__module__ == "builtins":
            try:
                exception = kind(message)
            except TypeError:  # an exception type whose constructor wants other arguments
                exception = None
            if exception is not None:
                raise exception
        raise CandidateError(f"{error.get('type')}: {message}")
    return _decode(reply.get("value"), _Remote)


def _send(value: Any) -> Any:
    try:
        return _encode(value, _outgoing)
    except _NotData as e:
        raise TypeError(f"only data can be passed to the candidate's code: {e}") from None


def _outgoing(value: Any) -> dict[str, Any]:
    if isinstance(value, _Remote):
        return {"$ref": object.__getattribute__(value, "_ref")}
    raise _NotData(f"a {type(value).__name__} is not data")


class _Remote:
    """An object of the candidate's, held in its sandbox: calls, attributes, iteration,
    ``len``, ``[]``, ``in``, ``str`` and truth go there; equality is identity."""

    __slots__ = ("_ref", "_type")

    def __init__(self, data: dict[str, Any]) -> None:
        object.__setattr__(self, "_ref", data["$ref"])
        object.__setattr__(self, "_type", str(data.get("type", "object")))

    def _target(self) -> dict[str, Any]:
        return {"$ref": object.__getattribute__(self, "_ref")}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _ask("call", self._target(), args=_send(list(args)), kwargs=_send(kwargs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _ask("getattr", self._target(), name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("the candidate's objects cannot be changed from the tests")

    def __iter__(self) -> Iterator[Any]:
        return iter(_ask("iter", self._target()))

    # What the candidate's side answers, as it answers it: len(), bool() and str() check its type
    # themselves (a TypeError in the test, as with a local object), ``in`` takes its truth.
    def __len__(self) -> Any:
        return _ask("len", self._target())

    def __getitem__(self, key: Any) -> Any:
        return _ask("getitem", self._target(), key=_send(key))

    def __contains__(self, item: Any) -> Any:
        return _ask("contains", self._target(), item=_send(item))

    def __str__(self) -> Any:
        return _ask("str", self._target())

    def __bool__(self) -> Any:
        return _ask("bool", self._target())

    def __repr__(self) -> str:
        return f"<candidate's {object.__getattribute__(self, '_type')}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Remote) and other._target() == self._target()

    def __hash__(self) -> int:
        return hash(object.__getattribute__(self, "_ref"))


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text if len(text) <= 500 else text[:497] + "..."


def _run(plan: list[list[str]], namespace: dict[str, Any]) -> None:
    setup_error: str | None = None
    for step in plan:
        if step[0] == "setup":
            if setup_error is None:
                try:
                    exec(compile(step[1], "tests.py", "exec"), namespace)
                except MemoryError:
                    CHANNEL.out_of_memory()
                except BaseException as e:  # noqa: BLE001 - any failure of setup fails what follows
                    setup_error = f"setup failed: {_describe(e)}"
            continue
        name = step[1]
        if setup_error is not None:
            CHANNEL.report(event="test", name=name, passed=False, error=setup_error)
            continue
        try:
            if step[0] == "call":
                result = namespace[step[2]]()
                if isinstance(result, types.CoroutineType):
                    import asyncio

                    asyncio.run(result)
            else:
                exec(compile(step[2], "tests.py", "exec"), namespace)
        except MemoryError:
            CHANNEL.out_of_memory()
        except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt fail the test too
            CHANNEL.report(event="test", name=name, passed=False, error=_describe(e))
        else:
            CHANNEL.report(event="test", name=name, passed=True)


def _main() -> None:
    first = CHANNEL.receive()
    if not isinstance(first, dict) or not isinstance(first.get("names"), dict):
        return  # the candidate never got ready: the verifier scores that
    names = {name: _decode(value, _Remote) for name, value in first["names"].items()}
    solution = types.ModuleType("solution")
    solution.__dict__.update(names)
    sys.modules["solution"] = solution
    namespace = {"__name__": "__main__", "__builtins__": builtins, "CandidateError": CandidateError, **names}
    _run(INPUT["plan"], namespace)
    CHANNEL.report(event="done")


_main()
