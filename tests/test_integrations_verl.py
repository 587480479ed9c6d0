"""envhub.integrations.verl, driven as verl's agent-loop worker drives an agent loop.

verl cannot be installed here (it pulls torch and CUDA), so the suite checks the adapter
against verl's interface as recorded from its repository (tests/data/verl/interface.json,
made by tests/data/verl/record_interface.py from volcengine/verl at the commit it names): the
stand-ins below (the server manager's ``generate``, ``TokenOutput``, ``FunctionCall``,
``AgentLoopBase``, ``AgentLoopOutput``) are built from or checked against that record, so a
renamed field or parameter fails here. The hermes tool parser is verl's
``HermesToolParser.extract_tool_calls``, line for line. ``test_real_verl_*`` runs against verl
itself when it is installed.

The rest is real: the environments are example_envs/grid-game (tools, per-move rewards, games
that end themselves), example_envs/word-guess (a responder that answers each guess) and
example_envs/arith-word-problems (single-turn), loaded locally and served by a real ``envhub
serve``; the tokenizer is a real byte-level BPE (the ``tokenizers`` library, trained in the
test on the environments' own text, so no download) in a transformers
``PreTrainedTokenizerFast`` with a Qwen-style chat template that renders tools and tool calls
in the hermes format. The model is scripted: it reads the board in the tokens it is given and
walks a shortest path (or into a trap), and answers with token ids and log-probs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest

import envhub
from envhub.errors import UsageError
from envhub.integrations import verl as envhub_verl
from envhub.runtime import Environment
from tests.serve_fixtures import Server, start_server
from tests.test_example_grid_game import STEPS, shortest_first_move

EXAMPLES = Path(__file__).resolve().parents[1] / "example_envs"
GRID, WORDS, ARITH = EXAMPLES / "grid-game", EXAMPLES / "word-guess", EXAMPLES / "arith-word-problems"
INTERFACE = json.loads((Path(__file__).parent / "data" / "verl" / "interface.json").read_text())
LOOP = "verl/experimental/agent_loop/agent_loop.py"

pytestmark = pytest.mark.timeout(120)


def recorded_model(name: str) -> dict[str, Any]:
    return next(fields for key, fields in INTERFACE["models"].items() if key.endswith(f":{name}"))


def recorded_signature(name: str) -> dict[str, Any]:
    return next(sig for key, sig in INTERFACE["signatures"].items() if key.endswith(f":{name}"))


def model_from_record(name: str) -> type[pydantic.BaseModel]:
    """A pydantic model with exactly the recorded fields of verl's model ``name``."""
    fields: dict[str, Any] = {f: (Any, ... if spec["required"] else None) for f, spec in recorded_model(name).items()}
    return pydantic.create_model(name, __config__=pydantic.ConfigDict(extra="forbid"), **fields)


TokenOutput = model_from_record("TokenOutput")
FunctionCall = model_from_record("FunctionCall")
AgentLoopOutput = model_from_record("AgentLoopOutput")


# --- a real tokenizer with a chat template ---------------------------------------------------

TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\n<tools>' }}{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\nFor each function call, return a json object within <tool_call></tool_call> tags."
    "<|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'system' and loop.first %}"
    "{%- elif m.role == 'assistant' %}{{- '<|im_start|>assistant\\n' + (m.content or '') }}"
    "{%- for c in m.tool_calls or [] %}{{- '<tool_call>\\n{\"name\": \"' + c.function.name + '\", \"arguments\": '"
    " + c.function.arguments + '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' %}{{- '<|im_start|>user\\n<tool_response>\\n' + m.content"
    " + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """Made once per module; imported here, not at collection (transformers takes a second)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = []
    for bundle in (GRID, WORDS, ARITH):
        corpus += [p.read_text() for p in bundle.rglob("*") if p.suffix in (".md", ".py", ".jsonl", ".toml")]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=2000, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.add_tokens(["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"])
    tok.chat_template = TEMPLATE
    return tok


def template_ids(tokenizer: Any, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, tokenize=True, **kwargs)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


class HermesToolParser:
    """verl's ``HermesToolParser`` (verl/experimental/agent_loop/tool_parser.py), line for line."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.tool_call_start_token = "<tool_call>"
        self.tool_call_end_token = "</tool_call>"
        self.tool_call_regex = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

    async def extract_tool_calls(self, responses_ids: list[int]) -> tuple[str, list[Any]]:
        loop = asyncio.get_running_loop()
        text = await loop.run_in_executor(None, self.tokenizer.decode, responses_ids)
        if self.tool_call_start_token not in text or self.tool_call_end_token not in text:
            return text, []
        matches = self.tool_call_regex.findall(text)
        function_calls = []
        for match in matches:
            try:
                function_call = json.loads(match)
                name, arguments = function_call["name"], function_call["arguments"]
                function_calls.append(FunctionCall(name=name, arguments=json.dumps(arguments, ensure_ascii=False)))
            except Exception:
                pass
        content = self.tool_call_regex.sub("", text)
        return content, function_calls


# --- the scripted model behind verl's server manager -------------------------------------------


def move_text(direction: str) -> str:
    return f'<tool_call>\n{{"name": "move", "arguments": {{"direction": "{direction}"}}}}\n</tool_call><|im_end|>'


def last_board(text: str) -> list[str]:
    """The last block of consecutive board lines in the text."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line and set(line) <= set(".#^$@"):
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    board = next(b for b in reversed(blocks) if b)
    assert any("@" in line for line in board), board
    return board


def towards_the_trap(board: list[str]) -> str:
    cells = {(r, c): ch for r, line in enumerate(board) for c, ch in enumerate(line)}
    me = next(p for p, ch in cells.items() if ch == "@")
    trap = min((p for p, ch in cells.items() if ch == "^"), key=lambda p: abs(p[0] - me[0]) + abs(p[1] - me[1]))
    for name, (dr, dc) in STEPS.items():
        there = (me[0] + dr, me[1] + dc)
        if abs(there[0] - trap[0]) + abs(there[1] - trap[1]) < abs(me[0] - trap[0]) + abs(me[1] - trap[1]) \
                and cells.get(there, "#") != "#":
            return name
    return "north"


class ServerManager:
    """verl's ``AsyncLLMServerManager`` as an agent loop sees it: ``generate`` with its
    recorded signature, returning a ``TokenOutput``. ``reply(prompt_text, turn)`` is the
    model: the text it answers with; its tokens get log-prob ``-(turn + i % 7) / 10``."""

    def __init__(self, tokenizer: Any, reply: Callable[[str, int], str], *, logprobs: bool = True) -> None:
        self.tokenizer = tokenizer
        self.reply = reply
        self.logprobs = logprobs
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: list[Any] | None = None, video_data: list[Any] | None = None) -> Any:
        turn = len(self.calls)
        text = self.reply(self.tokenizer.decode(prompt_ids, skip_special_tokens=True), turn)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        lps = [-(turn + i % 7) / 10 for i in range(len(ids))] if self.logprobs else None
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "ids": ids, "logprobs": lps,
                           "sampling_params": sampling_params})
        return TokenOutput(token_ids=ids, log_probs=lps, num_preempted=0)


def winner(prompt: str, turn: int) -> str:
    return move_text(shortest_first_move(last_board(prompt)))


def loser(prompt: str, turn: int) -> str:
    return move_text(towards_the_trap(last_board(prompt)))


def loop_for(env: Any, tokenizer: Any, server: ServerManager, **kwargs: Any) -> envhub_verl.EpisodeLoop:
    kwargs.setdefault("response_length", 4096)
    return envhub_verl.EpisodeLoop(env, tokenizer=tokenizer, generate=server.generate,
                                   parse_tool_calls=HermesToolParser(tokenizer).extract_tool_calls, **kwargs)


def row_for(env: Any, task: Any, index: int = 0) -> dict[str, Any]:
    """A row as verl's RLHFDataset hands it to run(): raw_prompt, extra_info, index, ..."""
    from envhub.integrations.trl import starting_messages

    return {"raw_prompt": starting_messages(env, task), "data_source": env.name, "index": index,
            "extra_info": {"index": index, "task_id": task.id, "split": task.split},
            "tools_kwargs": {}, "interaction_kwargs": {}}


SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of each run of equal values."""
    out: list[tuple[int, int, int]] = []
    for i, v in enumerate(mask):
        if out and out[-1][0] == v:
            out[-1] = (v, out[-1][1], i + 1)
        else:
            out.append((v, i, i + 1))
    return out


@pytest.fixture(scope="module")
def grid() -> Iterator[Environment]:
    with envhub.load(GRID, trust_code=True) as env:
        assert isinstance(env, Environment)
        yield env


@pytest.fixture(scope="module")
def words() -> Iterator[Environment]:
    with envhub.load(WORDS, trust_code=True) as env:
        assert isinstance(env, Environment)
        yield env


@pytest.fixture(scope="module")
def arith() -> Iterator[Environment]:
    with envhub.load(ARITH, trust_code=True) as env:
        assert isinstance(env, Environment)
        yield env


def move(direction: str) -> dict[str, Any]:
    arguments = json.dumps({"direction": direction})
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "move", "arguments": arguments}}]}


def replay(env: Any, task: Any, directions: list[str]) -> tuple[float | None, list[float | None]]:
    """The same moves in a plain envhub episode: its reward and turn rewards."""
    with env.episode(task) as episode:
        episode.reset()
        for d in directions:
            episode.step(move(d))
        assert episode.done
        return episode.reward, list(episode.turn_rewards)


def directions(server: ServerManager) -> list[str]:
    return [json.loads(re.search(r"\{.*\}", server.tokenizer.decode(c["ids"]))[0])["arguments"]["direction"]
            for c in server.calls]


# --- the episode on token ids ----------------------------------------------------------------


def test_an_episode_is_one_token_sequence_with_the_model_s_tokens_masked_in(grid: Environment, tokenizer: Any) -> None:
    task = grid.tasks("dev")[1]
    server = ServerManager(tokenizer, winner)
    out = asyncio.run(loop_for(grid, tokenizer, server).run(SAMPLING, **row_for(grid, task)))

    # The model saw, at every turn, exactly the prompt and the response so far.
    assert len(server.calls) >= 2
    for call in server.calls:
        assert call["prompt_ids"] == out.prompt_ids + out.response_ids[:len(call["prompt_ids"]) - len(out.prompt_ids)]
        assert call["sampling_params"] == SAMPLING
    assert len({c["request_id"] for c in server.calls}) == 1  # one sticky session per episode
    # The prompt is the harness's start, rendered with the environment's tools.
    assert out.prompt_ids == template_ids(tokenizer, row_for(grid, task)["raw_prompt"], tools=grid.tool_specs,
                                          add_generation_prompt=True)
    # Mask 1 runs are the model's tokens, turn by turn, with its log-probs; mask 0 runs are the
    # tool results as the chat template renders them alone (its system prompt cut off), log-prob 0.
    system = template_ids(tokenizer, [{"role": "user", "content": ""}])[:-len(
        template_ids(tokenizer, [{"role": "user", "content": ""}] * 2)) + len(
        template_ids(tokenizer, [{"role": "user", "content": ""}]))]
    model_runs = [r for r in runs(out.response_mask) if r[0] == 1]
    env_runs = [r for r in runs(out.response_mask) if r[0] == 0]
    assert [out.response_ids[a:b] for _, a, b in model_runs] == [c["ids"] for c in server.calls]
    assert [out.response_logprobs[a:b] for _, a, b in model_runs] == [c["logprobs"] for c in server.calls]
    assert len(env_runs) == len(server.calls) - 1  # the environment ended the game after the last move
    with grid.episode(task) as episode:
        episode.reset()
        for (_, a, b), d in zip(env_runs, directions(server), strict=False):
            before = len(episode.messages)
            episode.step(move(d))
            tool = [{"role": "tool", "content": m["content"]} for m in episode.messages[before + 1:]]
            assert out.response_ids[a:b] == template_ids(tokenizer, tool, add_generation_prompt=True)[len(system):]
            assert set(out.response_logprobs[a:b]) == {0.0}
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)

    # The environment ended the episode; the verifier's reward is the reward score.
    reward, turn_rewards = replay(grid, task, directions(server))
    assert out.reward_score == reward == 1.0
    assert out.extra_fields["envhub_turn_rewards"] == turn_rewards
    assert out.extra_fields["turn_scores"] == [r for r in turn_rewards if r is not None]
    turn_return = out.extra_fields["reward_extra_info"]["envhub_turn_return"]
    assert turn_return == pytest.approx(sum(out.extra_fields["turn_scores"]))
    assert (out.extra_fields["envhub_ended_by"], out.extra_fields["envhub_outcome"]) == ("environment", "win")
    assert (out.extra_fields["envhub_task_id"], out.extra_fields["envhub_split"]) == (task.id, "dev")
    assert out.num_turns == 1 + len(server.calls) + len(env_runs)
    assert out.metrics["num_preempted"] == 0 and out.metrics["generate_sequences"] >= 0


def test_a_group_of_rollouts_plays_at_once_on_one_loop(grid: Environment, tokenizer: Any) -> None:
    """verl's worker gathers every row's run() on one event loop, a prompt's rollout.n
    rollouts among them: each is an episode of its own."""
    task = grid.tasks("dev")[1]
    server = ServerManager(tokenizer, winner)
    loop = loop_for(grid, tokenizer, server)

    async def group() -> list[envhub_verl.LoopOutput]:
        return list(await asyncio.gather(*(loop.run(SAMPLING, **row_for(grid, task)) for _ in range(8))))

    outs = asyncio.run(group())
    assert [o.reward_score for o in outs] == [1.0] * 8
    assert all(o.response_mask == outs[0].response_mask for o in outs)  # the same walk, eight episodes
    assert len({c["request_id"] for c in server.calls}) == 8


def test_a_lost_game_scores_zero_and_keeps_the_penalty_turn(grid: Environment, tokenizer: Any) -> None:
    task = grid.tasks("dev")[0]
    server = ServerManager(tokenizer, loser)
    out = asyncio.run(loop_for(grid, tokenizer, server).run(SAMPLING, **row_for(grid, task)))
    reward, turn_rewards = replay(grid, task, directions(server))
    assert out.reward_score == reward == 0.0
    assert out.extra_fields["envhub_ended_by"] == "environment"
    assert out.extra_fields["envhub_outcome"] == "loss"
    assert out.extra_fields["envhub_turn_rewards"] == turn_rewards and turn_rewards[-1] < 0
    assert out.response_mask[-1] == 1  # the game ended on the model's move: no tokens after it


def test_without_log_probs_the_output_has_none(grid: Environment, tokenizer: Any) -> None:
    server = ServerManager(tokenizer, winner, logprobs=False)
    out = asyncio.run(loop_for(grid, tokenizer, server).run(SAMPLING, **row_for(grid, grid.tasks("dev")[1])))
    assert out.response_logprobs is None and out.reward_score == 1.0


@pytest.mark.parametrize(("limits", "ended_by", "generations"), [
    ({"max_assistant_turns": 2}, "max-assistant-turns", 2),
    ({"max_user_turns": 1}, "max-user-turns", 2),
], ids=["max-assistant-turns", "max-user-turns"])
def test_verl_s_turn_limits_stop_the_episode_and_the_verifier_scores_it_as_it_stands(
        grid: Environment, tokenizer: Any, limits: dict[str, Any], ended_by: str, generations: int) -> None:
    task = grid.tasks("dev")[1]
    server = ServerManager(tokenizer, winner)
    out = asyncio.run(loop_for(grid, tokenizer, server, **limits).run(SAMPLING, **row_for(grid, task)))
    assert out.extra_fields["envhub_ended_by"] == ended_by
    assert out.reward_score == 0.0  # not won yet: the verifier read the game's state
    assert out.extra_fields["envhub_verifier_error"] is None
    assert len(server.calls) == generations
    # The last turn's calls were not run (verl checks its limits before it runs a turn's tools).
    assert out.extra_fields["envhub_turn_rewards"] == replay_prefix(grid, task, directions(server)[:-1])
    assert out.response_mask[-1] == 1 and out.response_ids[-len(server.calls[-1]["ids"]):] == server.calls[-1]["ids"]


@pytest.mark.parametrize("where", ["in a tool result", "in a model turn"])
def test_the_response_length_stops_the_episode_where_it_is_reached(grid: Environment, tokenizer: Any,
                                                                    where: str) -> None:
    task = grid.tasks("dev")[1]
    full = asyncio.run(loop_for(grid, tokenizer, ServerManager(tokenizer, winner)).run(SAMPLING, **row_for(grid, task)))
    (_, _, first_model_end), (_, _, first_env_end), (_, _, second_model_end) = runs(full.response_mask)[:3]
    limit = first_env_end - 1 if where == "in a tool result" else second_model_end - 1
    server = ServerManager(tokenizer, winner)
    out = asyncio.run(loop_for(grid, tokenizer, server, response_length=limit).run(SAMPLING, **row_for(grid, task)))
    assert out.extra_fields["envhub_ended_by"] == "response-length"
    assert out.reward_score == 0.0
    # Either way the first move was run and the second was not (a tool result that does not fit
    # is left out, as verl's ToolAgentLoop leaves it out; a turn that reaches the limit is not run).
    assert out.extra_fields["envhub_turn_rewards"] == replay_prefix(grid, task, directions(server)[:1])
    if where == "in a tool result":
        assert len(server.calls) == 1 and out.response_ids == full.response_ids[:first_model_end]
        assert out.response_mask == [1] * first_model_end
    else:
        assert len(server.calls) == 2 and len(out.response_ids) == limit
        assert out.response_ids == full.response_ids[:limit] and out.response_mask == full.response_mask[:limit]
        assert out.response_logprobs == full.response_logprobs[:limit]


def replay_prefix(env: Any, task: Any, moves: list[str]) -> list[float | None]:
    with env.episode(task) as episode:
        episode.reset()
        for d in moves:
            episode.step(move(d))
        return list(episode.turn_rewards)


def test_a_responder_s_replies_are_the_environment_s_tokens(words: Environment, tokenizer: Any) -> None:
    task = words.tasks("dev")[0]
    guesses = list(task.data["reference"])

    def guesser(prompt: str, turn: int) -> str:
        return f"My guess: {guesses[turn]}<|im_end|>"

    server = ServerManager(tokenizer, guesser)
    out = asyncio.run(loop_for(words, tokenizer, server).run(SAMPLING, **row_for(words, task)))
    assert out.reward_score == 1.0
    assert len(server.calls) == len(guesses)
    env_runs = [(a, b) for v, a, b in runs(out.response_mask) if v == 0]
    assert len(env_runs) == len(guesses) - 1  # the responder ended the game at the right guess
    first_reply = tokenizer.decode(out.response_ids[env_runs[0][0]:env_runs[0][1]])
    assert first_reply.startswith("<|im_start|>user\n" + guesses[0].upper() + ": ")
    assert out.extra_fields["envhub_ended_by"] == "environment"


def test_verl_s_turn_limit_stops_a_responder_before_it_answers(words: Environment, tokenizer: Any) -> None:
    task = words.tasks("dev")[0]
    guesses = list(task.data["reference"])
    server = ServerManager(tokenizer, lambda prompt, turn: f"My guess: {guesses[turn]}<|im_end|>")
    out = asyncio.run(loop_for(words, tokenizer, server, max_assistant_turns=2).run(SAMPLING, **row_for(words, task)))
    assert len(server.calls) == 2 and out.reward_score == 0.0
    assert out.extra_fields["envhub_ended_by"] == "max-assistant-turns"
    assert [v for v, _, _ in runs(out.response_mask)] == [1, 0, 1]  # the second guess got no reply
    # Stopped at the winning guess, the verifier still scores it; with a turn to spare, the
    # responder ends the game itself.
    for limit, ended_by in [(3, "max-assistant-turns"), (4, "environment")]:
        server = ServerManager(tokenizer, lambda prompt, turn: f"My guess: {guesses[turn]}<|im_end|>")
        loop = loop_for(words, tokenizer, server, max_assistant_turns=limit)
        out = asyncio.run(loop.run(SAMPLING, **row_for(words, task)))
        assert (out.reward_score, out.extra_fields["envhub_ended_by"]) == (1.0, ended_by)


@pytest.mark.parametrize(("answer", "reward"), [("\\boxed{8}", 1.0), ("\\boxed{9}", 0.0)], ids=["right", "wrong"])
def test_a_single_turn_environment_is_one_generation(arith: Environment, tokenizer: Any, answer: str,
                                                    reward: float) -> None:
    task = arith.task("dev", "arith-dev-00001")
    server = ServerManager(tokenizer, lambda prompt, turn: f"The packs: {answer}<|im_end|>")
    out = asyncio.run(loop_for(arith, tokenizer, server).run(SAMPLING, **row_for(arith, task)))
    assert out.reward_score == reward
    assert out.response_mask == [1] * len(out.response_ids) and out.response_ids == server.calls[0]["ids"]
    assert out.num_turns == 2 and out.extra_fields["envhub_ended_by"] == "policy"
    assert out.extra_fields["turn_scores"] == []


# --- bad input -------------------------------------------------------------------------------


def test_a_row_without_its_task_is_refused_naming_the_fix(grid: Environment, tokenizer: Any) -> None:
    loop = loop_for(grid, tokenizer, ServerManager(tokenizer, winner))
    with pytest.raises(UsageError) as e:
        asyncio.run(loop.run(SAMPLING, raw_prompt=[], index=7, extra_info={"index": 7}))
    assert str(e.value) == ("the dataset row (index 7) has no extra_info.task_id and extra_info.split, which name its "
                            "envhub-examples/grid-game task; write the dataset with "
                            "envhub.integrations.verl.write_dataset(env, split, path)")
    with pytest.raises(UsageError, match=r"names task 'nope' of split 'dev', which envhub-examples/grid-game 1.0.0 "
                                         r"does not have"):
        asyncio.run(loop.run(SAMPLING, index=1, extra_info={"task_id": "nope", "split": "dev"}))


def test_a_prompt_from_another_version_is_refused(grid: Environment, tokenizer: Any) -> None:
    task = grid.tasks("dev")[1]
    row = row_for(grid, task)
    row["raw_prompt"] = [*row["raw_prompt"][:-1], {"role": "user", "content": "another board"}]
    server = ServerManager(tokenizer, winner)
    with pytest.raises(UsageError, match=r"the dataset's prompt for task '.*' \(dev\) is not what its episode starts "
                                         r"with in envhub-examples/grid-game 1.0.0"):
        asyncio.run(loop_for(grid, tokenizer, server).run(SAMPLING, **row))
    assert server.calls == []  # refused before the model was asked
    out = asyncio.run(loop_for(grid, tokenizer, server, check_prompt=False).run(SAMPLING, **row))
    assert out.reward_score == 1.0  # the positive control: the episode's own prompt is used


def test_log_probs_that_do_not_match_the_tokens_are_refused(grid: Environment, tokenizer: Any) -> None:
    class Short(ServerManager):
        async def generate(self, request_id: str, **kwargs: Any) -> Any:
            out = await super().generate(request_id, **kwargs)
            return TokenOutput(token_ids=out.token_ids, log_probs=out.log_probs[:-1], num_preempted=0)

    loop = loop_for(grid, tokenizer, Short(tokenizer, winner))
    with pytest.raises(UsageError, match=r"turn 1: the server sent \d+ token ids but \d+ log-probs"):
        asyncio.run(loop.run(SAMPLING, **row_for(grid, grid.tasks("dev")[1])))


# --- the dataset -----------------------------------------------------------------------------


def test_the_dataset_is_what_rlhf_dataset_reads_and_the_loop_plays(grid: Environment, tokenizer: Any,
                                                                  tmp_path: Path) -> None:
    import datasets

    path = envhub_verl.write_dataset(grid, "dev", tmp_path / "dev.parquet", limit=3)
    # RLHFDataset reads its files with datasets.load_dataset("parquet") and sets raw_prompt to
    # the prompt column; extra_info, data_source and agent_name reach run() as they are.
    rows = list(datasets.load_dataset("parquet", data_files=str(path))["train"])
    assert [r["extra_info"] for r in rows] == [{"index": i, "task_id": t.id, "split": "dev"}
                                               for i, t in enumerate(grid.tasks("dev", limit=3))]
    assert {r["agent_name"] for r in rows} == {"envhub"} and {r["data_source"] for r in rows} == {grid.name}
    row = rows[1]
    kwargs = {"raw_prompt": row["prompt"], "extra_info": row["extra_info"], "index": row["extra_info"]["index"],
              "data_source": row["data_source"]}
    out = asyncio.run(loop_for(grid, tokenizer, ServerManager(tokenizer, winner)).run(SAMPLING, **kwargs))
    assert out.reward_score == 1.0
    assert "answer" not in json.dumps(rows)


def test_the_dataset_refuses_held_out_splits(grid: Environment, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="split 'test' of envhub-examples/grid-game is held out"):
        envhub_verl.write_dataset(grid, "test", tmp_path / "t.parquet")
    with pytest.raises(UsageError, match="has 1,000,000,000 tasks; pass limit="):
        envhub_verl.write_dataset(grid, "train", tmp_path / "t.parquet")
    assert not (tmp_path / "t.parquet").exists()


# --- a served environment --------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server([str(GRID), "--trust"], tmp_path_factory.mktemp("serve-verl"))
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.stderr()


def test_a_served_environment_plays_the_same_episode(server: Server, grid: Environment, tokenizer: Any) -> None:
    task = grid.tasks("dev")[1]
    local = ServerManager(tokenizer, winner)
    expected = asyncio.run(loop_for(grid, tokenizer, local).run(SAMPLING, **row_for(grid, task)))
    with envhub.load(server.url(grid.name)) as served:
        remote = ServerManager(tokenizer, winner)
        out = asyncio.run(loop_for(served, tokenizer, remote).run(SAMPLING, **row_for(served, task)))
    assert out.fields() | {"metrics": None} == expected.fields() | {"metrics": None}


# --- verl's interface, as recorded -----------------------------------------------------------


def test_the_record_is_of_one_verl_commit() -> None:
    assert INTERFACE["repository"] == "volcengine/verl"
    assert re.fullmatch(r"[0-9a-f]{40}", INTERFACE["commit"])


def test_the_output_carries_exactly_verl_s_fields(grid: Environment, tokenizer: Any) -> None:
    out = asyncio.run(loop_for(grid, tokenizer, ServerManager(tokenizer, winner)).run(
        SAMPLING, **row_for(grid, grid.tasks("dev")[1])))
    recorded = recorded_model("AgentLoopOutput")
    fields = out.fields()
    assert set(fields) <= set(recorded)
    assert {f for f, spec in recorded.items() if spec["required"]} <= set(fields)
    # The ones left out are multi-modal and mixture-of-experts data, which text episodes do not have.
    assert set(recorded) - set(fields) == {"routed_experts", "multi_modal_data"}
    assert set(fields["metrics"]) == set(recorded_model("AgentLoopMetrics"))
    AgentLoopOutput(**fields)  # extra="forbid": no field verl does not have


def test_the_stand_ins_have_verl_s_signatures() -> None:
    def shape(fn: Callable[..., Any]) -> dict[str, Any]:
        params = list(inspect.signature(fn).parameters.values())
        return {"async": inspect.iscoroutinefunction(fn),
                "positional": [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD],
                "keyword_only": [p.name for p in params if p.kind == p.KEYWORD_ONLY],
                "var_keyword": any(p.kind == p.VAR_KEYWORD for p in params)}

    for fn, name in [(ServerManager.generate, "AsyncLLMServerManager.generate"),
                     (HermesToolParser.extract_tool_calls, "ToolParser.extract_tool_calls"),
                     (AgentLoopBase.__init__, "AgentLoopBase.__init__"), (AgentLoopBase.run, "AgentLoopBase.run"),
                     (ToolParser.get_tool_parser.__func__, "ToolParser.get_tool_parser")]:  # type: ignore[attr-defined]
        recorded = recorded_signature(name)
        assert shape(fn) == {k: recorded[k] for k in ("async", "positional", "keyword_only", "var_keyword")}, name


class AgentLoopBase:
    """verl's ``AgentLoopBase.__init__`` (its recorded signature), setting the attributes the
    loop reads as verl's does: ``config``, ``tokenizer``, ``apply_chat_template_kwargs``,
    ``system_prompt`` (by verl's ``initialize_system_prompt``)."""

    def __init__(self, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any, dataset_cls: Any,
                 dataset_config: Any, **kwargs: Any) -> None:
        self.config = trainer_config.config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_config = dataset_config.config
        self.apply_chat_template_kwargs = self.dataset_config.get("apply_chat_template_kwargs", {})
        token1 = template_ids(tokenizer, [{"role": "user", "content": ""}], add_generation_prompt=False)
        token2 = template_ids(tokenizer, [{"role": "user", "content": ""}] * 2, add_generation_prompt=False)
        self.system_prompt = token1[: -(len(token2) - len(token1))]

    async def run(self, sampling_params: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class ToolParser:
    _registry = {"hermes": HermesToolParser}

    @classmethod
    def get_tool_parser(cls, name: str, tokenizer: Any) -> Any:
        if name not in cls._registry:
            raise ValueError(f"Unknown tool parser: {name}")
        return cls._registry[name](tokenizer)


def trainer_config(**multi_turn: Any) -> SimpleNamespace:
    turn = {"format": "hermes", "max_assistant_turns": None, "max_user_turns": None, **multi_turn}
    rollout = SimpleNamespace(response_length=4096, multi_turn=SimpleNamespace(**turn))
    return SimpleNamespace(config=SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=rollout)))


def instantiate(cls: type, entry: dict[str, Any], tokenizer: Any, server: ServerManager, **multi_turn: Any) -> Any:
    """What AgentLoopWorker._run_agent_loop does: hydra.utils.instantiate(entry, ...), which
    passes the entry's keys (name included) with the worker's arguments."""
    kwargs = {k: v for k, v in entry.items() if k != "_target_"}
    call = INTERFACE["calls"]["agent_loop_config"]["instantiate_kwargs"]
    given = {"trainer_config": trainer_config(**multi_turn), "server_manager": server, "tokenizer": tokenizer,
             "processor": None, "dataset_cls": None, "dataset_config": SimpleNamespace(config={})}
    assert sorted(given) == sorted(call)
    return cls(**kwargs, **given)


def test_the_agent_loop_class_runs_as_verl_instantiates_it(tokenizer: Any) -> None:
    cls = envhub_verl.agent_loop_class(AgentLoopBase, AgentLoopOutput, ToolParser)
    assert issubclass(cls, AgentLoopBase)
    assert (cls.__module__, cls.__qualname__) == ("envhub.integrations.verl", "EnvhubAgentLoop")
    entry = {"name": "envhub", "_target_": "envhub.integrations.verl.EnvhubAgentLoop", "env": str(GRID),
             "trust_code": True}
    server = ServerManager(tokenizer, winner)
    loop = instantiate(cls, entry, tokenizer, server)
    env = envhub_verl.environment(str(GRID), trust_code=True)
    assert loop.envhub_loop.env is env  # loaded once per process: verl makes a loop per sample
    assert instantiate(cls, entry, tokenizer, server).envhub_loop.env is env
    out = asyncio.run(loop.run(SAMPLING, **row_for(env, env.tasks("dev")[1])))
    assert isinstance(out, AgentLoopOutput)
    assert out.reward_score == 1.0 and out.extra_fields["envhub_outcome"] == "win"


def test_the_agent_loop_class_refuses_what_it_cannot_run(tokenizer: Any) -> None:
    cls = envhub_verl.agent_loop_class(AgentLoopBase, AgentLoopOutput, ToolParser)
    server = ServerManager(tokenizer, winner)
    with pytest.raises(UsageError) as e:
        instantiate(cls, {"name": "grid", "_target_": "x"}, tokenizer, server)
    assert str(e.value) == ("the agent-loop config entry 'grid' (envhub.integrations.verl.EnvhubAgentLoop) has no env: "
                            "add env: <id, bundle directory or URL>")
    with pytest.raises(UsageError, match="multi_turn.format gpt-oss formats tool results outside the chat template"):
        instantiate(cls, {"name": "grid", "env": str(GRID), "trust_code": True}, tokenizer, server, format="gpt-oss")


def test_the_example_script_writes_what_verl_reads(tokenizer: Any, tmp_path: Path) -> None:
    import shlex
    import subprocess
    import sys

    import pyarrow.parquet as pq
    import yaml

    script = Path(__file__).resolve().parents[1] / "docs" / "examples" / "verl_grpo.py"
    result = subprocess.run([sys.executable, str(script), str(GRID), str(tmp_path / "run"), "--trust", "--limit", "3",
                             "trainer.total_epochs=1"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    command = shlex.split(result.stdout)
    assert command[1:3] == ["-m", "verl.trainer.main_ppo"] and command[-1] == "trainer.total_epochs=1"
    settings = dict(arg.split("=", 1) for arg in command[3:])
    entries = yaml.safe_load(Path(settings["actor_rollout_ref.rollout.agent.agent_loop_config_path"]).read_text())
    assert entries == [{"name": "envhub", "_target_": "envhub.integrations.verl.EnvhubAgentLoop", "env": str(GRID),
                        "trust_code": True}]
    rows = pq.read_table(settings["data.train_files"]).to_pylist()
    assert len(rows) == 3 and len(pq.read_table(settings["data.val_files"]).to_pylist()) == 3
    # The config entry, instantiated as verl's worker does, plays a row of the dataset.
    cls = envhub_verl.agent_loop_class(AgentLoopBase, AgentLoopOutput, ToolParser)
    loop = instantiate(cls, entries[0], tokenizer, ServerManager(tokenizer, winner))
    out = asyncio.run(loop.run(SAMPLING, raw_prompt=rows[0]["prompt"], extra_info=rows[0]["extra_info"], index=0))
    assert out.reward_score == 1.0


@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="verl is installed")
def test_without_verl_the_class_says_how_to_get_it() -> None:
    with pytest.raises(UsageError, match=r"envhub.integrations.verl.EnvhubAgentLoop needs verl: pip install verl"):
        envhub_verl.EnvhubAgentLoop  # noqa: B018
    with pytest.raises(AttributeError):
        envhub_verl.NoSuchThing  # noqa: B018


# --- with verl itself (opt-in: runs when verl is installed) -----------------------------------


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed (it needs torch and CUDA)")
def test_real_verl_interface_matches_the_record(grid: Environment, tokenizer: Any) -> None:  # pragma: no cover
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase as RealBase
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics as RealMetrics
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput as RealOutput
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.experimental.agent_loop.tool_parser import ToolParser as RealParser
    from verl.workers.rollout.replica import TokenOutput as RealTokenOutput

    cls = envhub_verl.EnvhubAgentLoop
    assert issubclass(cls, RealBase)
    assert _agent_loop_registry["envhub"] == {"_target_": "envhub.integrations.verl.EnvhubAgentLoop"}
    assert set(RealOutput.model_fields) == set(recorded_model("AgentLoopOutput"))
    assert set(RealMetrics.model_fields) == set(recorded_model("AgentLoopMetrics"))
    assert set(RealTokenOutput.model_fields) == set(recorded_model("TokenOutput"))

    class RealServer(ServerManager):
        async def generate(self, request_id: str, **kwargs: Any) -> Any:
            out = await super().generate(request_id, **kwargs)
            return RealTokenOutput(**out.model_dump())

    server = RealServer(tokenizer, winner)
    loop = envhub_verl.EpisodeLoop(grid, tokenizer=tokenizer, generate=server.generate,
                                   parse_tool_calls=RealParser.get_tool_parser("hermes", tokenizer).extract_tool_calls,
                                   response_length=4096)
    out = asyncio.run(loop.run(SAMPLING, **row_for(grid, grid.tasks("dev")[1])))
    real = RealOutput(**out.fields())
    assert real.reward_score == 1.0 and real.response_mask == out.response_mask

    # The class itself, made as AgentLoopWorker._run_agent_loop makes it (hydra.utils.instantiate).
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"response_length": 4096, "multi_turn": {
        "format": "hermes", "max_assistant_turns": None, "max_user_turns": None}}}, "data": {}})
    entry = OmegaConf.create({"name": "envhub", "_target_": "envhub.integrations.verl.EnvhubAgentLoop",
                              "env": str(GRID), "trust_code": True})
    server = RealServer(tokenizer, winner)
    agent_loop = hydra.utils.instantiate(config=entry, trainer_config=DictConfigWrap(config=config),
                                         server_manager=server, tokenizer=tokenizer, processor=None,
                                         dataset_cls=None, dataset_config=DictConfigWrap(config.data))
    env = envhub_verl.environment(str(GRID), trust_code=True)
    result = asyncio.run(agent_loop.run(SAMPLING, **row_for(env, env.tasks("dev")[1])))
    assert isinstance(result, RealOutput) and result.reward_score == 1.0
