"""Kinds that plugins provide: checking a manifest's open names against what is installed.

The built-in verifier kinds, harness protocols, state kinds and task formats have strict
models (``_models``), and a manifest that uses only them never asks the plugins anything.
Any other name (``[verifier] kind = "levenshtein"``, ``[state] kind = "postgres"``, a
criterion's kind, ``[tasks] generator = "NAME"``) passes the models, and is checked here
against the installed plugins: an unknown name is a problem naming the field, the name,
the installed ones and the plugin to install; a plugin verifier kind's options are
validated with the model the plugin gives, with the manifest's line numbers.

These checks read the raw TOML data, so they run (and report) even when the models found
other problems, as the models' own checks of the built-in names would.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from envhub.manifest._locate import locate
from envhub.manifest._models import HARNESS_PROTOCOLS, STATE_KINDS, TASK_FORMATS, VERIFIER_KINDS
from envhub.problems import Problem

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup

__all__ = ["OptionsModel", "plugin_problems"]

#: Keys of a rubric criterion that belong to the rubric, not to the criterion's kind.
CRITERION_KEYS = ("name", "weight", "required")


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class OptionsModel(BaseModel):
    """A base for a plugin verifier kind's options, with the manifest's own conventions:
    kebab-case keys (``max_distance`` is written ``max-distance``), unknown keys refused,
    TOML's types taken strictly, values frozen. Subclassing it is optional."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, alias_generator=_kebab,
                              populate_by_name=True, allow_inf_nan=False)


class _Check:
    def __init__(self, data: Mapping[str, Any], file: str, text: str, plugins: PluginLookup | None) -> None:
        self.data = data
        self.file = file
        self.text = text
        self._plugins = plugins


    def problem(self, loc: Sequence[str | int], field: str, message: str, hint: str | None = None,
                code: str = "unknown-kind") -> Problem:
        position = locate(self.text, loc)
        return Problem("error", code, message, file=self.file, line=position[0] if position else None,
                       column=position[1] if position else None, field=field, hint=hint)

    def lookup(self, hook: str, name: str, loc: Sequence[str | int], field: str) -> tuple[Any, Problem | None]:
        from envhub.errors import PluginError

        if self._plugins is None:  # built-in kinds only: the caller passed no plugins
            return None, None
        try:
            return self._plugins.lookup(hook, name), None
        except PluginError as e:  # two plugins provide it, or its package is broken
            return None, self.problem(loc, field, e.message, e.hint, code="plugin-conflict")

    def installed(self, hook: str, builtins: Sequence[str], exclude: Sequence[str] = ()) -> list[str]:
        extra = sorted(n for n in self._plugins.names(hook) if n not in builtins) if self._plugins is not None else []
        return [n for n in (*builtins, *extra) if n not in exclude]


def _table(data: Any, *keys: str) -> Mapping[str, Any]:
    for key in keys:
        data = data.get(key) if isinstance(data, Mapping) else None
    return data if isinstance(data, Mapping) else {}


def _hint(value: str, installed: Sequence[str], what: str) -> str:
    close = difflib.get_close_matches(value, installed, n=1, cutoff=0.6)
    mean = f"did you mean {close[0]!r}? " if close else ""
    return (f"{mean}installed {what}s: {', '.join(repr(n) for n in installed)}; "
            f"for another {what}, install the plugin that provides it")


def plugin_problems(data: Mapping[str, Any], *, file: str, text: str,
                    plugins: PluginLookup | None = None) -> list[Problem]:
    """Every problem with the names in ``data`` (a parsed manifest) that the built-in
    models leave to the plugins. Loads plugins only if such a name is used; with no
    ``plugins``, every such name is unknown."""
    check = _Check(data, file, text, plugins)
    return [*_open_name(check, ("tasks", "format"), TASK_FORMATS, "task_formats", "task format"),
            *_generator(check),
            *_protocol(check),
            *_open_name(check, ("state", "kind"), STATE_KINDS, "state_kinds", "state kind"),
            *_base(check),
            *_verifiers(check)]


def _open_name(check: _Check, loc: tuple[str, str], builtins: Sequence[str], hook: str,
               what: str) -> Iterator[Problem]:
    value = _table(check.data, loc[0]).get(loc[1])
    if not isinstance(value, str) or value in builtins:
        return
    field = ".".join(loc)
    found, conflict = check.lookup(hook, value, loc, field)
    if conflict is not None:
        yield conflict
    elif found is None:
        installed = check.installed(hook, builtins)
        # The message is the one the models gave before plugins could add names.
        yield check.problem(loc, field, f"{value!r} is not one of {', '.join(repr(n) for n in installed)}",
                            _hint(value, installed, what))


def _generator(check: _Check) -> Iterator[Problem]:
    value = _table(check.data, "tasks").get("generator")
    if not isinstance(value, str) or ":" in value:  # module:function is the bundle's own code
        return
    loc = ("tasks", "generator")
    found, conflict = check.lookup("task_generators", value, loc, "tasks.generator")
    if conflict is not None:
        yield conflict
    elif found is None:
        installed = check.installed("task_generators", ())
        hint = (_hint(value, installed, "task generator") if installed else
                "no installed plugin provides task generators; install the plugin that provides it, "
                "or name the bundle's own function as 'module:function'")
        yield check.problem(loc, "tasks.generator", f"unknown task generator {value!r}", hint)


def _base(check: _Check) -> Iterator[Problem]:
    """A ``scheme:reference`` base needs the plugin that runs workspaces of that scheme; an
    ``oci:`` one names an image by digest, and ``host`` takes no reference. (Checked with the
    fields, so an image without a digest is reported whether or not the plugin is installed.)"""
    from envhub.manifest._base import HOST_SCHEME, OCI_SCHEME, image_problem, split_base

    value = _table(check.data, "state").get("base")
    parts = split_base(value) if isinstance(value, str) else None
    if parts is None:
        return
    scheme, loc = parts[0], ("state", "base")
    if scheme == HOST_SCHEME:
        yield check.problem(loc, "state.base", f"base {value!r}: the host's system takes no reference",
                            "write base = 'host'", code="invalid-base")
        return
    if scheme == OCI_SCHEME:
        problem = image_problem(parts[1])
        if problem is not None:
            yield check.problem(loc, "state.base", *problem, code="invalid-image")
    found, conflict = check.lookup("workspace_backends", scheme, loc, "state.base")
    if conflict is not None:
        yield conflict
    elif found is None:
        installed = check.installed("workspace_backends", (HOST_SCHEME,), exclude=(HOST_SCHEME,))
        others = f"; installed plugins run {', '.join(repr(n + ':') for n in installed)}" if installed else ""
        hint = ("install envhub-containers (pip install envhub-containers), which runs them with podman or docker"
                if scheme == OCI_SCHEME else f"install the plugin that runs them{others}")
        yield check.problem(loc, "state.base", f"no installed plugin runs workspaces of base scheme {scheme!r}", hint)


def _protocol(check: _Check) -> Iterator[Problem]:
    harness = _table(check.data, "harness")
    value = harness.get("protocol")
    if not isinstance(value, str) or value in HARNESS_PROTOCOLS:
        return
    yield from _open_name(check, ("harness", "protocol"), HARNESS_PROTOCOLS, "harness_protocols", "harness protocol")
    found, _ = check.lookup("harness_protocols", value, ("harness", "protocol"), "harness.protocol")
    if found is not None and harness.get("tools") and not found.runs_tools:
        yield check.problem(("harness", "tools"), "harness.tools",
                            f"tools are only used by protocols that run them, and {value!r} does not",
                            "remove tools, or use protocol 'tool-use'", code="inconsistent")


def _verifiers(check: _Check) -> Iterator[Problem]:
    verifier = _table(check.data, "verifier")
    kind = verifier.get("kind")
    if kind == "rubric":
        criteria = verifier.get("criteria")
        for i, criterion in enumerate(criteria if isinstance(criteria, list) else []):
            if isinstance(criterion, Mapping):
                yield from _verifier(check, criterion, ("verifier", "criteria", i), in_rubric=True)
    else:
        yield from _verifier(check, verifier, ("verifier",), in_rubric=False)


def _verifier(check: _Check, table: Mapping[str, Any], loc: tuple[str | int, ...], *,
              in_rubric: bool) -> Iterator[Problem]:
    kind = table.get("kind")
    if not isinstance(kind, str) or kind in VERIFIER_KINDS:
        return  # the models check built-in kinds, a missing kind and a kind of the wrong type
    field = _field(loc)
    found, conflict = check.lookup("verifier_kinds", kind, loc, field)
    if conflict is not None:
        yield conflict
        return
    if found is None:
        installed = check.installed("verifier_kinds", VERIFIER_KINDS, exclude=("rubric",) if in_rubric else ())
        yield check.problem(loc, field, f"unknown verifier kind {kind!r}", _hint(kind, installed, "verifier kind"))
        return
    try:
        model = found.options_model()
    except Exception as e:
        yield check.problem(loc, field, f"the options model of verifier kind {kind!r} cannot be imported: "
                                        f"{type(e).__name__}: {e}", "this is a bug of the plugin that provides it",
                            code="plugin-broken")
        return
    if model is None:
        return
    options = {k: v for k, v in table.items() if k != "kind" and not (in_rubric and k in CRITERION_KEYS)}
    try:
        model.model_validate(options)
    except ValidationError as e:
        yield from _option_problems(check, e, options, loc, model, kind)


def _option_problems(check: _Check, error: ValidationError, options: Mapping[str, Any],
                     loc: tuple[str | int, ...], model: type[BaseModel], kind: str) -> Iterator[Problem]:
    from envhub.manifest._problems import _message, format_field

    allowed = [f.alias or name for name, f in model.model_fields.items()]
    for err in error.errors():
        where = (*loc, *err["loc"])
        message, hint = _message(err, check.data, where, False)
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1, cutoff=0.6)
            hint = (f"did you mean {close[0]!r}?" if close else
                    f"verifier kind {kind!r} takes: {', '.join(repr(a) for a in allowed) or 'no options'}")
        elif err["type"] == "missing":
            hint = f"add {err['loc'][-1]} = ... to {format_field(loc)}"
        position_loc = where if err["type"] != "missing" else loc
        yield check.problem(position_loc, format_field(where), message, hint, code=err["type"].replace("_", "-"))


def _field(loc: Sequence[str | int]) -> str:
    from envhub.manifest._problems import format_field

    return format_field(loc)
