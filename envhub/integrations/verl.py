"""An envhub environment as a verl agent loop: each rollout is one envhub episode, played on
token ids.

A verl user writes a dataset of the environment's tasks and registers the loop in the
agent-loop config (docs/integrations.md has the whole recipe)::

    # agent_loops.yaml, named by actor_rollout_ref.rollout.agent.agent_loop_config_path
    - name: envhub
      _target_: envhub.integrations.verl.EnvhubAgentLoop
      env: envhub-examples/grid-game@1.0.0
      trust_code: true

>>> import envhub
>>> from envhub.integrations import verl as envhub_verl
>>> env = envhub.load("example_envs/grid-game", trust_code=True)     # doctest: +SKIP
>>> envhub_verl.write_dataset(env, "train", "train.parquet", limit=1000)  # doctest: +SKIP

Everything here follows verl's own source (volcengine/verl, read at commit b178a3c; the
names, signatures and fields relied on are recorded in tests/data/verl/interface.json):

- ``AgentLoopWorker`` instantiates the class named by an agent-loop config entry with
  ``hydra.utils.instantiate(entry, trainer_config=, server_manager=, tokenizer=, processor=,
  dataset_cls=, dataset_config=)``, once per sample, and awaits ``run(sampling_params,
  **row)`` where the row is the dataset's (``RLHFDataset``: ``raw_prompt``, ``extra_info``,
  ``index``, ...); ``agent_name`` picks the entry.
- ``run`` returns an ``AgentLoopOutput``: ``prompt_ids``; ``response_ids`` (the model's
  tokens and the environment's between them); ``response_mask`` (1 on the model's tokens, 0 on
  the environment's); ``response_logprobs`` (0.0 on the environment's tokens; None when the
  server sends none); ``reward_score`` (when set, verl uses it as the sequence's reward and
  runs no reward function); ``num_turns``; ``metrics``; ``extra_fields``.
- The model is asked with ``server_manager.generate(request_id, prompt_ids=,
  sampling_params=)``, which returns a ``TokenOutput`` (``token_ids``, ``log_probs``,
  ``num_preempted``); tool calls are read from its tokens by verl's ``ToolParser`` of the
  configured ``multi_turn.format``; the environment's messages are tokenised as verl's
  ``ToolAgentLoop`` does (the chat template applied to the new messages alone, its system
  prompt cut off).

The episode logic is :class:`EpisodeLoop`, plain envhub code that takes those objects (any
that behave so), and is what the test suite runs; ``EnvhubAgentLoop`` is a thin subclass of
verl's ``AgentLoopBase`` around it, made on first access when verl is installed.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from envhub.errors import EnvNotFoundError, UsageError
from envhub.integrations.trl import starting_messages
from envhub.runtime import Environment

if TYPE_CHECKING:
    from envhub.runtime import EnvironmentProtocol, EpisodeProtocol, Score, Task

__all__ = ["AGENT_NAME", "EpisodeLoop", "LoopOutput", "agent_loop_class", "environment", "write_dataset"]

#: The agent_name rows of :func:`write_dataset` carry, and the name the class registers under.
AGENT_NAME = "envhub"

#: Why a loop stopped an episode that had not ended (verl's limits, not the environment's).
_RESPONSE_LENGTH = "response-length"
_ASSISTANT_TURNS = "max-assistant-turns"
_USER_TURNS = "max-user-turns"


# -- the dataset ------------------------------------------------------------------------


def write_dataset(env: EnvironmentProtocol, split: str, path: str | os.PathLike[str], *,
                  agent_name: str = AGENT_NAME, seed: int | None = None, limit: int | None = None,
                  allow_held_out: bool = False) -> Path:
    """Write the tasks of ``split`` as a Parquet file for verl's ``data.train_files`` (or
    ``val_files``), one row per task with the columns verl's ``RLHFDataset`` reads:
    ``prompt`` (the messages an episode of the task starts with), ``data_source`` (the
    environment's name), ``agent_name`` (the agent-loop config entry that runs it) and
    ``extra_info`` (``index``, ``task_id``, ``split``: the loop finds the task by them).
    No answer is written: the verifier scores each episode.

    ``seed`` shuffles and ``limit`` caps the tasks as :meth:`EnvironmentProtocol.tasks`
    does. Returns the path. Raises :class:`~envhub.errors.UsageError` for a held-out split
    (``allow_held_out=True`` for a validation set that is meant to be one), for no tasks,
    and when ``pyarrow`` is not installed; :class:`~envhub.errors.EnvNotFoundError` for an
    unknown split.
    """
    info = env.splits.get(split)
    if info is not None and info.held_out and not allow_held_out:
        raise UsageError(f"split {split!r} of {env.name} is held out: training on it spoils it as a test; "
                         "use another split, or pass allow_held_out=True for a validation set")
    tasks = env.tasks(split, seed=seed, limit=limit)
    if limit is None and len(tasks) > 1_000_000:
        raise UsageError(f"split {split!r} of {env.name} has {len(tasks):,} tasks; pass limit= "
                         "(a generator's tasks are made when drawn)")
    if not tasks:
        raise UsageError(f"split {split!r} of {env.name} has no tasks to write")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:  # verl installs it (through datasets); envhub does not need it
        raise UsageError("envhub.integrations.verl.write_dataset needs pyarrow: pip install pyarrow "
                         "(verl installs it)") from e
    rows = [{"data_source": env.name, "agent_name": agent_name, "prompt": starting_messages(env, task),
             "extra_info": {"index": index, "task_id": task.id, "split": task.split}}
            for index, task in enumerate(tasks)]
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out


# -- the episode on token ids -----------------------------------------------------------


@dataclass(slots=True)
class LoopOutput:
    """One episode laid out as verl's ``AgentLoopOutput`` holds it (:meth:`fields` gives the
    keyword arguments); see the module docstring for each field."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None
    reward_score: float
    num_turns: int
    metrics: dict[str, float | int]
    extra_fields: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """The keyword arguments of verl's ``AgentLoopOutput``."""
        return {"prompt_ids": self.prompt_ids, "response_ids": self.response_ids,
                "response_mask": self.response_mask, "response_logprobs": self.response_logprobs,
                "reward_score": self.reward_score, "num_turns": self.num_turns, "metrics": dict(self.metrics),
                "extra_fields": dict(self.extra_fields)}


Generate = Callable[..., Awaitable[Any]]
ParseToolCalls = Callable[[list[int]], Awaitable[tuple[str, list[Any]]]]


class EpisodeLoop:
    """Plays episodes of ``env`` on token ids, as a verl agent loop's ``run``.

    - ``tokenizer``: a Hugging Face tokenizer with a chat template (``apply_chat_template``,
      ``decode``, ``all_special_tokens``);
    - ``generate``: verl's ``server_manager.generate``, called as ``generate(request_id,
      prompt_ids=..., sampling_params=...)``; what it returns has ``token_ids``, ``log_probs``
      and ``num_preempted`` (verl's ``TokenOutput``);
    - ``parse_tool_calls``: verl's ``ToolParser.extract_tool_calls``: awaited with the
      turn's token ids, it returns the text without the calls and the calls (each with
      ``name`` and ``arguments``, a JSON string);
    - ``response_length``: the rollout's ``response_length``: the episode stops when the
      response (the model's tokens and the environment's) would reach it;
    - ``max_assistant_turns``, ``max_user_turns``: verl's ``multi_turn`` limits (None: only
      the environment's own turn limit);
    - ``chat_template_kwargs``: passed to every ``apply_chat_template`` (verl's
      ``data.apply_chat_template_kwargs``, e.g. ``enable_thinking``);
    - ``system_prompt_ids``: the tokens the chat template puts before any message (verl's
      ``AgentLoopBase.system_prompt``); computed as verl does when not given;
    - ``check_prompt``: refuse a row whose ``raw_prompt`` is not what its episode starts
      with (a dataset written from another version of the environment).
    """

    def __init__(self, env: EnvironmentProtocol, *, tokenizer: Any, generate: Generate,
                 parse_tool_calls: ParseToolCalls, response_length: int, max_assistant_turns: int | None = None,
                 max_user_turns: int | None = None, chat_template_kwargs: Mapping[str, Any] | None = None,
                 system_prompt_ids: Sequence[int] | None = None, check_prompt: bool = True) -> None:
        if response_length < 1:
            raise UsageError(f"response_length must be at least 1, got {response_length}")
        self.env = env
        self.tokenizer = tokenizer
        self.generate = generate
        self.parse_tool_calls = parse_tool_calls
        self.response_length = response_length
        self.max_assistant_turns = max_assistant_turns
        self.max_user_turns = max_user_turns
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.system_prompt_ids = list(system_prompt_ids) if system_prompt_ids is not None else \
            _system_prompt_ids(tokenizer, self.chat_template_kwargs)
        self.check_prompt = check_prompt
        harness = env.manifest.harness
        self._responds = harness.protocol == "multi-turn" or harness.responder is not None or \
            (isinstance(env, Environment) and env.harness.responds)

    def task_of(self, row: Mapping[str, Any]) -> Task:
        """The task a dataset row names in its ``extra_info`` (``task_id`` and ``split``)."""
        extra = row.get("extra_info")
        task_id = extra.get("task_id") if isinstance(extra, Mapping) else None
        split = extra.get("split") if isinstance(extra, Mapping) else None
        if task_id is None or split is None:
            raise UsageError(f"the dataset row (index {row.get('index')!r}) has no extra_info.task_id and "
                             f"extra_info.split, which name its {self.env.name} task; write the dataset with "
                             "envhub.integrations.verl.write_dataset(env, split, path)")
        try:
            return self.env.task(str(split), str(task_id))
        except EnvNotFoundError as e:
            raise UsageError(f"the dataset row (index {row.get('index')!r}) names task {task_id!r} of split "
                             f"{split!r}, which {self.env.name} {self.env.version} does not have ({e}); "
                             "write the dataset from this environment") from e

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> LoopOutput:
        """Play one episode of the row's task and return it laid out on token ids.

        The model's turns are stepped into the episode as assistant messages (their text, and
        their tool calls, which the environment runs); the messages the environment adds (tool
        results, a simulated user's reply) are tokenised into the response with mask 0. It
        stops when the environment ends the episode (the model answered, a tool or the user
        ended it, its turn limit), then ``reward_score`` is the verifier's reward; or when
        one of verl's limits comes first (``response_length``, ``max_assistant_turns``,
        ``max_user_turns``): then the last turn's tool calls are not run (nor is a simulated
        user asked), and the verifier scores the conversation as it stands, with the turn's
        text. A last turn without tool calls that nothing answers is stepped as usual: the
        model's answer ends the episode.

        Raises :class:`~envhub.errors.UsageError` for a row that names no task of the
        environment, a row whose prompt is not what the episode starts with, and a server
        whose log-probs do not match its tokens.
        """
        task = self.task_of(row)
        episode = self.env.episode(task)
        try:
            return await self._play(episode, task, sampling_params, row)
        finally:
            await episode.aclose()

    async def _play(self, episode: EpisodeProtocol, task: Task, sampling_params: dict[str, Any],
                    row: Mapping[str, Any]) -> LoopOutput:
        observation = await episode.areset()
        if self.check_prompt:
            self._check_prompt(row, observation.messages, task)
        prompt_ids = await self._template(observation.messages, tools=observation.tools or None)
        response: list[int] = []
        mask: list[int] = []
        logprobs: list[float] | None = []
        request_id = uuid4().hex  # one per episode: verl sends its turns to the same server
        assistant_turns = environment_turns = 0
        generate_s = environment_s = 0.0
        preempted = -1
        stopped_by: str | None = None
        while True:
            start = time.perf_counter()
            out = await self.generate(request_id=request_id, prompt_ids=[*prompt_ids, *response],
                                      sampling_params=sampling_params)
            generate_s += time.perf_counter() - start
            if out.num_preempted is not None:
                preempted = max(preempted, 0) + out.num_preempted
            tokens = list(out.token_ids)
            logprobs = _more_logprobs(logprobs, out.log_probs, tokens, assistant_turns)
            response += tokens
            mask += [1] * len(tokens)
            assistant_turns += 1
            text, calls = await self.parse_tool_calls(tokens)
            message = self._assistant_message(text, calls, assistant_turns)
            # verl's ToolAgentLoop checks its limits before the environment answers a turn. A
            # last answer that nothing answers is stepped: the episode ends as the model ended it.
            stopped_by = self._limit(len(response), assistant_turns, environment_turns) \
                if calls or self._responds else None
            if stopped_by is not None:
                score = await self._score_as_it_stands(episode, task, {"role": "assistant",
                                                                       "content": message["content"] or ""})
                break
            before = len(episode.messages)
            start = time.perf_counter()
            result = await episode.astep(message)
            environment_s += time.perf_counter() - start
            if result.done:
                score = _final_score(episode)
                break
            added = await self._template(episode.messages[before + 1:], strip_system_prompt=True)
            if len(response) + len(added) >= self.response_length:
                stopped_by = _RESPONSE_LENGTH
                score = await self._score_as_it_stands(episode, task, None)
                break
            response += added
            mask += [0] * len(added)
            if logprobs is not None:
                logprobs += [0.0] * len(added)
            environment_turns += 1
        cut = self.response_length
        turn_rewards = list(episode.turn_rewards)
        given = [r for r in turn_rewards if r is not None]
        extra = {
            "turn_scores": given,  # ToolAgentLoop's name for per-turn rewards
            "envhub_turn_rewards": turn_rewards,
            "envhub_task_id": task.id,
            "envhub_split": task.split,
            "envhub_ended_by": stopped_by or episode.ended_by,
            "envhub_outcome": episode.outcome,
            "envhub_verifier_error": score.error,
            "reward_extra_info": {"envhub_turn_return": float(sum(given)),
                                  "envhub_verifier_failed": float(score.error is not None)},
        }
        return LoopOutput(
            prompt_ids=list(prompt_ids), response_ids=response[:cut], response_mask=mask[:cut],
            response_logprobs=logprobs[:cut] if logprobs else None, reward_score=score.reward,
            num_turns=1 + assistant_turns + environment_turns,
            metrics={"generate_sequences": generate_s, "tool_calls": environment_s, "num_preempted": preempted},
            extra_fields=extra)

    def _limit(self, response_tokens: int, assistant_turns: int, environment_turns: int) -> str | None:
        if response_tokens >= self.response_length:
            return _RESPONSE_LENGTH
        if self.max_assistant_turns and assistant_turns >= self.max_assistant_turns:
            return _ASSISTANT_TURNS
        if self.max_user_turns and environment_turns >= self.max_user_turns:
            return _USER_TURNS
        return None

    async def _score_as_it_stands(self, episode: EpisodeProtocol, task: Task, last: dict[str, Any] | None) -> Score:
        """The verifier's score of an episode verl stopped: its messages (and ``last``, the
        turn whose tool calls were not run, as text) with its state, as the environment
        scores any trajectory."""
        messages = [*episode.messages, *([last] if last is not None else [])]
        return await self.env.ascore(task, messages, state=episode.state)

    def _assistant_message(self, text: str, calls: list[Any], turn: int) -> dict[str, Any]:
        content = _without_special_tokens(text, self.tokenizer).strip()
        if not calls:
            return {"role": "assistant", "content": content}
        return {"role": "assistant", "content": content or None, "tool_calls": [
            {"id": f"call_{turn}_{index}", "type": "function",
             "function": {"name": str(call.name), "arguments": str(call.arguments)}}
            for index, call in enumerate(calls)]}

    def _check_prompt(self, row: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], task: Task) -> None:
        given = row.get("raw_prompt")
        if given is None:
            return
        ours = [(m.get("role"), m.get("content")) for m in messages]
        theirs = [(m.get("role"), m.get("content")) for m in list(given)]
        if ours != theirs:
            raise UsageError(f"the dataset's prompt for task {task.id!r} ({task.split}) is not what its episode "
                             f"starts with in {self.env.name} {self.env.version}; write the dataset again with "
                             "envhub.integrations.verl.write_dataset from this environment")

    async def _template(self, messages: Sequence[Mapping[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                        strip_system_prompt: bool = False) -> list[int]:
        """The chat template's tokens for ``messages`` with the generation prompt, as verl's
        ``AgentLoopBase.apply_chat_template`` makes them (in a worker thread: rendering a long
        conversation would hold up every other episode on the loop)."""
        plain = [{k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id", "name")}
                 for m in messages]
        ids = await asyncio.to_thread(lambda: _ids(self.tokenizer.apply_chat_template(
            plain, tools=tools, add_generation_prompt=True, tokenize=True, **self.chat_template_kwargs)))
        return ids[len(self.system_prompt_ids):] if strip_system_prompt else ids


def _ids(rendered: Any) -> list[int]:
    """Token ids from ``apply_chat_template(tokenize=True)``: a list, or (transformers 5) a
    mapping holding ``input_ids``."""
    if isinstance(rendered, Mapping):
        rendered = rendered["input_ids"]
    return [int(i) for i in rendered]


def _system_prompt_ids(tokenizer: Any, kwargs: Mapping[str, Any]) -> list[int]:
    """The tokens a chat template puts before the first message (a default system prompt),
    found as verl's ``initialize_system_prompt`` finds them: one empty user message against
    two."""
    one = _ids(tokenizer.apply_chat_template([{"role": "user", "content": ""}], add_generation_prompt=False,
                                             tokenize=True, **kwargs))
    two = _ids(tokenizer.apply_chat_template([{"role": "user", "content": ""}] * 2, add_generation_prompt=False,
                                             tokenize=True, **kwargs))
    return one[:-(len(two) - len(one))]


def _without_special_tokens(text: str, tokenizer: Any) -> str:
    for token in getattr(tokenizer, "all_special_tokens", ()):
        text = text.replace(token, "")
    return text


def _more_logprobs(sofar: list[float] | None, given: Sequence[float] | None, tokens: list[int],
                   turn: int) -> list[float] | None:
    """The response's log-probs with this turn's: None when the server sends none (verl's
    ``calculate_log_probs`` off)."""
    if not given:
        if sofar and tokens:
            raise UsageError(f"the server sent log-probs for earlier turns but none for turn {turn + 1}")
        return sofar or None
    if sofar is None:
        raise UsageError(f"the server sent no log-probs before turn {turn + 1} and some for it")
    if len(given) != len(tokens):
        raise UsageError(f"turn {turn + 1}: the server sent {len(tokens)} token ids but {len(given)} log-probs; "
                         "one log-prob per token expected")
    if not all(math.isfinite(x) or x == -math.inf for x in given):
        raise UsageError(f"turn {turn + 1}: the server sent a log-prob that is not a number")
    return [*sofar, *map(float, given)]


def _final_score(episode: EpisodeProtocol) -> Score:
    if episode.score is None:  # a done episode is scored
        raise AssertionError("an envhub episode ended without a score")
    return episode.score


# -- verl's side ------------------------------------------------------------------------


def environment(ref: str, *, trust_code: bool = False, registry: str | None = None,
                with_heldout: bool = False) -> EnvironmentProtocol:
    """``envhub.load(ref, ...)``, once per process and arguments. verl makes an agent loop
    per sample, so the loop loads its environment through this cache rather than each time;
    it is a module-level cache because verl gives the loop nothing longer-lived to keep it on."""
    return _load(ref, trust_code, registry, with_heldout)


@functools.cache
def _load(ref: str, trust_code: bool, registry: str | None, with_heldout: bool) -> EnvironmentProtocol:
    import envhub

    return envhub.load(ref, trust_code=trust_code, registry=registry, with_heldout=with_heldout)


def agent_loop_class(base: Any, output: Any, tool_parser: Any) -> type:
    """The agent loop class on verl's ``AgentLoopBase`` (``base``), returning its
    ``AgentLoopOutput`` (``output``) and reading tool calls with its ``ToolParser``
    (``tool_parser``). ``EnvhubAgentLoop`` is this class made from verl's own; the test suite
    makes it from stand-ins that follow verl's recorded interface.

    An agent-loop config entry's own keys are the class's keyword arguments: ``env`` (an id,
    a bundle directory or an ``envhub serve`` URL, as :func:`envhub.load` takes), and
    optionally ``trust_code``, ``registry``, ``with_heldout`` and ``check_prompt``.
    """

    def __init__(self: Any, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any, *,
                 env: str | None = None, trust_code: bool = False, registry: str | None = None,
                 with_heldout: bool = False, check_prompt: bool = True, **kwargs: Any) -> None:
        base.__init__(self, trainer_config, server_manager, tokenizer, processor, **kwargs)
        if not env:
            raise UsageError(f"the agent-loop config entry {kwargs.get('name', AGENT_NAME)!r} "
                             f"({__name__}.EnvhubAgentLoop) has no env: add env: <id, bundle directory or URL>")
        rollout = self.config.actor_rollout_ref.rollout
        multi_turn = rollout.multi_turn
        if multi_turn.format == "gpt-oss":
            raise UsageError("multi_turn.format gpt-oss formats tool results outside the chat template, which "
                             f"{__name__}.EnvhubAgentLoop does not do; use a format whose chat template renders "
                             "tool messages (hermes)")
        parser = tool_parser.get_tool_parser(multi_turn.format, tokenizer)
        self.envhub_loop = EpisodeLoop(
            environment(str(env), trust_code=trust_code, registry=registry, with_heldout=with_heldout),
            tokenizer=tokenizer, generate=server_manager.generate, parse_tool_calls=parser.extract_tool_calls,
            response_length=int(rollout.response_length), max_assistant_turns=multi_turn.max_assistant_turns,
            max_user_turns=multi_turn.max_user_turns, chat_template_kwargs=self.apply_chat_template_kwargs,
            system_prompt_ids=self.system_prompt, check_prompt=check_prompt)

    async def run(self: Any, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        result = await self.envhub_loop.run(sampling_params, **kwargs)
        return output(**result.fields())

    return type("EnvhubAgentLoop", (base,), {
        "__init__": __init__, "run": run, "__module__": __name__, "__qualname__": "EnvhubAgentLoop",
        "__doc__": "An envhub environment's episodes as a verl agent loop (envhub.integrations.verl)."})


@functools.cache
def _verl_agent_loop() -> type:
    try:
        from verl.experimental.agent_loop.agent_loop import (  # type: ignore[import-not-found]
            AgentLoopBase,
            AgentLoopOutput,
            register,
        )
        from verl.experimental.agent_loop.tool_parser import ToolParser  # type: ignore[import-not-found]
    except ImportError as e:
        raise UsageError(f"{__name__}.EnvhubAgentLoop needs verl: pip install verl ({e})") from e
    cls = agent_loop_class(AgentLoopBase, AgentLoopOutput, ToolParser)
    return register(AGENT_NAME)(cls)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    if name == "EnvhubAgentLoop":
        return _verl_agent_loop()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

