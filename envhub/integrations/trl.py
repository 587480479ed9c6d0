"""An envhub environment as TRL's ``GRPOTrainer`` takes one: a dataset, reward functions,
and an environment factory for tool-using episodes.

>>> import envhub
>>> from envhub.integrations import trl as envhub_trl
>>> env = envhub.load("example_envs/grid-game", trust_code=True)  # doctest: +SKIP
>>> trainer = GRPOTrainer(                                        # doctest: +SKIP
...     model=model,
...     train_dataset=envhub_trl.train_dataset(env, "train", limit=1000),
...     reward_funcs=envhub_trl.reward_funcs(env),
...     environment_factory=envhub_trl.environment_factory(env),
... )

Everything here follows TRL's own source (huggingface/trl, ``trl/trainer/grpo_trainer.py``,
read at commit f2cd577); the functions named in the comments are that file's:

- ``train_dataset``: ``GRPOTrainer._generate_and_score_completions`` reads each row's
  ``"prompt"`` (conversational: a list of ``{"role", "content"}`` messages) and, when an
  ``environment_factory`` is given, calls ``environment.reset(**row)`` with the whole row.
- ``reward_funcs``: ``GRPOTrainer._calculate_rewards`` calls each function as
  ``f(prompts=..., completions=..., completion_ids=..., **columns, trainer_state=...,
  log_extra=..., log_metric=..., [environments=...])``, one entry per completion (a prompt
  repeated ``num_generations`` times), and takes back a list of floats, ``None`` where a
  function does not apply (it becomes NaN and is left out of that completion's sum).
- ``environment_factory``: ``GRPOTrainer.__init__`` calls the factory with no arguments,
  probes the instance with ``inspect.getmembers(instance, inspect.ismethod)``: ``reset`` is
  required, ``get_reward`` is an optional reward source, every other public method is a tool
  whose schema transformers builds from its signature, type hints and Google-style
  docstring. ``GRPOTrainer._tool_call_loop`` calls a tool as ``method(**arguments)`` and
  shows the model ``str(result)`` (or a list of content parts) as a ``tool`` message; an
  exception becomes ``{"error": str(e)}``. Instances are pooled and ``reset`` between
  rollouts.

A TRL tool call is one envhub step: an assistant turn holding that one call. The episode's
``Reply(reward)`` per-turn rewards are kept per call, its ``done`` ends the episode (later
calls get an error saying so), and the final answer (the completion's last assistant
message) is stepped in by the reward function, which has it (``get_reward`` has no
arguments, so it could not): hence no ``get_reward`` here, and the final reward is the
verifier's, as in ``envhub eval``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from inspect import Parameter, Signature
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Union

from envhub.errors import UsageError
from envhub.runtime import Environment, RolloutRecord, read_records

if TYPE_CHECKING:
    from datasets import Dataset  # type: ignore[import-untyped]

    from envhub.runtime import EnvironmentProtocol, EpisodeProtocol, Score, Task

__all__ = ["TASK_ID", "SPLIT", "EnvhubEnvironment", "environment_factory", "reward_funcs", "rollout_output",
           "starting_messages", "train_dataset"]

#: The dataset's column holding each row's task id (TRL passes it to reward functions and reset()).
TASK_ID = "task_id"
#: The dataset's column holding each row's split.
SPLIT = "split"

#: A split longer than this needs ``limit=``: a generator's split can hold a billion seeds.
_MAX_ROWS = 1_000_000
#: JSON Schema types as the Python types transformers' get_json_schema maps back to them.
_PY_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool,
                              "array": list, "object": dict}
#: Members TRL treats specially (GRPOTrainer.__init__): a tool of these names would not be one.
_RESERVED = ("reset", "get_reward")


# -- the dataset ------------------------------------------------------------------------


def train_dataset(env: EnvironmentProtocol, split: str, *, seed: int | None = None, limit: int | None = None,
                  allow_held_out: bool = False) -> Dataset:
    """The tasks of ``split`` as a ``datasets.Dataset`` with the columns GRPOTrainer reads:
    ``prompt`` (the messages the harness starts the episode with: the system prompt, then
    the task's prompt, in TRL's conversational format), ``task_id`` and ``split``.

    ``seed`` shuffles and ``limit`` caps the tasks as :meth:`EnvironmentProtocol.tasks`
    does. Raises :class:`~envhub.errors.UsageError` for a held-out split (training on it
    spoils it as a test; ``allow_held_out=True`` if that is meant), for a split of more than
    a million tasks without ``limit``, and when ``datasets`` is not installed;
    :class:`~envhub.errors.EnvNotFoundError` for an unknown split.
    """
    info = env.splits.get(split)
    if info is not None and info.held_out and not allow_held_out:
        raise UsageError(f"split {split!r} of {env.name} is held out: training on it spoils it as a test; "
                         "train on another split, or pass allow_held_out=True if that is what you mean")
    tasks = env.tasks(split, seed=seed, limit=limit)
    if limit is None and len(tasks) > _MAX_ROWS:
        raise UsageError(f"split {split!r} of {env.name} has {len(tasks):,} tasks; pass limit= "
                         "(a generator's tasks are made when drawn)")
    try:
        from datasets import Dataset
    except ImportError as e:  # a dev dependency of envhub, not a runtime one
        raise UsageError("envhub.integrations.trl.train_dataset needs the datasets package: "
                         "pip install datasets (TRL installs it)") from e
    rows = [{"prompt": starting_messages(env, task), TASK_ID: task.id, SPLIT: task.split} for task in tasks]
    if not rows:
        return Dataset.from_dict({"prompt": [], TASK_ID: [], SPLIT: []})
    return Dataset.from_list(rows)


def starting_messages(env: EnvironmentProtocol, task: Task) -> list[dict[str, Any]]:
    """The messages an episode of ``task`` starts with: a local environment's harness makes
    them without starting an episode (no state is set up); any other environment (served,
    composite) starts one and closes it."""
    if isinstance(env, Environment):
        messages = env.harness.start(task).messages
    else:
        with env.episode(task) as episode:
            messages = episode.reset().messages
    return [{"role": m["role"], "content": m.get("content")} for m in messages]


# -- reward functions -------------------------------------------------------------------


class _Tasks:
    """Tasks by (split, id), each looked up once (a served environment's lookup is a request)."""

    def __init__(self, env: EnvironmentProtocol) -> None:
        self.env = env
        self._cache: dict[tuple[str, str], Task] = {}
        self._lock = threading.Lock()

    def get(self, split: Any, task_id: Any) -> Task:
        key = (str(split), str(task_id))
        with self._lock:
            task = self._cache.get(key)
        if task is None:
            task = self.env.task(*key)
            with self._lock:
                self._cache[key] = task
        return task


def reward_funcs(env: EnvironmentProtocol, *, turn_return: bool = False) -> list[Callable[..., list[float | None]]]:
    """Reward functions for ``GRPOTrainer(reward_funcs=...)``, with the signature
    ``GRPOTrainer._calculate_rewards`` calls.

    The first, ``envhub_reward``, is the environment's final reward: with an
    :func:`environment_factory`, each completion's episode is finished with the completion's
    final answer and its verifier's score is returned; without one (a single-turn
    environment), each completion is scored by ``env.score(task, prompt + completion)``,
    the task found by the row's ``task_id`` and ``split`` (:func:`train_dataset` makes them).
    A verifier that fails scores 0, as in ``envhub eval``, and is counted in the
    ``envhub/verifier_errors`` metric.

    With ``turn_return=True`` a second function, ``envhub_turn_return``, returns the sum of
    the episode's per-turn rewards (the tools' ``Reply(reward=...)``), None for a completion
    whose episode gave none; weigh the two with ``GRPOConfig(reward_weights=[...])``. It
    needs the :func:`environment_factory` (per-turn rewards come from an episode).
    """
    tasks = _Tasks(env)

    def envhub_reward(prompts: list[Any], completions: list[Any], completion_ids: list[list[int]] | None = None,
                      **kwargs: Any) -> list[float | None]:
        scores = _scores(tasks, prompts, completions, kwargs)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric("envhub/verifier_errors", float(sum(s.error is not None for s in scores)))
        return [s.reward for s in scores]

    def envhub_turn_return(prompts: list[Any], completions: list[Any],
                           completion_ids: list[list[int]] | None = None, **kwargs: Any) -> list[float | None]:
        environments = _our_environments(kwargs.get("environments"), len(completions), "envhub_turn_return")
        returns: list[float | None] = []
        for instance, completion in zip(environments, completions, strict=True):
            episode = instance._finish(completion)
            rewards = [r for r in episode.turn_rewards if r is not None]
            returns.append(sum(rewards) if rewards else None)
        return returns

    return [envhub_reward, envhub_turn_return] if turn_return else [envhub_reward]


def _scores(tasks: _Tasks, prompts: list[Any], completions: list[Any], kwargs: Mapping[str, Any]) -> list[Score]:
    environments = kwargs.get("environments")
    if environments is not None:
        ours = _our_environments(environments, len(completions), "envhub_reward")
        return [_final_score(instance._finish(completion))
                for instance, completion in zip(ours, completions, strict=True)]
    ids, splits = kwargs.get(TASK_ID), kwargs.get(SPLIT)
    if ids is None or splits is None:
        raise UsageError(f"envhub_reward needs the dataset's {TASK_ID!r} and {SPLIT!r} columns to find each "
                         "completion's task; build the dataset with envhub.integrations.trl.train_dataset(env, split), "
                         "and keep GRPOConfig(remove_unused_columns=False), the default")
    if not len(ids) == len(splits) == len(prompts) == len(completions):
        raise UsageError(f"envhub_reward got {len(completions)} completions, {len(prompts)} prompts, "
                         f"{len(ids)} {TASK_ID} and {len(splits)} {SPLIT}: one of each per completion expected")
    scores = []
    for prompt, completion, task_id, split in zip(prompts, completions, ids, splits, strict=True):
        task = tasks.get(split, task_id)
        if isinstance(completion, str):  # TRL's standard (text) format
            scores.append(tasks.env.score(task, completion))
        else:  # conversational: the trajectory is the prompt, then the completion's messages
            scores.append(tasks.env.score(task, [*_plain(prompt), *_plain(completion)]))
    return scores


def _final_score(episode: EpisodeProtocol) -> Score:
    if episode.score is None:  # _finish leaves every episode done, so scored
        raise AssertionError("an envhub episode ended without a score")
    return episode.score


def _our_environments(environments: Any, n: int, who: str) -> list[EnvhubEnvironment]:
    if environments is None:
        raise UsageError(f"{who} reads the episodes of envhub.integrations.trl.environment_factory(env): "
                         "pass it to GRPOTrainer(environment_factory=...)")
    if len(environments) != n or not all(isinstance(e, EnvhubEnvironment) for e in environments):
        raise UsageError(f"{who} got {len(environments)} environments for {n} completions, not all made by "
                         "envhub.integrations.trl.environment_factory; use one envhub environment per trainer")
    return list(environments)


def _plain(messages: Any) -> list[dict[str, Any]]:
    """Messages as envhub reads them: a dataset row's messages come back from Arrow with every
    key any message had (None where absent); TRL's with ``tool_calls`` arguments as dicts."""
    if isinstance(messages, str):
        return [{"role": "assistant", "content": messages}]
    return [{k: v for k, v in dict(m).items() if v is not None or k == "content"} for m in messages]


# -- the environment factory ------------------------------------------------------------


class EnvhubEnvironment:
    """An envhub episode as a TRL environment: made by :func:`environment_factory`, whose
    subclass adds one method per tool of the environment.

    ``reset(**row)`` starts an episode of the row's task (``task_id``, ``split``) and returns
    None, so TRL keeps the row's ``prompt`` (which is what the episode starts with; a row
    whose prompt differs was made from another version of the environment and is refused).
    A row without ``task_id`` draws a task from the factory's ``split`` and returns its
    starting messages' text, which TRL puts in the (empty) user message.
    """

    _env: ClassVar[EnvironmentProtocol]
    _tasks: ClassVar[_Tasks]
    _split: ClassVar[str | None]
    _rng: ClassVar[random.Random]
    _check_prompt: ClassVar[bool]

    def __init__(self) -> None:
        self._episode: EpisodeProtocol | None = None
        self._calls = 0

    # A method, not a property: TRL's inspect.getmembers() reads every property of the instance.
    def _current(self) -> EpisodeProtocol:
        if self._episode is None:
            raise UsageError("no episode: the trainer calls reset() before the model's first turn")
        return self._episode

    def reset(self, **kwargs: Any) -> str | None:
        """Start an episode of the row's task (TRL's reserved method; not a tool)."""
        self._close()
        task_id = kwargs.get(TASK_ID)
        drawn = task_id is None
        task = self._draw() if drawn else self._tasks.get(kwargs.get(SPLIT), task_id)
        episode = self._env.episode(task)
        messages = episode.reset().messages
        self._episode, self._calls = episode, 0
        if drawn:
            return "\n\n".join(str(m.get("content") or "") for m in messages)
        prompt = kwargs.get("prompt")
        if self._check_prompt and prompt is not None and not isinstance(prompt, str):
            given = [(m.get("role"), m.get("content")) for m in prompt]
            starts = [(m.get("role"), m.get("content")) for m in messages]
            if given != starts:
                raise UsageError(f"the dataset's prompt for task {task.id!r} ({task.split}) is not what its episode "
                                 f"starts with in {self._env.name} {self._env.version}; rebuild the dataset with "
                                 "envhub.integrations.trl.train_dataset from this environment")
        return None

    def _draw(self) -> Task:
        if self._split is None:
            raise UsageError(f"the dataset row has no {TASK_ID!r} column: give the trainer "
                             "envhub.integrations.trl.train_dataset(env, split), or environment_factory(env, "
                             "split=...) to draw tasks from a split")
        tasks = self._env.tasks(self._split)
        with _DRAW_LOCK:
            index = self._rng.randrange(len(tasks))
        return tasks[index]

    def _call(self, name: str, arguments: dict[str, Any]) -> Any:
        """One tool call, as one envhub step: an assistant turn holding just this call."""
        episode = self._current()
        if episode.done:
            why = episode.outcome or episode.ended_by or "done"
            raise UsageError(f"the episode is over ({why}): no more tool calls; give your final answer")
        self._calls += 1
        call = {"id": f"call-{self._calls}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}
        result = episode.step({"role": "assistant", "content": None, "tool_calls": [call]})
        content = _tool_content(result.observation.messages)
        return content if isinstance(content, (str, list)) else str(content)

    def _finish(self, completion: Any) -> EpisodeProtocol:
        """End the episode with the completion's final answer (if the tools did not end it),
        so the verifier scores it; calling it again returns the same episode."""
        episode = self._current()
        if not episode.done:
            final = _final_answer(completion)
            episode.step({"role": "assistant", "content": final})
            if not episode.done:
                raise UsageError(f"{self._env.name}'s episode went on after the model's final answer: its harness "
                                 "answers with a user turn, which TRL's tool loop does not run")
        return episode

    def _close(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: the server's idle expiry frees a served episode
            self._close()


_DRAW_LOCK = threading.Lock()


def environment_factory(env: EnvironmentProtocol, *, split: str | None = None, seed: int | None = None,
                        check_prompt: bool = True) -> type[EnvhubEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)``: TRL calls it with no arguments
    to make one environment per rollout; each instance runs envhub episodes of ``env``, and
    has one method per tool of the environment (``env.tool_specs``), named after it, whose
    signature, type hints and docstring give transformers the tool's schema.

    ``split`` (and ``seed``) let the environment draw its own tasks when the trainer has no
    dataset (``max_steps`` must then be set); with :func:`train_dataset` rows, the row's
    task is used. ``check_prompt=False`` skips checking that a row's prompt is what its
    episode starts with.

    Raises :class:`~envhub.errors.UsageError` for an environment TRL's tool loop cannot run
    (a harness that answers the model with user turns: ``multi-turn``), and for a tool whose
    name or parameters cannot be a Python method (TRL calls tools as ``method(**arguments)``).
    """
    if env.manifest.harness.protocol == "multi-turn" or (isinstance(env, Environment) and env.harness.responds):
        raise UsageError(f"{env.name} answers the model with user turns (a responder; harness "
                         f"{env.manifest.harness.protocol!r}), which TRL's tool loop does not run; use "
                         "reward_funcs(env) with a single-turn dataset, or an environment without a responder")
    methods: dict[str, Any] = {}
    for spec in env.tool_specs:
        function = spec.get("function", spec)
        methods[function["name"]] = _tool_method(env.name, function)
    namespace: dict[str, Any] = {
        **methods, "_env": env, "_tasks": _Tasks(env), "_split": split, "_rng": random.Random(seed),
        "_check_prompt": check_prompt, "__doc__": f"The envhub environment {env.name} {env.version} for TRL.",
        "__module__": __name__,
    }
    return type(_class_name(env.name), (EnvhubEnvironment,), namespace)


def _tool_method(env_name: str, function: Mapping[str, Any]) -> Callable[..., Any]:
    """A method that calls the tool ``function`` (an OpenAI tool's ``function`` entry) in the
    episode, with the signature, annotations and Google-style docstring from which
    transformers' ``get_json_schema`` rebuilds the tool's schema (TRL renders tools so)."""
    name = function["name"]
    where = f"tool {name!r} of {env_name}"
    if not name.isidentifier() or name.startswith("_") or name in _RESERVED:
        raise UsageError(f"{where}: TRL exposes tools as public methods, so a tool cannot be named {name!r} "
                         f"(not a Python identifier, private, or one of TRL's reserved {', '.join(_RESERVED)})")
    parameters = function.get("parameters") or {}
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    params = [Parameter("self", Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    docs = []
    for pname, schema in sorted(properties.items(), key=lambda item: item[0] not in required):
        if not pname.isidentifier() or pname == "self":
            raise UsageError(f"{where}: parameter {pname!r} cannot be a Python keyword argument, "
                             "and TRL calls tools as method(**arguments)")
        annotations[pname] = _annotation(schema)
        default = Parameter.empty if pname in required else \
            schema.get("default") if isinstance(schema, Mapping) else None
        params.append(Parameter(pname, Parameter.KEYWORD_ONLY, default=default, annotation=annotations[pname]))
        text = " ".join(str(schema.get("description") or pname).split()) if isinstance(schema, Mapping) else pname
        if isinstance(schema, Mapping) and schema.get("enum"):
            text += f" (choices: {json.dumps(list(schema['enum']))})"  # get_json_schema turns this into "enum"
        docs.append(f"    {pname}: {text}")
    annotations["return"] = str

    def tool(self: EnvhubEnvironment, **arguments: Any) -> Any:
        return self._call(name, arguments)

    description = " ".join(str(function.get("description") or name).split())
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = description + ("\n\nArgs:\n" + "\n".join(docs) if docs else "")
    tool.__annotations__ = annotations
    tool.__signature__ = Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    return tool


def _annotation(schema: Any) -> Any:
    """The type hint transformers' get_json_schema turns back into ``schema``: JSON types as
    Python ones, ``array`` items as ``list[...]``, a ``null`` option as ``| None``, other
    unions as ``Union``; whatever has no Python counterpart (a nested object's properties,
    ``$ref``) reaches the model as the plain type, and a schema with no type as ``str``."""
    if not isinstance(schema, Mapping):
        return str
    options = schema.get("anyOf") or schema.get("oneOf")
    kind = schema.get("type")
    if isinstance(kind, list):
        options = [{**schema, "type": k} for k in kind]
    if isinstance(options, list):
        nullable = any(isinstance(p, Mapping) and p.get("type") == "null" for p in options)
        hints = [_annotation(p) for p in options if not (isinstance(p, Mapping) and p.get("type") == "null")]
        hint = Union[tuple(hints)] if hints else str  # noqa: UP007 - built from a list, at run time
        return hint | None if nullable else hint
    if kind == "array":
        items = schema.get("items")
        return list[_annotation(items)] if isinstance(items, Mapping) and items else list  # type: ignore[misc]
    return _PY_TYPES.get(kind, str) if isinstance(kind, str) else str


def _class_name(env_name: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in env_name.split("/")[-1]).split()
    return "".join(w[:1].upper() + w[1:] for w in words) + "Environment"


def _tool_content(messages: Sequence[Mapping[str, Any]]) -> Any:
    """The content of the tool message the step just added (the last message)."""
    for message in reversed(messages):
        if message.get("role") == "tool":
            return message.get("content")
        if message.get("role") == "assistant":
            break
    raise UsageError("the environment answered a tool call without a tool message")


def _final_answer(completion: Any) -> Any:
    """The text of the completion's final assistant message (a string completion is one).
    A completion cut off in a tool call (TRL's iteration or length limit) ends without its
    calls run: its text, or "" when it had none."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if message.get("role") == "assistant":
            return message.get("content") or ""
    return ""


# -- token-faithful rollouts: TRL's rollout_func ----------------------------------------
#
# With an environment_factory, TRL generates every token itself (GRPOTrainer._generate,
# _tool_call_loop) and keeps its own ids and log-probs: nothing to pass through. The other
# route, ``GRPOTrainer(rollout_func=...)``, hands generation to the caller. Its contract, from
# huggingface/trl trl/trainer/grpo_trainer.py at commit f2cd577: ``RolloutFunc =
# Callable[[list[str], GRPOTrainer], dict[str, Any]]``; ``GRPOTrainer._generate`` requires the
# keys "prompt_ids", "completion_ids" and "logprobs" (one list per completion; the log-probs one
# per completion token), pops "env_mask" (one 0/1 per completion token: 1 the model's, 0 the
# environment's; it becomes ``tool_mask``, multiplied into the loss mask), and
# ``_generate_and_score_completions`` hands every other key to the reward functions, entry i to
# completion i. Its own tool loop lays a multi-turn completion out the same way: the model's
# tokens, then the tool result's tokens (mask 0, log-prob 0.0), then the model's again.


def rollout_output(records: Iterable[RolloutRecord] | str | os.PathLike[str]) -> dict[str, list[Any]]:
    """What a TRL ``rollout_func`` returns, made from envhub rollout records kept with
    ``--record-tokens`` (``envhub eval --record-tokens``, ``envhub.evaluate(...,
    record_tokens=True)``): one completion per record, in order.

    - ``prompt_ids``: the first turn's prompt as the server tokenised it;
    - ``completion_ids``: every turn's sampled ids, with the environment's tokens between them
      (each later turn's prompt past the previous prompt and completion: the tool results,
      the chat template's tokens around them);
    - ``logprobs``: the sampled tokens' log-probs, 0.0 on the environment's tokens;
    - ``env_mask``: 1 on the model's tokens, 0 on the environment's;
    - ``task_id``, ``split`` and ``envhub_reward`` (the record's reward), which TRL passes
      on to the reward functions.

    ``records`` is a list of :class:`~envhub.runtime.RolloutRecord` or a records file
    (JSONL). Raises :class:`~envhub.errors.UsageError` naming the record for one without token
    data (re-run with ``--record-tokens`` against a server that returns them, as vLLM and
    SGLang do), with a field the server did not send, with log-probs that do not match its
    ids, and for a turn whose prompt does not carry on the previous turn's prompt and
    completion (the chat template re-rendered the history, e.g. dropped reasoning: the
    episode is not one token sequence).
    """
    where = "the records"
    if isinstance(records, (str, os.PathLike)):
        where = str(records)
        records = read_records(Path(records))
    out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                 TASK_ID: [], SPLIT: [], "envhub_reward": []}
    for index, record in enumerate(records):
        prompt, completion, logprobs, mask = _sequence(record, f"{where}, record {index + 1} "
                                                               f"(task {record.task_id!r}, rollout {record.rollout})")
        out["prompt_ids"].append(prompt)
        out["completion_ids"].append(completion)
        out["logprobs"].append(logprobs)
        out["env_mask"].append(mask)
        out[TASK_ID].append(record.task_id)
        out[SPLIT].append(record.split)
        out["envhub_reward"].append(record.reward)
    if not out["prompt_ids"]:
        raise UsageError(f"{where}: no rollout records; a rollout_func returns one completion per prompt "
                         "and generation")
    return out


def _sequence(record: RolloutRecord, who: str) -> tuple[list[int], list[int], list[float], list[int]]:
    turns = record.turns_tokens
    if not turns and turns is not None and record.error is not None:
        raise UsageError(f"{who} failed before the policy sampled a turn ({record.error}): leave failed rollouts "
                         "out of the batch (record.error is set)")
    if not turns:
        raise UsageError(f"{who} has no token data (turns_tokens): run the evaluation with --record-tokens "
                         "(envhub.evaluate(..., record_tokens=True)) against an endpoint that returns token ids "
                         "and log-probs (vLLM, SGLang)")
    first_prompt: list[int] = []
    context: list[int] = []  # the conversation's tokens so far: the last prompt and its completion
    completion: list[int] = []
    logprobs: list[float] = []
    mask: list[int] = []
    for number, turn in enumerate(turns, 1):
        missing = [name for name in ("prompt_token_ids", "completion_token_ids", "logprobs")
                   if getattr(turn, name) is None]
        if missing:
            raise UsageError(f"{who}, turn {number}: the server sent no {' and no '.join(missing)}; run with "
                             "--record-tokens against an endpoint that returns them (vLLM, SGLang), not one "
                             "that ignores the request")
        prompt, ids, lps = turn.prompt_token_ids, turn.completion_token_ids, turn.logprobs
        assert prompt is not None and ids is not None and lps is not None
        if len(lps) != len(ids):
            raise UsageError(f"{who}, turn {number}: {len(ids)} completion token ids but {len(lps)} log-probs; "
                             "one log-prob per sampled token expected")
        if number == 1:
            first_prompt = list(prompt)
        else:
            if prompt[:len(context)] != context:
                raise UsageError(f"{who}, turn {number}: its prompt does not start with the previous turn's prompt "
                                 "and completion (the chat template re-renders the conversation, e.g. drops "
                                 "reasoning or re-spaces tool calls), so the episode is not one token sequence "
                                 "TRL can train on")
            between = prompt[len(context):]
            completion += between
            logprobs += [0.0] * len(between)
            mask += [0] * len(between)
        completion += ids
        logprobs += lps
        mask += [1] * len(ids)
        context = [*prompt, *ids]
    return first_prompt, completion, logprobs, mask
