"""Prompt templates: Jinja files of a bundle, rendered per task in a sandbox.

A bundle may declare its prompts as templates (``[harness] prompt-template`` and
``system-prompt-template``, an llm-judge's ``prompt-template``), so a chain-of-thought or
few-shot wrapper is written once instead of baked into every task. A template is not code: it
is compiled by :class:`jinja2.sandbox.ImmutableSandboxedEnvironment`, so it cannot reach
Python's internals (``__class__``, ``__globals__``, ``os``), cannot change the values it is
given, cannot read files (``include``, ``import`` and ``extends`` are refused when the
template is compiled, and the environment has no loader). ``*`` and ``**`` are bounded, so a
slip such as ``{{ "=" * 10**9 }}`` fails instead of exhausting memory; the sandbox does not
bound time or memory otherwise. A bundle that only has templates needs no trust.

The variables a template sees (spec/manifest.md section 10.1):

For a task's prompt and system prompt (:func:`task_variables`):

- every field of the task's row, by its name (``{{ question }}``);
- ``task``: the whole row, a mapping (``{{ task["field-with-dashes"] }}``);
- ``task_id`` and ``split``: the task's id and split;
- ``params``: the manifest's ``[config.params]`` table.

For an llm-judge's prompt, the same plus ``completion`` (the candidate's final text),
``messages`` (the whole trajectory, a list of chat messages) and ``rubric`` (the rubric
file's text, or envhub's default rubric).

The named variables win over a task field of the same name; the field stays readable as
``task["split"]``. Values are inserted as text and never rendered again: a task field holding
``{{ 7*7 }}`` is shown as ``{{ 7*7 }}``. An undefined variable is an error (``StrictUndefined``),
not an empty string, so a misspelt field cannot silently blank a prompt.

>>> template = PromptTemplate("Q: {{ question }}\\nThink step by step.", name="prompt.j2")
>>> template.render(**task_variables({"question": "2+2?"}, task_id="t1", split="dev"))
'Q: 2+2?\\nThink step by step.'
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from envhub.errors import EnvhubError

__all__ = [
    "JUDGE_VARIABLES",
    "TASK_VARIABLES",
    "PromptTemplate",
    "TemplateError",
    "task_variables",
]

#: The variables envhub passes to every task template, beside the task's own fields.
TASK_VARIABLES = ("task", "task_id", "split", "params")
#: What an llm-judge's template sees beside :data:`TASK_VARIABLES` and the task's fields.
JUDGE_VARIABLES = (*TASK_VARIABLES, "completion", "messages", "rubric")

#: Longest string or sequence a template may build with ``*`` (characters or items).
_MAX_REPEAT = 1_000_000
#: Largest exponent a template may raise a number to with ``**``.
_MAX_EXPONENT = 1_000

_SYNTAX_HINT = ("fix the Jinja syntax (https://jinja.palletsprojects.com/templates/); to show literal braces, "
                "write {{ '{{' }} or put the text inside {% raw %}...{% endraw %}")
_FILE_NODES = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)


class TemplateError(EnvhubError, ValueError):
    """A prompt template cannot be read, compiled or rendered.

    ``name`` is the template's file (relative to the bundle), ``line`` the line at fault when
    known, ``field`` the manifest field that names the template, when the caller said, and
    ``reason`` what is wrong, without the where (``message`` has both).
    """

    def __init__(self, message: str, *, name: str, line: int | None = None, field: str | None = None,
                 hint: str | None = None, reason: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.name = name
        self.line = line
        self.field = field
        self.reason = reason if reason is not None else message


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, with ``*`` and ``**`` bounded so a template cannot exhaust memory."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator_name: str, left: Any, right: Any) -> Any:
        if operator_name == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(count, int) \
                        and len(seq) * count > _MAX_REPEAT:
                    raise jinja2.exceptions.SecurityError(
                        f"repeating a sequence of {len(seq)} {count} times is over the limit of {_MAX_REPEAT:,}")
            return operator.mul(left, right)
        if operator_name == "**":
            if isinstance(right, (int, float)) and abs(right) > _MAX_EXPONENT:
                raise jinja2.exceptions.SecurityError(f"the exponent {right} is over the limit of {_MAX_EXPONENT}")
            return operator.pow(left, right)
        return super().call_binop(context, operator_name, left, right)


def _environment() -> _Sandbox:
    # No loader: {% include %} and friends have nothing to load from (and are refused at compile time).
    env = _Sandbox(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    del env.globals["lipsum"]  # placeholder text has no place in a prompt, and lipsum(n=10**6) is huge
    return env


class PromptTemplate:
    """A Jinja template compiled in envhub's sandbox.

    ``name`` is how messages name the template (its path in the bundle) and ``field`` the
    manifest field that declares it. Raises :class:`TemplateError` with the line and the fix
    when ``source`` is not valid Jinja or includes another file.
    """

    def __init__(self, source: str, *, name: str, field: str | None = None) -> None:
        self.name = name
        self.field = field
        self.source = source
        env = _environment()
        try:
            tree = env.parse(source, name=name)
            for node in tree.find_all(_FILE_NODES):
                reason = f"'{type(node).__name__.lower()}' is not allowed; a prompt template cannot read other files"
                raise TemplateError(self._where(f"line {node.lineno}: {reason}"), name=name, line=node.lineno,
                                    field=field, reason=reason,
                                    hint="put the text in this template, or in a task field the template reads")
            self._template = env.from_string(tree)
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(self._where(f"line {e.lineno}: {e.message}"), name=name, line=e.lineno,
                                field=field, hint=_SYNTAX_HINT, reason=e.message or "invalid syntax") from e

    @classmethod
    def from_file(cls, root: str | Path, relative: str, *, what: str | None = None) -> PromptTemplate:
        """Compile the template at ``relative`` under the bundle ``root``; ``what`` is the
        manifest field naming it (``"harness.prompt-template"``), for messages.

        Raises :class:`TemplateError` when the file is missing, outside the bundle, not UTF-8
        text, or not valid Jinja (naming the file, the line and the fix).
        """
        base = Path(root).resolve()
        path = (base / relative).resolve()
        label = f"{what} {relative!r}" if what else f"template {relative!r}"
        if not path.is_relative_to(base):
            raise TemplateError(f"{label} is outside the bundle", name=relative, field=what,
                                hint="name a file inside the bundle, relative to envhub.toml")
        try:
            source = path.read_text(encoding="utf-8")
        except FileNotFoundError as e:
            raise TemplateError(f"{label} not found", name=relative, field=what,
                                hint="create it, or fix the path (relative to envhub.toml)") from e
        except (OSError, UnicodeDecodeError) as e:
            raise TemplateError(f"{label} cannot be read: {e}", name=relative, field=what,
                                hint="a template is a UTF-8 text file in the bundle") from e
        return cls(source, name=relative, field=what)

    def render(self, **variables: Any) -> str:
        """The template's text with ``variables`` filled in.

        Raises :class:`TemplateError` naming the template when it reads a variable it was not
        given, breaks the sandbox's rules, or fails otherwise (``{{ 1/0 }}``); never a bare
        Jinja or Python exception.
        """
        try:
            return self._template.render(**variables)
        except jinja2.UndefinedError as e:
            line = _line(e)
            given = ", ".join(sorted(variables)) or "none"
            raise TemplateError(self._where(f"{_at(line)}{e.message}"), name=self.name, line=line, field=self.field,
                                hint=f"the variables are: {given}; a task field the task may lack can be read "
                                     "as task.get('name')") from e
        except jinja2.exceptions.SecurityError as e:
            line = _line(e)
            raise TemplateError(self._where(f"{_at(line)}not allowed in a prompt template: {e}"), name=self.name,
                                line=line, field=self.field,
                                hint="a template may read its variables and use Jinja's filters and tests; "
                                     "it cannot reach Python's internals or change its values") from e
        except Exception as e:  # noqa: BLE001 - whatever a template expression raises is the template's fault
            line = _line(e)
            raise TemplateError(self._where(f"{_at(line)}{type(e).__name__}: {e}"), name=self.name, line=line,
                                field=self.field, hint="fix the template's expression") from e

    def _where(self, what: str) -> str:
        return f"{self.field} {self.name!r}, {what}" if self.field else f"template {self.name!r}, {what}"

    def __repr__(self) -> str:
        return f"PromptTemplate(name={self.name!r})"


def task_variables(row: Mapping[str, Any], *, task_id: str, split: str,
                   params: Mapping[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    """The variables of a task's templates: each field of ``row`` by name, then ``task`` (the
    row), ``task_id``, ``split`` and ``params`` (which win over fields of the same name), then
    ``more`` (an llm-judge's ``completion``, ``messages``, ``rubric``)."""
    return {**row, "task": row, "task_id": task_id, "split": split, "params": dict(params or {}), **more}


def _line(error: BaseException) -> int | None:
    """The template line an error was raised at: Jinja rewrites the traceback so the
    template's own frames carry the template's line numbers."""
    line = getattr(error, "lineno", None)
    if isinstance(line, int):
        return line
    traceback = error.__traceback__
    found = None
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == "<template>" or \
                traceback.tb_frame.f_globals.get("__jinja_template__") is not None:
            found = traceback.tb_lineno
        traceback = traceback.tb_next
    return found


def _at(line: int | None) -> str:
    return f"line {line}: " if line is not None else ""
