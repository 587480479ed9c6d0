"""Tools: plain Python functions offered to the model in the OpenAI ``tools`` format.

A tool's JSON schema comes from its signature (types, through pydantic) and its docstring
(the summary, and per-parameter text from an ``Args:`` section or ``:param x:`` lines).

A parameter annotated ``State[T]`` (``Annotated[T, EpisodeState]``), whatever its name, is
not shown to the model: it receives the episode's state (the workspace path, the SQLite
connection, the python state object). Every other parameter is the model's, ``state``
included (a US state in an address). For bundles written before ``State``, a parameter
named ``state`` that no model could fill in (no annotation, ``Any``, ``Path``,
``sqlite3.Connection``, a ``ShellWorkspace``, or a type with no JSON schema) still receives
the state, with a :class:`DeprecationWarning`.

A parameter annotated ``Params[T]`` (``Annotated[T, EnvParams]``), whatever its name, is not
shown to the model either: it receives the manifest's ``[config.params]`` as a read-only
mapping (never by parameter name: a model's ``params`` argument stays the model's).

>>> def greet(name: str, *, config: Params[Mapping[str, Any]]) -> str:
...     return f"{config['greeting']}, {name}"
>>> tool = make_tool(greet, params={"greeting": "Hi"})
>>> sorted(tool.spec["function"]["parameters"]["properties"])
['name']
>>> tool.call({"id": "1", "function": {"name": "greet", "arguments": '{"name": "Ada"}'}}).message["content"]
'Hi, Ada'

>>> from pathlib import Path
>>> def ship(city: str, state: str, *, workspace: State[Path]) -> str:
...     return city
>>> sorted(make_tool(ship).spec["function"]["parameters"]["properties"])
['city', 'state']

Whatever goes wrong in a call (an unknown tool, arguments that are not JSON or do not fit
the signature, the tool raising) comes back to the model as the tool's output, starting
with ``Error:``, so the model can recover; the episode goes on. Each error says whose it
is (:attr:`ToolCallResult.fault`): the model's (an unknown tool, arguments that are not JSON
or do not fit the signature) or the environment's (the tool's own code raising, an import of
the bundle's code failing inside it), so a summary can count them apart.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal, Protocol, TypeVar

from envhub.runtime._types import Reply

__all__ = ["EnvParams", "EpisodeState", "Params", "State", "Tool", "ToolCallResult", "ToolError", "ToolLike",
           "make_tool"]

T = TypeVar("T")
_UnionType = types.UnionType


class EpisodeState:
    """The marker of a tool parameter that receives the episode's state:
    ``Annotated[sqlite3.Connection, EpisodeState]``, or :data:`State` for short."""


#: ``State[T]`` is ``Annotated[T, EpisodeState]``: a tool parameter of this type is hidden from
#: the model and receives the episode's state (``def run_sql(query: str, *, db: State[Connection])``).
State = Annotated[T, EpisodeState]

class EnvParams:
    """The marker of a parameter that receives the manifest's ``[config.params]``:
    ``Annotated[Mapping[str, Any], EnvParams]``, or :data:`Params` for short."""


#: ``Params[T]`` is ``Annotated[T, EnvParams]``: a tool parameter (or a spec tool handler's) of
#: this type is hidden from the model and receives ``[config.params]``, read-only
#: (``def lookup(sku: str, *, params: Params[Mapping[str, Any]])``).
Params = Annotated[T, EnvParams]

#: The name that received the state before :data:`State`; see :func:`_legacy_state`.
LEGACY_STATE_PARAMETER = "state"

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_SECTION_HEADER = re.compile(r"^\s*(Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_GOOGLE_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^\s*:param\s+(?:[\w\[\], ]+\s+)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {parameter: text}) from a Google- or Sphinx-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if _SECTION_HEADER.match(line):
            in_args, current = False, None
            continue
        sphinx = _SPHINX_ARG.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if line.strip().startswith(":"):
            current = None
            continue
        if in_args:
            google = _GOOGLE_ARG.match(line)
            if google and (len(line) - len(line.lstrip())) <= 4:
                current = google.group(1).lstrip("*")
                params[current] = google.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
            continue
        if current is None and not params:
            summary.append(line)
    description = "\n".join(summary).strip()
    return description, params


def _strip_titles(schema: Any) -> Any:
    """pydantic adds a ``title`` to every property; models read descriptions, not titles."""
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """One call's outcome: the tool message for the model, and whether it failed: ``error``
    (the text the model sees) and ``fault``, whose failure it was: ``"model"`` (a call it
    got wrong) or ``"environment"`` (the tool's code raised); None when it did not fail or
    when nobody is at fault (a simulated outage, ``tool-error-rate``)."""

    message: dict[str, Any]
    error: str | None = None
    fault: Literal["model", "environment"] | None = None
    #: What the tool said beyond its text when it returned a :class:`~envhub.runtime.Reply`:
    #: a per-turn reward, and whether (and why) the episode ends after this turn.
    reply: Reply | None = None


class ToolLike(Protocol):
    """What an episode calls: a :class:`Tool` (a Python function), a tool declared by a
    spec (:class:`~envhub.runtime.SpecTool`), an MCP server's tool, a built-in shell tool."""

    name: str
    source: str
    spec: dict[str, Any]

    def call(self, call: Mapping[str, Any], state: Any = None) -> ToolCallResult: ...

    async def acall(self, call: Mapping[str, Any], state: Any = None) -> ToolCallResult: ...


class FunctionCalls:
    """``call`` and ``acall`` of a tool that binds a call to a Python function's keywords
    (:class:`Tool`, from a signature; :class:`~envhub.runtime.SpecTool`, from a JSON-Schema
    spec): the subclass validates and binds (``_bind``); running the function, and turning its
    value or exception into the answer, is the same for both."""

    name: str
    fn: Callable[..., Any]
    is_async: bool

    def _bind(self, call: Mapping[str, Any], state: Any) -> tuple[str, dict[str, Any]] | ToolCallResult:
        """(call id, keyword arguments) for the function, or the error answer for a bad call."""
        raise NotImplementedError

    def call(self, call: Mapping[str, Any], state: Any = None) -> ToolCallResult:
        """Run one OpenAI tool call; never raises for the model's mistakes or the tool's errors
        (an ``async def`` function is run to completion)."""
        bound = self._bind(call, state)
        if isinstance(bound, ToolCallResult):
            return bound
        call_id, kwargs = bound
        try:
            value = asyncio.run(self.fn(**kwargs)) if self.is_async else self.fn(**kwargs)
        except Exception as e:
            return raised(call_id, self.name, e)
        return tool_result(call_id, self.name, value)

    async def acall(self, call: Mapping[str, Any], state: Any = None) -> ToolCallResult:
        """:meth:`call` for the event loop: an ``async def`` function is awaited, a plain one
        runs in a worker thread."""
        bound = self._bind(call, state)
        if isinstance(bound, ToolCallResult):
            return bound
        call_id, kwargs = bound
        try:
            value = await self.fn(**kwargs) if self.is_async else await asyncio.to_thread(self.fn, **kwargs)
        except Exception as e:
            return raised(call_id, self.name, e)
        return tool_result(call_id, self.name, value)


class Tool(FunctionCalls):
    """A function offered to the model; :meth:`call` runs one tool call against it."""

    def __init__(self, fn: Callable[..., Any], *, source: str = "", params: Mapping[str, Any] | None = None) -> None:
        self.fn = fn
        self.source = source or f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}"
        self.name: str = fn.__name__
        self.is_async = inspect.iscoroutinefunction(fn)
        signature = inspect.signature(fn)
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as e:  # a hint naming something the module never imported
            raise TypeError(f"tool {self.source}: cannot read its type hints: {e}") from e
        description, param_docs = _parse_docstring(fn.__doc__)
        #: The parameter that receives the episode's state, if any.
        self.state_parameter: str | None = None
        #: The parameter that receives ``[config.params]``, if any, and what it receives.
        self.params_parameter: str | None = None
        self.params: Mapping[str, Any] = read_only(params)
        fields: dict[str, Any] = {}
        from pydantic import Field

        for name, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.source}: *{name} parameters cannot be described to a model; "
                                "name every parameter")
            annotation = hints.get(name, Any)
            if _is_params(annotation):
                if self.params_parameter is not None:
                    raise TypeError(f"tool {self.source}: both {self.params_parameter!r} and {name!r} ask for "
                                    "[config.params]; keep one")
                self.params_parameter = name
                continue
            if _is_state(annotation) or (name == LEGACY_STATE_PARAMETER and _legacy_state(annotation, name in hints)):
                if self.state_parameter is not None:
                    raise TypeError(f"tool {self.source}: both {self.state_parameter!r} and {name!r} ask for the "
                                    "episode's state; keep one")
                if not _is_state(annotation):
                    import warnings

                    warnings.warn(f"tool {self.source}: a parameter named 'state' receives the episode's state only "
                                  f"for old bundles; annotate it State[...] (from envhub.runtime import State)",
                                  DeprecationWarning, stacklevel=3)
                self.state_parameter = name
                continue
            default = ... if param.default is param.empty else param.default
            fields[name] = (annotation, Field(default, description=param_docs.get(name) or None))
        from pydantic import ConfigDict, create_model

        # Lax (not strict) validation: a model that sends "3" for an int parameter gets it
        # converted, as a human caller would expect; extra arguments are refused.
        self._model = create_model(f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"),
                                   **fields)
        parameters = _strip_titles(self._model.model_json_schema())
        parameters.setdefault("properties", {})
        self.spec: dict[str, Any] = {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": parameters},
        }

    @property
    def takes_state(self) -> bool:
        """Whether the tool receives the episode's state."""
        return self.state_parameter is not None

    def _prepare(self, call: Mapping[str, Any]) -> tuple[str, dict[str, Any] | str]:
        """(call id, validated arguments) or (call id, an error text)."""
        call_id = str(call.get("id") or "")
        function = call.get("function") or {}
        raw = function.get("arguments")
        if raw is None or raw == "":
            arguments: Any = {}
        elif isinstance(raw, str):
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError as e:
                return call_id, f"Error: the arguments of {self.name} are not valid JSON ({e.msg} at position {e.pos})"
        else:
            arguments = raw
        if not isinstance(arguments, dict):
            return call_id, f"Error: the arguments of {self.name} must be a JSON object, got {type(arguments).__name__}"
        from pydantic import ValidationError

        try:
            validated = self._model.model_validate(arguments)
        except ValidationError as e:
            details = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
            return call_id, f"Error: invalid arguments for {self.name}: {details}"
        return call_id, {name: getattr(validated, name) for name in type(validated).model_fields}

    def _bind(self, call: Mapping[str, Any], state: Any) -> tuple[str, dict[str, Any]] | ToolCallResult:
        """(call id, keyword arguments, state included), or the error answer for a bad call."""
        call_id, prepared = self._prepare(call)
        if isinstance(prepared, str):
            return _error(call_id, self.name, prepared)
        if self.state_parameter is not None:
            prepared[self.state_parameter] = state
        if self.params_parameter is not None:
            prepared[self.params_parameter] = self.params
        return call_id, prepared


class ToolError(Exception):
    """What a tool raises to refuse the model's request (an unknown customer, an order that
    cannot be cancelled): the model is answered ``Error: <message>`` and the call counts as
    the model's mistake. Any other exception a tool raises counts as the environment's fault
    (a bug, a missing dependency), since envhub cannot tell it from one."""


def raised(call_id: str, name: str, e: Exception) -> ToolCallResult:
    """The answer to a call whose tool raised ``e``: the model's mistake for a
    :class:`ToolError`, the environment's fault for anything else."""
    if isinstance(e, ToolError):
        return _error(call_id, name, f"Error: {e}", fault="model")
    return _error(call_id, name, f"Error: {type(e).__name__}: {e}", fault="environment")


def tool_result(call_id: str, name: str, value: Any) -> ToolCallResult:
    """The answer to a call whose tool returned ``value``: text as is, anything else as
    JSON; a :class:`~envhub.runtime.Reply` gives its ``content`` so, and its reward and end."""
    reply = value if isinstance(value, Reply) else None
    if reply is not None:
        value = "" if reply.content is None else reply.content
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return ToolCallResult({"role": "tool", "tool_call_id": call_id, "name": name, "content": text}, reply=reply)


def _is_state(annotation: Any) -> bool:
    """Whether ``annotation`` is ``Annotated[..., EpisodeState]`` (``State[...]``)."""
    return _marked(annotation, EpisodeState)


def _is_params(annotation: Any) -> bool:
    """Whether ``annotation`` is ``Annotated[..., EnvParams]`` (``Params[...]``)."""
    return _marked(annotation, EnvParams)


def _marked(annotation: Any, marker: type) -> bool:
    if typing.get_origin(annotation) is not Annotated:
        return False
    return any(m is marker or isinstance(m, marker) for m in annotation.__metadata__)


def read_only(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``params`` as a read-only mapping (a copy of its top level), so no tool or episode
    changes what the next one receives."""
    return MappingProxyType(dict(params or {}))


def _legacy_state(annotation: Any, annotated: bool) -> bool:
    """Whether a parameter named ``state`` is the old way to ask for the episode's state:
    one no model could fill in (no annotation, ``Any``, a type a built-in state kind hands
    over, optionally ``| None``, or a type with no JSON schema). ``state: str``, a
    ``Literal``, an enum or a model is an ordinary argument."""
    if not annotated or annotation is Any:
        return True
    import sqlite3
    from pathlib import Path

    members = [a for a in typing.get_args(annotation) if a is not type(None)] \
        if typing.get_origin(annotation) in (typing.Union, _UnionType) else [annotation]
    if members and all(_is_state_type(a, (Path, sqlite3.Connection)) for a in members):
        return True
    from pydantic import TypeAdapter

    try:
        TypeAdapter(annotation).json_schema()
    except Exception:  # no JSON schema: no model could send it
        return True
    return False


def _is_state_type(annotation: Any, kinds: tuple[type, ...]) -> bool:
    if annotation is Any:
        return True
    if not isinstance(annotation, type):
        return False
    if issubclass(annotation, kinds):
        return True
    from envhub.sandbox import ShellWorkspace

    return issubclass(annotation, ShellWorkspace)


def _error(call_id: str, name: str, text: str,
           fault: Literal["model", "environment"] = "model") -> ToolCallResult:
    return ToolCallResult({"role": "tool", "tool_call_id": call_id, "name": name, "content": text}, error=text,
                          fault=fault)


def make_tool(fn: Callable[..., Any], *, source: str = "", params: Mapping[str, Any] | None = None) -> Tool:
    """A :class:`Tool` for ``fn``; a ``Params``-annotated parameter of it receives ``params``
    (the manifest's ``[config.params]``, bound once here, so a call costs nothing more).
    Raises :class:`TypeError` if ``fn`` cannot be described as a tool (``*args``, unreadable
    type hints, a type pydantic cannot express, two parameters asking for the params)."""
    return Tool(fn, source=source, params=params)


def unknown_tool(call: Mapping[str, Any], tools: Sequence[ToolLike]) -> ToolCallResult:
    """The answer to a call of a tool that does not exist (or has no name)."""
    call_id = str(call.get("id") or "")
    name = str((call.get("function") or {}).get("name") or "")
    available = ", ".join(t.name for t in tools) or "none"
    if not name:
        return _error(call_id, "", f"Error: the tool call has no function name; available tools: {available}")
    return _error(call_id, name, f"Error: unknown tool {name!r}; available tools: {available}")
