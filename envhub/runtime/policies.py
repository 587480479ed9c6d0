"""Policies: what chooses the assistant's next turn in an episode.

``make_policy(spec)`` builds one from its command-line form:

- ``reference``: replays the environment's reference solution (``env.reference_actions``);
- ``noop``: always answers with an empty message (the floor a verifier must not reward);
- ``openai:MODEL``: any OpenAI-compatible chat-completions endpoint, tools included;
- ``python:module:func`` or ``python:path/to/file.py:func``: a function of your own;
- ``NAME`` or ``NAME:ARGUMENT``: a policy an installed plugin provides.

Each of these is a :class:`~envhub.hookspecs.PolicyKind` registered through the plugin
hook ``envhub_policies``, the built-in ones by envhub's own plugin.

A policy is shared by every episode of a run, concurrently, so it keeps no per-episode state
of its own; :func:`track_usage` collects an episode's token usage without it, and, for a policy
made with ``record_tokens``, the token ids and log-probs of each of its turns.
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import importlib.util
import inspect
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from envhub.errors import PolicyError, UsageError
from envhub.runtime._chat import DEFAULT_BASE_URL, TOKEN_REQUEST_FIELDS, ChatClient, ChatResult
from envhub.runtime._types import Action, Observation, Task

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.settings import Settings

__all__ = [
    "NoopPolicy",
    "OpenAIPolicy",
    "Policy",
    "PolicyOptions",
    "PythonPolicy",
    "ReferencePolicy",
    "Usage",
    "make_policy",
    "openai_policy",
    "track_usage",
]


class Policy(ABC):
    """Chooses the assistant's next turn.

    ``name`` is recorded with every rollout (``"openai:gpt-4o-mini"``); ``model`` is the model
    behind the policy, if any (an llm-judge refuses to grade its own model's answers).
    """

    name: str = ""
    model: str | None = None

    @abstractmethod
    async def act(self, observation: Observation, task: Task, *, env: Any) -> Action:
        """The next assistant turn: its text, or an assistant message (with ``tool_calls``).

        Raises :class:`PolicyError` when the policy cannot answer (an endpoint that keeps
        failing, a function returning something that is not an action).
        """

    async def aclose(self) -> None:  # noqa: B027 - optional: a policy that holds nothing keeps this one
        """Release what the policy holds (connections). The policy is not used afterwards."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


# --- usage, per episode -----------------------------------------------------------------------


@dataclass
class Usage:
    """Requests, attempts, tokens and time spent by a policy within a :func:`track_usage` block.

    A policy that records tokens (``OpenAIPolicy(record_tokens=True)``) also fills
    ``turns_tokens``, one entry per completion it returned, in order (the rollout record's
    field of that name), and ``sampling``, the settings it sampled with; both stay None for
    policies that record none.
    """

    requests: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    turns_tokens: list[dict[str, Any]] | None = None
    sampling: dict[str, Any] | None = None

    def add(self, result: ChatResult) -> None:
        self.requests += 1
        self.attempts += result.attempts
        self.prompt_tokens += _int(result.usage.get("prompt_tokens"))
        self.completion_tokens += _int(result.usage.get("completion_tokens"))
        self.latency_s += result.latency_s

    def add_tokens(self, result: ChatResult, sampling: Mapping[str, Any]) -> None:
        """Keep ``result``'s tokens as the next turn's (None where the server sent none), and
        the ``sampling`` settings they were drawn with."""
        if self.turns_tokens is None:
            self.turns_tokens = []
        self.turns_tokens.append({"prompt_token_ids": result.prompt_token_ids,
                                  "completion_token_ids": result.completion_token_ids,
                                  "logprobs": result.logprobs, "finish_reason": result.finish_reason})
        self.sampling = dict(sampling)

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "attempts": self.attempts, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "latency_s": round(self.latency_s, 6)}


_usage: contextvars.ContextVar[Usage | None] = contextvars.ContextVar("envhub_policy_usage", default=None)


@contextmanager
def track_usage() -> Iterator[Usage]:
    """Collect the usage of the policy calls made inside the block (in this task: each asyncio
    task has its own context, so concurrent episodes each see only their own calls)."""
    usage = Usage()
    token = _usage.set(usage)
    try:
        yield usage
    finally:
        _usage.reset(token)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- reference and noop ------------------------------------------------------------------------


class ReferencePolicy(Policy):
    """Plays ``env.reference_actions(task)``, the assistant turns that solve the task: turn k
    of the episode gets the k-th of them; past the last, an empty message."""

    name = "reference"

    async def act(self, observation: Observation, task: Task, *, env: Any) -> Action:
        turn = sum(1 for m in observation.messages if m.get("role") == "assistant")
        actions = env.reference_actions(task)
        if turn >= len(actions):
            return ""
        action = actions[turn]
        # A copy: the episode appends it to its conversation, and the environment may cache its list.
        return dict(action) if isinstance(action, Mapping) else action


class NoopPolicy(Policy):
    """Always an empty assistant message: the floor below which no verifier should reward."""

    name = "noop"

    async def act(self, observation: Observation, task: Task, *, env: Any) -> Action:
        return ""


# --- openai:MODEL --------------------------------------------------------------------------------

_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop")


class OpenAIPolicy(Policy):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Each turn sends the conversation, the tools (omitted when there are none) and the sampling
    parameters given here, and returns the first choice's assistant message (``tool_calls``
    included). The request is retried on 429, 5xx and connection errors (see :class:`ChatClient`).

    With ``record_tokens``, each request also asks for the tokens behind the completion
    (:data:`~envhub.runtime._chat.TOKEN_REQUEST_FIELDS`: ``logprobs`` and ``return_token_ids``,
    which vLLM and SGLang answer), and the rollout record keeps them per turn
    (``turns_tokens``) with the sampling settings (``sampling``). Off by default: OpenAI's API
    refuses ``return_token_ids``.
    """

    model: str  # always has one

    def __init__(self, model: str, client: ChatClient, *, sampling: Mapping[str, Any] | None = None,
                 record_tokens: bool = False) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.client = client
        self.sampling = _sampling(sampling)
        self.record_tokens = record_tokens
        self._request = {**self.sampling, **TOKEN_REQUEST_FIELDS} if record_tokens else self.sampling
        #: What a record says the turns were sampled with (None: the endpoint's default).
        self._settings = {"model": model, **{k: self.sampling.get(k) for k in _SAMPLING_KEYS}}

    async def act(self, observation: Observation, task: Task, *, env: Any) -> Action:
        result = await self.client.complete(model=self.model, messages=observation.messages,
                                            tools=observation.tools or None, **self._request)
        usage = _usage.get()
        if usage is not None:
            usage.add(result)
            if self.record_tokens:
                usage.add_tokens(result, self._settings)
        return result.message

    async def aclose(self) -> None:
        await self.client.aclose()


def _sampling(sampling: Any) -> dict[str, Any]:
    """The sampling parameters to send: a mapping or a manifest ``Sampling`` model, with unset
    values (None, an empty ``stop``) left out so the endpoint's defaults apply."""
    if sampling is None:
        return {}
    if hasattr(sampling, "model_dump"):
        sampling = sampling.model_dump()
    return {k: v for k, v in dict(sampling).items() if v is not None and not (k == "stop" and not v)}


def _is_openai(base_url: str) -> bool:
    return (urlsplit(base_url).hostname or "").endswith("api.openai.com")


# --- python:module:func ---------------------------------------------------------------------------

_KNOWN_ARGUMENTS = ("tools", "task", "env", "observation")


class PythonPolicy(Policy):
    """A function of your own, sync or async, called once per assistant turn as

        func(messages, *, tools=..., task=..., env=..., observation=...)

    with only the keyword arguments its signature accepts (all of them if it takes
    ``**kwargs``). It returns the assistant's text or an assistant message dict (with
    ``tool_calls`` for tool-use). A sync function runs on the event loop: keep it fast, or make
    it ``async``. Give it a ``model`` attribute to declare the model behind it.
    """

    def __init__(self, func: Callable[..., Any], *, name: str) -> None:
        self.func = func
        self.name = name
        self.model = getattr(func, "model", None)
        self._is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None))  # noqa: B004 - an object whose __call__ is async
        self._kwargs = _accepted(func)

    async def act(self, observation: Observation, task: Task, *, env: Any) -> Action:
        available = {"tools": observation.tools, "task": task, "env": env, "observation": observation}
        kwargs = {k: available[k] for k in self._kwargs}
        result = self.func(observation.messages, **kwargs)
        if self._is_async or inspect.isawaitable(result):
            result = await result
        if isinstance(result, (str, dict)):
            return result
        if isinstance(result, Mapping):
            return dict(result)  # an action's message is a dict
        raise PolicyError(
            f"policy {self.name} returned {type(result).__name__}; a policy returns the assistant's "
            "text (str) or an assistant message (dict)",
        )


def _accepted(func: Callable[..., Any]) -> tuple[str, ...]:
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: messages only
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return _KNOWN_ARGUMENTS
    names = {p.name for p in parameters if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                        inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    return tuple(k for k in _KNOWN_ARGUMENTS if k in names)


def load_python_policy(target: str) -> PythonPolicy:
    """The policy of ``module:func`` or ``path/to/file.py:func`` (``func`` may be dotted).

    A module that is not importable is looked for in the current directory too, as
    ``python -m`` would. Raises :class:`PolicyError` naming the module and the cause when it
    cannot be imported or has no such callable.
    """
    module_part, sep, attr = target.rpartition(":")
    if not sep or not module_part or not attr:
        raise UsageError(f"python policy {target!r} is not module:func or path/to/file.py:func",
                         hint="e.g. --policy python:my_policies:answer or --policy python:policy.py:act")
    name = f"python:{target}"
    if module_part.endswith(".py") or "/" in module_part or "\\" in module_part:
        module = _import_file(Path(module_part))
    else:
        module = _import_module(module_part)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PolicyError(f"python policy {target!r}: module {module_part!r} has no attribute {attr!r}",
                              hint=f"check the function name after the last ':' in {name!r}") from None
    if not callable(obj):
        raise PolicyError(f"python policy {target!r}: {attr!r} is a {type(obj).__name__}, not a function")
    return PythonPolicy(obj, name=name)


def _import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        top = name.partition(".")[0]
        if e.name != top or str(Path.cwd()) in sys.path:
            raise _import_error(name, e) from e
    except Exception as e:  # the module itself is broken: report its error, not ours
        raise _import_error(name, e) from e
    # The ``envhub`` command does not put the working directory on sys.path; a policy module
    # beside the user is what they mean.
    sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except Exception as e:
        raise _import_error(name, e) from e
    finally:
        sys.path.remove(str(Path.cwd()))


def _import_file(path: Path) -> Any:
    path = path.expanduser().resolve()
    if not path.is_file():
        raise PolicyError(f"python policy file {str(path)!r} does not exist",
                          hint="give a path to a .py file, relative to the working directory")
    # A name unique to the path: two policy files called policy.py must not replace each other.
    module_name = f"_envhub_policy_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}_{path.stem}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PolicyError(f"python policy file {str(path)!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # before exec: dataclasses and pickling look the module up
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[module_name]
        raise _import_error(str(path), e) from e
    return module


def _import_error(module: str, e: BaseException) -> PolicyError:
    return PolicyError(f"python policy module {module!r} cannot be imported: {type(e).__name__}: {e}",
                       hint="check that the module is importable from the working directory or the active environment")


# --- make_policy ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PolicyOptions:
    """What a run gives the policy it makes (each policy uses what it needs): the settings
    (read from the environment by the caller), the endpoint and key of model policies, the
    sampling parameters, retries, timeout, connection pool, and whether to record the tokens
    behind each turn (``record_tokens``: policies that call an endpoint which can return them)."""

    settings: Settings
    base_url: str | None = None
    api_key: str | None = None
    sampling: Mapping[str, Any] | Any | None = None
    max_retries: int = 5
    timeout: float = 120.0
    max_connections: int = 256
    record_tokens: bool = False


def openai_policy(model: str, options: PolicyOptions) -> OpenAIPolicy:
    """``openai:MODEL``. The endpoint is ``options.base_url``, else ``OPENAI_BASE_URL``, else
    OpenAI's; the key ``options.api_key``, else ``OPENAI_API_KEY``. Raises PolicyError
    when OpenAI's own endpoint is named without a key."""
    settings = options.settings
    url = options.base_url or settings.openai_base_url or DEFAULT_BASE_URL
    key = options.api_key or settings.openai_api_key
    if not key and _is_openai(url):
        raise PolicyError(f"policy 'openai:{model}' needs an API key for {url}",
                          hint="set OPENAI_API_KEY, or pass --base-url for a local server that needs no key")
    client = ChatClient(url, key, timeout=options.timeout, max_retries=options.max_retries,
                        max_connections=options.max_connections)
    return OpenAIPolicy(model, client, sampling=options.sampling, record_tokens=options.record_tokens)


def make_policy(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    sampling: Mapping[str, Any] | Any | None = None,
    max_retries: int = 5,
    timeout: float = 120.0,
    max_connections: int = 256,
    record_tokens: bool = False,
    settings: Settings,
    plugins: PluginLookup,
) -> Policy:
    """The policy ``spec`` names: ``reference``, ``noop``, ``openai:MODEL``, ``python:module:func``,
    ``python:path/to/file.py:func``, or one an installed plugin provides (``NAME[:ARGUMENT]``),
    as ``plugins`` knows them.

    For ``openai:``, the endpoint is ``base_url``, else ``OPENAI_BASE_URL``, else OpenAI's;
    the key is ``api_key``, else ``OPENAI_API_KEY`` (both read through ``settings``).
    ``sampling`` (a mapping or the manifest's ``[config.sampling]``) is sent with every request.
    ``record_tokens`` asks the endpoint for each turn's token ids and log-probs and keeps them
    in the rollout record (``openai:``; see :class:`OpenAIPolicy`).

    Raises :class:`UsageError` for a spec of none of these forms,
    :class:`envhub.errors.PluginConflictError` for a name two plugins provide, and
    :class:`PolicyError` when OpenAI's endpoint is named without a key or a python policy
    cannot be imported.
    """
    name, sep, argument = spec.partition(":")
    kind = plugins.lookup("policies", name) if name else None
    if kind is None or kind.takes_argument != bool(argument) or (sep and not kind.takes_argument):
        forms = [form for n in _policy_order(plugins) for form in (plugins.lookup("policies", n).forms or (n,))]
        raise UsageError(f"unknown policy {spec!r}; a policy is one of: {', '.join(forms)}",
                         hint="e.g. --policy openai:gpt-4o-mini --base-url http://127.0.0.1:8000/v1")
    options = PolicyOptions(base_url=base_url, api_key=api_key, sampling=sampling, max_retries=max_retries,
                            timeout=timeout, max_connections=max_connections, record_tokens=record_tokens,
                            settings=settings)
    return kind.make(argument, options)  # type: ignore[no-any-return]


def _policy_order(plugins: PluginLookup) -> list[str]:
    """Built-in policies in the order they are documented, then plugins' by name."""
    builtin = plugins.builtin_names("policies")
    return builtin + [n for n in plugins.names("policies") if n not in builtin]
