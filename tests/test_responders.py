"""Multi-turn responders: ``async def`` ones are awaited (``astep``) or run to completion
(``step``), plain ones run in a worker thread under asyncio; one that raises is a per-task
problem of ``validate --check``, not an internal error."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import envhub
from tests.conftest import run_envhub
from tests.runtime_fixtures import scaffold

ASYNC_GAME = '''
import asyncio
import pathlib
import threading


async def respond(task, messages):
    await asyncio.sleep(0)  # a real await: a coroutine that is never awaited does not get past here
    guess = (messages[-1]["content"] or "").strip()
    if not guess.lstrip("-").isdigit():
        return "Please reply with just a whole number."
    secret = int(task["answer"])
    if int(guess) == secret:
        return None
    return "higher" if int(guess) < secret else "lower"
'''

SYNC_GAME = '''
import asyncio
import pathlib
import threading


def respond(task, messages):
    try:
        asyncio.get_running_loop()
        on_loop = True
    except RuntimeError:
        on_loop = False
    with open(pathlib.Path(__file__).parent / "calls.txt", "a") as f:  # the bundle's copy, under tmp_path
        f.write(f"{threading.get_ident()} {on_loop}\\n")
    guess = (messages[-1]["content"] or "").strip()
    return None if guess == str(task["answer"]) else "lower"
'''

RAISING_GAME = '''
def respond(task, messages):
    if task["id"].endswith("2"):
        raise KeyError("hint")
    return None
'''

WRONG_TYPE_GAME = '''
def respond(task, messages):
    return 42
'''


def _bundle(tmp_path: Path, game: str) -> Path:
    root = scaffold(tmp_path, protocol="multi-turn")
    (root / "demo" / "game.py").write_text(game, encoding="utf-8")
    return root


def _calls(tmp_path: Path) -> list[tuple[int, bool]]:
    (calls,) = tmp_path.rglob("calls.txt")
    return [(int(t), o == "True") for t, o in (line.split() for line in calls.read_text().splitlines())]


def _first_task(env: Any) -> Any:
    return next(iter(env.tasks("train")))


# --- async responders -------------------------------------------------------------------


def test_an_async_responder_is_run_to_completion_on_the_sync_path(tmp_path: Path) -> None:
    with envhub.load(_bundle(tmp_path, ASYNC_GAME), trust_code=True) as env:
        task = _first_task(env)
        with env.episode(task) as episode:
            episode.reset()
            first = episode.step("not a number")
            assert not first.done
            assert first.observation.messages[-1] == {"role": "user",
                                                      "content": "Please reply with just a whole number."}
            last = episode.step(str(task["answer"]))
    assert last.done and last.reward == 1.0 and "error" not in last.info


def test_an_async_responder_is_awaited_on_the_async_path(tmp_path: Path) -> None:
    async def play() -> tuple[Any, Any]:
        env = envhub.load(_bundle(tmp_path, ASYNC_GAME), trust_code=True)
        task = _first_task(env)
        async with env.episode(task) as episode:
            await episode.areset()
            first = await episode.astep("not a number")
            last = await episode.astep(str(task["answer"]))
        env.close()
        return first, last

    first, last = asyncio.run(play())
    assert first.observation.messages[-1]["content"] == "Please reply with just a whole number."
    assert last.done and last.reward == 1.0


def _eval(root: Path, out: Path, policy: str) -> list[dict[str, Any]]:
    result = run_envhub("eval", str(root), "--split", "train", "--limit", "2", "--policy", policy, "--trust",
                        "--output", str(out))
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_an_async_responder_through_envhub_eval(tmp_path: Path) -> None:
    root = _bundle(tmp_path, ASYNC_GAME)
    solved = _eval(root, tmp_path / "reference.jsonl", "reference")
    assert [(r["reward"], r["error"]) for r in solved] == [(1.0, None), (1.0, None)]
    # noop answers "" every turn: the responder's reply (awaited, a string) comes back each time
    idle = _eval(root, tmp_path / "noop.jsonl", "noop")
    for record in idle:
        assert record["error"] is None
        replies = [m["content"] for m in record["messages"] if m["role"] == "user"][1:]
        assert replies and set(replies) == {"Please reply with just a whole number."}


# --- plain responders under asyncio -------------------------------------------------------


def test_a_plain_responder_runs_in_a_worker_thread_under_asyncio(tmp_path: Path) -> None:
    import threading

    async def play() -> list[Any]:
        env = envhub.load(_bundle(tmp_path, SYNC_GAME), trust_code=True)
        task = _first_task(env)
        async with env.episode(task) as episode:
            await episode.areset()
            await episode.astep("not it")
            await episode.astep(str(task["answer"]))
        env.close()
        return _calls(tmp_path)

    calls = asyncio.run(play())
    assert len(calls) == 2
    assert all(thread != threading.get_ident() and not on_loop for thread, on_loop in calls)


def test_a_plain_responder_runs_in_the_callers_thread_on_the_sync_path(tmp_path: Path) -> None:
    # the positive control of the test above: the probe does tell the threads apart
    import threading

    with envhub.load(_bundle(tmp_path, SYNC_GAME), trust_code=True) as env:
        task = _first_task(env)
        with env.episode(task) as episode:
            episode.reset()
            episode.step(str(task["answer"]))
    assert _calls(tmp_path) == [(threading.get_ident(), False)]


def test_a_reply_that_is_not_a_string_names_the_responder(tmp_path: Path) -> None:
    env = envhub.load(_bundle(tmp_path, WRONG_TYPE_GAME), trust_code=True)
    with env, env.episode(_first_task(env)) as episode:
        episode.reset()
        with pytest.raises(TypeError,
                           match=r"^responder demo.game:respond returned int, not a string, a Reply or None"):
            episode.step("1")


# --- validate --check ---------------------------------------------------------------------


def test_check_reports_a_raising_responder_per_task(tmp_path: Path) -> None:
    root = _bundle(tmp_path, RAISING_GAME)
    result = run_envhub("validate", "--check", "--trust", str(root))
    assert result.code == 1, (result.out, result.err)
    assert "Traceback" not in result.err and "internal error" not in result.err
    output = result.out + result.err
    raised = [line for line in output.splitlines() if "the responder" in line and "raised" in line]
    assert raised, output
    assert all("raised KeyError: 'hint'" in line and "demo.game:respond" in line for line in raised)
    assert any("envhub.toml" in line for line in raised)
    assert "fix the responder" in output
    # only the tasks whose id ends in 2 raise; the others are still checked and pass
    ids = [json.loads(line)["id"] for split in ("train", "dev", "test") for line in
           (root / "tasks" / f"{split}.jsonl").read_text().splitlines()]
    assert len(raised) == sum(1 for i in ids if i.endswith("2"))


def test_check_passes_the_same_bundle_with_a_responder_that_does_not_raise(tmp_path: Path) -> None:
    root = _bundle(tmp_path, RAISING_GAME.replace('raise KeyError("hint")', "return None"))
    result = run_envhub("validate", "--check", "--trust", str(root))
    assert result.code == 0, (result.out, result.err)
