"""Tools from specs: a JSON-Schema tool declaration (``[[harness.spec-tools]]``) bound to a handler.

The spec is one OpenAI tool object, ``{"type": "function", "function": {name, description,
parameters}}``, or its bare function object. The model is offered the spec as written; a
call's arguments are validated against ``parameters`` with :mod:`jsonschema` (Draft 2020-12)
and passed to the handler as keywords. A handler parameter annotated ``State[T]`` receives
the episode's state and one annotated ``Params[T]`` the manifest's ``[config.params]``
(read-only); neither is in the schema.

>>> def add(a: int, b: int) -> int:
...     return a + b
>>> tool = make_spec_tool({"name": "add", "parameters": {"type": "object", "properties": {
...     "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}, add, source="add.json")
>>> tool.call({"id": "1", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}).message["content"]
'5'
>>> tool.call({"id": "2", "function": {"name": "add", "arguments": '{"a": 2, "b": "3"}'}}).error
"Error: invalid arguments for add: at $.b: '3' is not of type 'integer'"

What goes wrong in a call comes back to the model as the tool's output, as for
:class:`~envhub.runtime._tools.Tool`: arguments that are not JSON, do not fit the schema or
nest deeper than :data:`MAX_DEPTH` are the model's fault; the handler raising is the
environment's.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.runtime._tools import FunctionCalls, ToolCallResult, _error, _is_params, _is_state, read_only

if TYPE_CHECKING:
    from envhub.manifest import SpecTool as SpecToolEntry

__all__ = ["MAX_DEPTH", "SpecTool", "load_spec_tools", "make_spec_tool"]

#: Deepest nesting of a call's arguments (objects and arrays) that is validated; deeper is
#: refused before validation, so a hostile call cannot exhaust the stack.
MAX_DEPTH = 64
#: Errors named in one answer to the model; the rest are counted.
_ERRORS_SHOWN = 5
#: OpenAI's rule for a function name.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class SpecTool(FunctionCalls):
    """A tool declared by a JSON-Schema spec and run by a handler: the interface of
    :class:`~envhub.runtime._tools.Tool` (``name``, ``spec``, ``call``, ``acall``,
    ``takes_state``). Make one with :func:`make_spec_tool`."""

    def __init__(self, spec: Mapping[str, Any], handler: Callable[..., Any], *, source: str,
                 params: Mapping[str, Any] | None = None) -> None:
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
        from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

        self.source = source
        function = _function(spec, source)
        self.name: str = function["name"]
        parameters = function.get("parameters")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        if not isinstance(parameters, Mapping):
            raise ValueError(f"spec tool {source}: 'parameters' must be a JSON Schema object, "
                             f"got {type(parameters).__name__}")
        try:
            Draft202012Validator.check_schema(parameters)
        except SchemaError as e:
            where = "/".join(map(str, e.absolute_path)) or "(the top)"
            raise ValueError(f"spec tool {source}: 'parameters' is not a valid JSON Schema (Draft 2020-12) "
                             f"at {where}: {e.message}") from None
        if parameters.get("type", "object") != "object":
            raise ValueError(f"spec tool {source}: 'parameters' must describe an object (type: object), "
                             f"got type {parameters.get('type')!r}")
        self._validator = Draft202012Validator(parameters)
        self.spec: dict[str, Any] = {"type": "function", "function": {
            "name": self.name, "description": function.get("description") or "", "parameters": dict(parameters)}}
        self.fn = handler
        self.is_async = inspect.iscoroutinefunction(handler)
        self.state_parameter, self.params_parameter, self._var_keyword = _bind_handler(
            handler, parameters, self.name, source)
        self.params: Mapping[str, Any] = read_only(params)
        self._accepted = frozenset(parameters.get("properties") or {})

    @property
    def takes_state(self) -> bool:
        """Whether the handler receives the episode's state."""
        return self.state_parameter is not None

    def _bind(self, call: Mapping[str, Any], state: Any) -> tuple[str, dict[str, Any]] | ToolCallResult:
        """(call id, the handler's keywords), or the error answer for a bad call."""
        call_id = str(call.get("id") or "")
        raw = (call.get("function") or {}).get("arguments")
        if raw is None or raw == "":
            arguments: Any = {}
        elif isinstance(raw, str):
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError as e:
                return _error(call_id, self.name,
                              f"Error: the arguments of {self.name} are not valid JSON ({e.msg} at position {e.pos})")
            except RecursionError:
                return _error(call_id, self.name, f"Error: the arguments of {self.name} nest too deeply "
                                                  f"(at most {MAX_DEPTH} levels)")
        else:
            arguments = raw
        if not isinstance(arguments, dict):
            return _error(call_id, self.name,
                          f"Error: the arguments of {self.name} must be a JSON object, got {type(arguments).__name__}")
        if _depth(arguments) > MAX_DEPTH:
            return _error(call_id, self.name,
                          f"Error: the arguments of {self.name} nest deeper than {MAX_DEPTH} levels")
        errors = sorted(self._validator.iter_errors(arguments),
                        key=lambda e: (list(map(str, e.absolute_path)), e.message))
        if errors:
            shown = "; ".join(f"at {e.json_path}: {_short(e.message)}" for e in errors[:_ERRORS_SHOWN])
            more = f" (and {len(errors) - _ERRORS_SHOWN} more)" if len(errors) > _ERRORS_SHOWN else ""
            return _error(call_id, self.name, f"Error: invalid arguments for {self.name}: {shown}{more}")
        kwargs = dict(arguments)
        unknown = sorted(set(kwargs) - self._accepted) if not self._var_keyword else []
        if unknown:
            # The schema allows properties it does not name; the handler cannot take them.
            return _error(call_id, self.name, f"Error: invalid arguments for {self.name}: "
                                              f"unexpected {', '.join(map(repr, unknown))}; "
                                              f"it takes {', '.join(sorted(self._accepted)) or 'no arguments'}")
        if self.state_parameter is not None:
            kwargs[self.state_parameter] = state
        if self.params_parameter is not None:
            kwargs[self.params_parameter] = self.params
        return call_id, kwargs

    def __repr__(self) -> str:
        return f"<SpecTool {self.name} from {self.source}>"


def _function(spec: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    """The function object of ``spec`` (an OpenAI tool object or the function itself)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"spec tool {source}: the spec must be a JSON object, got {type(spec).__name__}")
    if "function" in spec or spec.get("type") == "function":
        if spec.get("type", "function") != "function":
            raise ValueError(f"spec tool {source}: 'type' must be \"function\", got {spec.get('type')!r}")
        function = spec.get("function")
        if not isinstance(function, Mapping):
            raise ValueError(f"spec tool {source}: 'function' must be an object with name, description "
                             "and parameters")
    else:
        function = spec
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"spec tool {source}: 'name' must be 1 to 64 letters, digits, '_' or '-', got {name!r}")
    description = function.get("description")
    if description is not None and not isinstance(description, str):
        raise ValueError(f"spec tool {source}: 'description' must be a string")
    return function


def _bind_handler(handler: Callable[..., Any], parameters: Mapping[str, Any], name: str,
                  source: str) -> tuple[str | None, str | None, bool]:
    """(state parameter, params parameter, takes **kwargs) of ``handler``. Raises
    :class:`TypeError` when it cannot take every property of the schema, or needs a
    parameter no call could fill."""
    try:
        signature = inspect.signature(handler)
        hints = typing.get_type_hints(handler, include_extras=True)
    except Exception as e:  # a builtin without a signature, a hint naming an unimported type
        raise TypeError(f"spec tool {source}: cannot read the signature of its handler: {e}") from e
    state = params = None
    var_keyword = False
    plain: dict[str, inspect.Parameter] = {}
    for pname, p in signature.parameters.items():
        annotation = hints.get(pname)
        if p.kind is p.VAR_KEYWORD:
            var_keyword = True
        elif p.kind is p.VAR_POSITIONAL:
            continue
        elif _is_state(annotation):
            state = pname
        elif _is_params(annotation):
            params = pname
        elif p.kind is p.POSITIONAL_ONLY:
            if p.default is p.empty:
                raise TypeError(f"spec tool {source}: handler parameter {pname!r} is positional-only; "
                                "arguments are passed as keywords")
        else:
            plain[pname] = p
    properties = set(parameters.get("properties") or {})
    problems = []
    missing = sorted(properties - set(plain))
    if missing and not var_keyword:
        problems.append(f"takes no parameter for the schema's {', '.join(map(repr, missing))} (and no **kwargs)")
    required = set(parameters.get("required") or ())
    unfilled = sorted(n for n, p in plain.items() if p.default is p.empty and n not in required)
    if unfilled:
        problems.append(f"requires {', '.join(map(repr, unfilled))}, which the schema does not list as required "
                        "(give it a default, or add it to 'required')")
    if problems:
        raise TypeError(f"spec tool {source}: its handler for {name!r} " + "; ".join(problems))
    return state, params, var_keyword


def _short(text: str, limit: int = 200) -> str:
    """A validation message cut to ``limit`` characters (it quotes the offending value)."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _depth(value: Any) -> int:
    """How deeply ``value``'s objects and arrays nest (iteratively: no recursion to exhaust)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def make_spec_tool(spec: Mapping[str, Any], handler: Callable[..., Any], *, source: str,
                   params: Mapping[str, Any] | None = None) -> SpecTool:
    """A :class:`SpecTool` for ``spec`` run by ``handler``; ``params`` go to a handler
    parameter annotated ``Params[T]``. ``source`` names the spec in errors.

    Raises :class:`ValueError` for a spec that is not a tool (no valid name, ``parameters``
    not a valid Draft 2020-12 schema of an object) and :class:`TypeError` for a handler that
    cannot take the schema's properties (no parameter of that name and no ``**kwargs``) or
    requires one the schema does not."""
    return SpecTool(spec, handler, source=source, params=params)


def load_spec_tools(specs: Sequence[SpecToolEntry], root: Path, load_entry_point: Callable[[str], Any], *,
                    params: Mapping[str, Any] | None = None) -> list[SpecTool]:
    """The tools of ``[[harness.spec-tools]]`` of the bundle at ``root``: each spec file read
    and checked, each handler loaded with ``load_entry_point`` and checked against it.

    Raises :class:`envhub.errors.BundleError` listing every spec that cannot make a tool
    (unreadable, not JSON, not a tool, an invalid schema, a handler that does not fit, two
    tools of one name), each naming its file and ``harness.spec-tools[i]``; and whatever
    ``load_entry_point`` raises (:class:`envhub.errors.TrustError`).
    """
    from envhub.errors import BundleError
    from envhub.problems import Problem

    tools: list[SpecTool] = []
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(specs):
        field = f"harness.spec-tools[{i}]"
        try:
            spec = json.loads((root / entry.spec).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            problems.append(Problem("error", "spec-tool-unreadable", f"cannot read the tool spec: {e}", entry.spec,
                                    field=f"{field}.spec", hint="the spec is a UTF-8 JSON file in the bundle"))
            continue
        except json.JSONDecodeError as e:
            problems.append(Problem("error", "spec-tool-json", f"not JSON: {e.msg}", entry.spec, e.lineno, e.colno,
                                    field=f"{field}.spec"))
            continue
        handler = load_entry_point(entry.handler)
        if not callable(handler):
            problems.append(Problem("error", "spec-tool-handler", f"handler {entry.handler!r} is a "
                                    f"{type(handler).__name__}, not a function", entry.spec, field=f"{field}.handler"))
            continue
        try:
            tool = make_spec_tool(spec, handler, source=entry.spec, params=params)
        except ValueError as e:
            problems.append(Problem("error", "spec-tool-spec", str(e), entry.spec, field=f"{field}.spec",
                                    hint="an OpenAI tool: {\"type\": \"function\", \"function\": {\"name\", "
                                         "\"description\", \"parameters\": <a JSON Schema of an object>}}"))
            continue
        except TypeError as e:
            problems.append(Problem("error", "spec-tool-handler", f"{e} ({entry.handler})", entry.spec,
                                    field=f"{field}.handler",
                                    hint="name a handler parameter after each property, or take **kwargs"))
            continue
        if tool.name in seen:
            problems.append(Problem("error", "spec-tool-duplicate", f"tool {tool.name!r} is declared twice (also by "
                                    f"harness.spec-tools[{seen[tool.name]}])", entry.spec, field=f"{field}.spec"))
            continue
        seen[tool.name] = i
        tools.append(tool)
    if problems:
        raise BundleError(f"{len(problems)} of the harness's spec-tools cannot be used", problems)
    return tools
