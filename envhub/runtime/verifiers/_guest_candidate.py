"""The code-tests guest that runs the candidate (stdlib only; runs in the sandbox after
:mod:`envhub.sandbox.codec`, whose names it uses). Its ``INPUT``:

- ``{"mode": "calls", "candidate": src, "calls": [[function, args, kwargs], ...]}``: run the
  candidate as the module ``solution``, call each function, report each result as data
  (``{"event": "result", "i": i, "value": ...}`` or ``"error"``);
- ``{"mode": "io", "candidate": src, "stdin": [text, ...]}``: run the candidate as a program
  once per input and report what it printed (``"stdout"``);
- ``{"mode": "serve", "candidate": src}``: run it as ``solution``, report its names
  (``{"event": "ready", "names": {...}}``) and answer requests from stdin (calls, attributes,
  iteration) with data, or with references to objects it keeps here.

It never sees a test or an expected value: those stay with the verifier, which compares.
Everything here is the candidate's to tamper with; what it reports is taken as its answer.
"""

from __future__ import annotations

import io
import os
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time these are in the namespace the sandbox runs this module in
    from envhub.runtime.verifiers._guest_globals import CHANNEL, INPUT
    from envhub.sandbox.codec import NotData, decode, encode

# The names of the codec module, run before this one in the same namespace.
_encode, _decode, _NotData = encode, decode, NotData
_MAX_OUTPUT = 1024 * 1024


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text if len(text) <= 500 else text[:497] + "..."


def _load(source: str, name: str) -> tuple[types.CodeType | None, types.ModuleType | None]:
    """Compile and run the candidate as module ``name``; the module, or None after reporting."""
    try:
        code = compile(source, "solution.py", "exec")
    except MemoryError:
        CHANNEL.out_of_memory()
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes in the source
        CHANNEL.report(event="candidate_error", error=f"the candidate code does not compile: {_describe(e)}")
        return None, None
    module = types.ModuleType(name)
    if name == "solution":
        sys.modules["solution"] = module
    try:
        exec(code, module.__dict__)
    except MemoryError:
        CHANNEL.out_of_memory()
    except BaseException as e:  # noqa: BLE001 - the candidate's failure is reported, not raised
        import traceback  # only on this path: it costs start-up time

        tail = "".join(traceback.format_exception(e)[-3:])[-2000:]
        CHANNEL.report(event="candidate_error", error=f"the candidate code raised {_describe(e)}", traceback=tail)
        return code, None
    return code, module


class _Output(io.StringIO):
    """A stdout that stops the program past a size, so it cannot fill memory."""

    def write(self, s: str) -> int:
        if self.tell() + len(s) > _MAX_OUTPUT:
            raise OSError(f"the program printed more than {_MAX_OUTPUT} characters")
        return super().write(s)


def _calls(job: dict[str, Any]) -> None:
    _, module = _load(job["candidate"], "solution")
    if module is None:
        return
    for i, (function, args, kwargs) in enumerate(job["calls"]):
        try:
            target = getattr(module, function)
            value = target(*_decode(args), **_decode(kwargs))
            CHANNEL.report(event="result", i=i, value=_encode(value))
        except MemoryError:
            CHANNEL.out_of_memory()
        except _NotData as e:
            CHANNEL.report(event="result", i=i, error=f"the result is not data: {e}")
        except BaseException as e:  # noqa: BLE001 - SystemExit fails the call too
            CHANNEL.report(event="result", i=i, error=_describe(e))


def _io(job: dict[str, Any]) -> None:
    try:
        code = compile(job["candidate"], "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        CHANNEL.report(event="candidate_error", error=f"the candidate code does not compile: {_describe(e)}")
        return
    real = sys.stdin, sys.stdout
    for i, text in enumerate(job["stdin"]):
        out = _Output()
        sys.stdin, sys.stdout = io.StringIO(text), out
        error: str | None = None
        try:
            exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
        except MemoryError:
            CHANNEL.out_of_memory()
        except SystemExit as e:
            if e.code not in (None, 0):
                error = f"the program exited with status {e.code!r}"
        except BaseException as e:  # noqa: BLE001
            error = _describe(e)
        finally:
            sys.stdin, sys.stdout = real
        CHANNEL.report(event="result", i=i, stdout=out.getvalue(), **({"error": error} if error else {}))


class _Objects:
    """The candidate's objects the other side holds references to."""

    def __init__(self) -> None:
        self.objects: list[Any] = []

    def handle(self, value: Any) -> dict[str, Any]:
        self.objects.append(value)
        return {"$ref": len(self.objects) - 1, "type": type(value).__name__}

    def get(self, data: dict[str, Any]) -> Any:
        ref = data.get("$ref")
        if type(ref) is not int or not 0 <= ref < len(self.objects):
            raise _NotData(f"no object {ref!r}")
        return self.objects[ref]


_MAX_ITEMS = 100_000


def _serve(job: dict[str, Any]) -> None:
    _, module = _load(job["candidate"], "solution")
    if module is None:
        return
    objects = _Objects()
    names: dict[str, Any] = {}
    for name, value in vars(module).items():
        if name.startswith("__") or isinstance(value, types.ModuleType):
            continue
        try:
            names[name] = _encode(value, objects.handle)
        except _NotData:  # too big or too deep to send whole: the tests get a reference to it
            names[name] = objects.handle(value)
    CHANNEL.report(event="ready", names=names)
    while True:
        request = CHANNEL.receive()
        if request is None:
            return
        rid = request.get("id")
        try:
            target = objects.get(request.get("target") or {})
            op = request.get("op")
            if op == "call":
                value = target(*_decode(request["args"], objects.get), **_decode(request["kwargs"], objects.get))
            elif op == "getattr":
                value = getattr(target, str(request["name"]))
            elif op == "iter":
                value = []
                for item in target:
                    value.append(item)
                    if len(value) > _MAX_ITEMS:
                        raise ValueError(f"more than {_MAX_ITEMS} items")
            elif op == "len":
                value = len(target)
            elif op == "getitem":
                value = target[_decode(request["key"], objects.get)]
            elif op == "contains":
                value = _decode(request["item"], objects.get) in target
            elif op == "str":
                value = str(target)
            elif op == "bool":
                value = bool(target)
            else:
                raise ValueError(f"unknown request {op!r}")
            CHANNEL.report(event="reply", id=rid, value=_encode(value, objects.handle))
        except MemoryError:
            CHANNEL.out_of_memory()
        except BaseException as e:  # noqa: BLE001 - the candidate's exception goes back to the tests
            CHANNEL.report(event="reply", id=rid, error={"type": type(e).__name__, "message": str(e)[:500]})


def _main() -> None:
    job = INPUT
    if job["mode"] == "serve":
        # Requests come on stdin, from here on through a descriptor of their own (the caller
        # sends none before "ready"), so that the candidate's stdin is empty.
        CHANNEL._stdin = open(os.dup(0), "rb")  # noqa: SIM115 - read until the process ends
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the candidate gets an empty stdin
    os.close(devnull)
    {"calls": _calls, "io": _io, "serve": _serve}[job["mode"]](job)
    CHANNEL.report(event="done")


_main()
