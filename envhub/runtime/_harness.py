"""The harness, H of E = <T, H, V, S, C>: what the model sees and what answers its turns.

A :class:`Harness` is built once per environment from the manifest's ``[harness]`` table
and the bundle's code: the system prompt and prompt templates, the tools, the responder,
the context strategy and the turn limit. :meth:`Harness.start` gives one task's view of it
(:class:`TaskHarness`: its starting messages, the tools it may use, its turn limit), which
a task row may narrow by the fields ``[harness.task-fields]`` declares. An
:class:`~envhub.runtime.Episode` asks the harness and never reads the environment's
internals.

The three built-in protocols are the three subclasses at the end of this module. A
plugin's protocol is a subclass too, registered through the ``envhub_harness_protocols``
hook (:class:`envhub.plugin.HarnessProtocol` ``harness=``): it may change what the model
sees (:meth:`Harness.start`, :meth:`Harness.observe`), whether tool calls run
(:attr:`Harness.runs_tools`), the turn limit (:attr:`Harness.fixed_turns`), and what
answers a turn without tool calls (:meth:`Harness.respond`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from envhub.errors import TaskDataError
from envhub.runtime._tools import ToolLike
from envhub.runtime._types import Message, Observation, Reply, Task

if TYPE_CHECKING:
    from envhub._templates import PromptTemplate
    from envhub.manifest import HarnessSection

__all__ = ["DEFAULT_MAX_TURNS", "Harness", "HarnessSetup", "MultiTurnHarness", "SingleTurnHarness", "TaskHarness",
           "ToolUseHarness", "as_reply"]

#: ``max-turns`` of multi-turn and tool-use episodes when the manifest leaves it out.
DEFAULT_MAX_TURNS = 10


@dataclass(frozen=True)
class HarnessSetup:
    """What a harness is built from: the manifest's ``[harness]`` table and the parts of
    the bundle it names, already loaded."""

    section: HarnessSection
    #: The bundle's root (template files resolve here).
    root: Path
    #: The manifest's ``[tasks] prompt-field``.
    prompt_field: str = "prompt"
    #: Every tool offered, in order: built-in tools, then the bundle's.
    tools: Sequence[ToolLike] = ()
    #: The bundle's responder, loaded; None when the manifest names none.
    responder: Callable[..., Any] | None = None
    #: ``[config.params]``: given to the responder and the templates.
    params: Mapping[str, Any] = field(default_factory=dict)
    #: The object a legacy protocol's ``respond(env, task, messages, state)`` is called with.
    owner: Any = None


class TaskHarness(NamedTuple):
    """One task's harness: the messages its episode starts with (a list made for that
    episode, which it goes on to extend), the tools it may call (by name, and as the specs
    shown to the model) and its turn limit. (A named tuple: one is made per episode, and a
    frozen dataclass costs several times as much to make.)"""

    messages: list[Message]
    tools: Mapping[str, ToolLike]
    tool_specs: list[dict[str, Any]]
    max_turns: int


class Harness:
    """The base of every protocol. Subclasses set :attr:`runs_tools` and
    :attr:`fixed_turns`, and may override :meth:`start`, :meth:`respond` and
    :meth:`observe`."""

    #: Whether the assistant's tool calls are run (their results answered as tool messages,
    #: and the episode goes on after such a turn).
    runs_tools: ClassVar[bool] = False
    #: A fixed number of model turns (``single-turn``: 1); None: ``max-turns`` (default 10).
    fixed_turns: ClassVar[int | None] = None

    def __init__(self, setup: HarnessSetup) -> None:
        section = setup.section
        self.setup = setup
        self.section = section
        self.tools: list[ToolLike] = list(setup.tools)
        self.tools_by_name: dict[str, ToolLike] = {tool.name: tool for tool in self.tools}
        self.tool_specs: list[dict[str, Any]] = [tool.spec for tool in self.tools]
        self.max_turns: int = self.fixed_turns or section.max_turns or DEFAULT_MAX_TURNS
        self.responder = setup.responder
        self._responder_takes = _keywords(setup.responder, ("state", "params"))
        self._system: Message | None = None
        if section.system_prompt:
            text = (setup.root / section.system_prompt).read_text(encoding="utf-8")
            self._system = {"role": "system", "content": text}
        self._system_template = _template(setup.root, section.system_prompt_template, "harness.system-prompt-template")
        self._prompt_template = _template(setup.root, section.prompt_template, "harness.prompt-template")
        fields = section.task_fields
        #: Whether every task gets the manifest's harness as it is (no task field, no template):
        #: then :meth:`start` takes its short path, which most environments do.
        self._plain = (fields.tools is None and fields.system_prompt is None and fields.messages is None
                       and fields.max_turns is None and self._system_template is None
                       and self._prompt_template is None)
        #: ``keep-turns`` when the model sees only the recent turns; else None.
        self.keep_turns: int | None = section.keep_turns if section.context == "recent-turns" else None

    # -- what a task's episode starts with -----------------------------------------------

    def start(self, task: Task) -> TaskHarness:
        """``task``'s harness: the manifest's, narrowed by the task's own fields
        (``[harness.task-fields]``). Raises :class:`~envhub.errors.TaskDataError` naming the
        task and the field when a task's field is not what the spec says it holds."""
        if self._plain:
            prompt = task.data.get(self.setup.prompt_field, task.prompt)
            # The system message is shared by every episode, as the task's row is: neither is changed.
            messages: list[Message] = [self._system] if self._system is not None else []
            if isinstance(prompt, str):
                messages.append({"role": "user", "content": prompt})
                return TaskHarness(messages, self.tools_by_name, self.tool_specs, self.max_turns)
        fields = self.section.task_fields
        tools, specs = self.tools_by_name, self.tool_specs
        if fields.tools is not None and task.data.get(fields.tools) is not None:
            tools = self._narrowed(task, fields.tools)
            specs = [tool.spec for tool in tools.values()]
        max_turns = self.max_turns
        if fields.max_turns is not None and task.data.get(fields.max_turns) is not None:
            max_turns = _task_turns(task, fields.max_turns)
        return TaskHarness(self.initial_messages(task), tools, specs, max_turns)

    def initial_messages(self, task: Task) -> list[Message]:
        """The system prompt (the task's own, the rendered template, or the file's), then
        the task's own starting messages, or its prompt (rendered by ``prompt-template``
        when there is one)."""
        fields = self.section.task_fields
        system = self._system_message(task)
        messages: list[Message] = [system] if system is not None else []
        own = task.data.get(fields.messages) if fields.messages is not None else None
        if own is not None:
            chat = _task_messages(task, fields.messages or "")
            if chat and chat[0].get("role") == "system":
                messages = []
            messages.extend(chat)
            return messages
        if self._prompt_template is not None:
            messages.append({"role": "user", "content": self._render(self._prompt_template, task)})
            return messages
        prompt = task.data.get(self.setup.prompt_field, task.prompt)
        if isinstance(prompt, list):  # a chat-format prompt
            messages.extend(dict(m) for m in prompt)
        else:
            messages.append({"role": "user", "content": prompt if isinstance(prompt, str) else str(prompt)})
        return messages

    def _system_message(self, task: Task) -> Message | None:
        field_name = self.section.task_fields.system_prompt
        own = task.data.get(field_name) if field_name is not None else None
        if own is not None:
            if not isinstance(own, str):
                raise TaskDataError(f"task {task.id!r}: field {field_name!r} (harness.task-fields.system-prompt) "
                                  f"holds a {type(own).__name__}, not the system prompt's text",
                                  hint="make it a string, or remove it to use the manifest's system prompt")
            return {"role": "system", "content": own}
        if self._system_template is not None:
            return {"role": "system", "content": self._render(self._system_template, task)}
        return dict(self._system) if self._system is not None else None

    def _render(self, template: PromptTemplate, task: Task) -> str:
        """``template`` rendered over ``task`` (spec 10.1). A render error is a
        :class:`~envhub._templates.TemplateError` (an envhub error: the episode fails as the
        environment's, and the run goes on)."""
        from envhub._templates import task_variables

        return template.render(**task_variables(task.data, task_id=task.id, split=task.split,
                                                params=self.setup.params))

    def _narrowed(self, task: Task, field_name: str) -> dict[str, ToolLike]:
        names = task.data[field_name]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise TaskDataError(f"task {task.id!r}: field {field_name!r} (harness.task-fields.tools) must be a list "
                              f"of tool names, got {names!r}")
        unknown = [n for n in names if n not in self.tools_by_name]
        if unknown:
            raise TaskDataError(f"task {task.id!r}: field {field_name!r} names tools the harness does not have: "
                              f"{', '.join(map(repr, unknown))}",
                              hint=f"the tools are {', '.join(self.tools_by_name) or 'none'}")
        return {name: self.tools_by_name[name] for name in names}

    # -- what answers a turn without tool calls ------------------------------------------

    @property
    def responds(self) -> bool:
        """Whether a turn without tool calls is answered (by :meth:`respond`) rather than
        ending the episode."""
        return self.responder is not None

    def respond(self, task: Task, messages: list[Message], state: Any) -> Any:
        """The environment's answer to a turn without tool calls: a string (the next user
        message), a :class:`~envhub.runtime.Reply`, None (the episode ends), or an awaitable
        of one of those. The default calls the bundle's responder with ``task`` and
        ``messages``, and ``state`` and ``params`` when its signature takes them."""
        respond = self.responder
        if respond is None:
            return None
        kwargs: dict[str, Any] = {}
        if "state" in self._responder_takes:
            kwargs["state"] = state
        if "params" in self._responder_takes:
            kwargs["params"] = self.setup.params
        return respond(task, messages, **kwargs)

    # -- what the model sees -------------------------------------------------------------

    def observe(self, messages: list[Message], prompt_len: int, tool_specs: list[dict[str, Any]]) -> Observation:
        """What the model sees now: all messages, or (``context = "recent-turns"``) the
        starting messages plus the last ``keep-turns`` turns."""
        if self.keep_turns is not None:
            return Observation(_recent(messages, prompt_len, self.keep_turns), tool_specs)
        return Observation(list(messages), tool_specs)


class SingleTurnHarness(Harness):
    """``single-turn``: one model turn, then scoring."""

    fixed_turns = 1

    @property
    def responds(self) -> bool:
        return False


class MultiTurnHarness(Harness):
    """``multi-turn``: the bundle's responder answers each turn, or ends the episode."""


class ToolUseHarness(Harness):
    """``tool-use``: the model's tool calls run until a turn makes none; that turn goes to
    the responder when the harness has one (a simulated user), and otherwise ends the
    episode."""

    runs_tools = True


class ProtocolHarness(Harness):
    """A plugin's protocol declared the older way, by ``runs_tools``, ``respond(env, task,
    messages, state)`` and ``max_turns`` on its :class:`~envhub.plugin.HarnessProtocol`:
    :meth:`of` makes the subclass that has them."""

    _legacy_respond: ClassVar[Callable[..., Any] | None] = None

    @classmethod
    def of(cls, *, runs_tools: bool, respond: Callable[..., Any] | None, max_turns: int | None) -> type[Harness]:
        """The harness class of a protocol declared by these three."""
        return type("ProtocolHarness", (cls,), {"runs_tools": runs_tools, "fixed_turns": max_turns,
                                                "_legacy_respond": staticmethod(respond) if respond else None})

    @property
    def responds(self) -> bool:
        return self._legacy_respond is not None

    def respond(self, task: Task, messages: list[Message], state: Any) -> Any:
        respond = self._legacy_respond
        assert respond is not None
        return respond(self.setup.owner, task, messages, state)


def as_reply(value: Any, *, who: str) -> Reply | None:
    """A responder's answer as a :class:`Reply` (None: it ended the episode). Raises
    :class:`TypeError` naming ``who`` for anything but a string, a Reply or None."""
    if value is None or isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(value)
    raise TypeError(f"{who} returned {type(value).__name__}, not a string, a Reply or None")


def _keywords(fn: Callable[..., Any] | None, names: tuple[str, ...]) -> frozenset[str]:
    """Which of ``names`` ``fn`` takes as keywords."""
    if fn is None:
        return frozenset()
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return frozenset(names)
    positional_only = inspect.Parameter.POSITIONAL_ONLY
    return frozenset(n for n in names if n in parameters and parameters[n].kind is not positional_only)


def _template(root: Path, relative: str | None, field_name: str) -> PromptTemplate | None:
    if relative is None:
        return None
    from envhub._templates import PromptTemplate

    return PromptTemplate.from_file(root, relative, what=field_name)


def _task_turns(task: Task, field_name: str) -> int:
    value = task.data[field_name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TaskDataError(f"task {task.id!r}: field {field_name!r} (harness.task-fields.max-turns) must be an "
                          f"integer >= 1, got {value!r}")
    return value


def _task_messages(task: Task, field_name: str) -> list[Message]:
    value = task.data[field_name]
    if not isinstance(value, list) or not all(isinstance(m, Mapping) and isinstance(m.get("role"), str)
                                              for m in value) or not value:
        raise TaskDataError(f"task {task.id!r}: field {field_name!r} (harness.task-fields.messages) must be a "
                          "non-empty list of chat messages ({'role': ..., 'content': ...})")
    return [dict(m) for m in value]


def _recent(messages: list[Message], prompt_len: int, keep_turns: int) -> list[Message]:
    """The prompt messages plus the last ``keep_turns`` turns (a turn starts at an
    assistant message; tool results stay with the call that asked for them)."""
    starts = [i for i in range(prompt_len, len(messages)) if messages[i].get("role") == "assistant"]
    if len(starts) <= keep_turns:
        return list(messages)
    cut = starts[-keep_turns]
    # The environment's reply to the turn before the cut is kept: it is what the kept turns answer.
    while cut > prompt_len and messages[cut - 1].get("role") == "user":
        cut -= 1
    return messages[:prompt_len] + messages[cut:]
