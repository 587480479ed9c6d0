"""State kind ``sandbox`` and its built-in tools, end to end: a small bundle in tmp_path loaded
with ``envhub.load``, episodes played with bash and file tool calls as an agent sends them
(sync and async), the workspace built from snapshot + task directory + files field + setup,
failures reported, faults contained, nothing outside the workspace touched."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import BundleError
from envhub.runtime import SandboxSetupError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's")

MANIFEST = """\
[environment]
name = "test/terminal"
version = "1.0.0"
description = "terminal tasks for tests"

[tasks]
splits.train = {{ path = "tasks/train.jsonl" }}

[harness]
protocol = "tool-use"
max-turns = 8
builtin-tools = ["bash", "read_file", "write_file", "edit_file", "list_files"]

[state]
kind = "sandbox"
snapshot = "workspace"
task-directory = "tasks/{{id}}"
files-field = "files"
setup = "mkdir -p out"
setup-field = "setup"
{state_extra}
[state.limits]
command-timeout-s = {timeout}
output-kb = 4

[verifier]
kind = "workspace-tests"
timeout-s = 30
"""

RUNNER = """\
#!/bin/bash
# Runs every /tests/t_*.sh with its output captured; one PASS/FAIL line each.
for t in /tests/t_*.sh; do
  name=$(basename "$t" .sh)
  if bash "$t" >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
done
"""

TASKS: list[dict[str, Any]] = [
    {"id": "greeting", "prompt": "Create hello.txt containing the line 'hello world'.",
     "files": {}, "setup": "", "solution": ["echo 'hello world' > hello.txt"]},
    {"id": "fix-add", "prompt": "add.sh should print the sum of its two arguments; fix it.",
     "files": {}, "setup": "", "solution": ["sed -i 's/-/+/' add.sh"]},
    {"id": "max", "prompt": "Write the largest number of data/input.txt to max.txt.",
     "files": {"data/input.txt": "3\n10\n2\n"}, "setup": "sort -n data/input.txt > data/sorted.txt",
     "solution": ["cd data", "tail -n 1 sorted.txt > ../max.txt"]},
]

TESTS = {
    "greeting": {"t_exists.sh": "test -f /workspace/hello.txt\n",
                 "t_content.sh": "grep -qx 'hello world' /workspace/hello.txt\n"},
    "fix-add": {"t_add.sh": '[ "$(bash /workspace/add.sh 2 3)" = 5 ]\n',
                "t_zero.sh": '[ "$(bash /workspace/add.sh 0 0)" = 0 ]\n'},
    "max": {"t_max.sh": "grep -qx 10 /workspace/max.txt\n",
            "t_setup_ran.sh": "test -f /workspace/data/sorted.txt && test -d /workspace/out\n"},
}


def make_bundle(root: Path, *, tasks: list[dict[str, Any]] | None = None, timeout: float = 10,
                state_extra: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "envhub.toml").write_text(MANIFEST.format(timeout=timeout, state_extra=state_extra))
    (root / "tasks").mkdir()
    tasks = TASKS if tasks is None else tasks
    (root / "tasks" / "train.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (root / "workspace").mkdir()
    (root / "workspace" / "README").write_text("the shared starting tree\n")
    for task_id in {t["id"] for t in tasks} | {"fix-add"}:
        (root / "tasks" / task_id).mkdir(exist_ok=True)
    (root / "tasks" / "fix-add" / "add.sh").write_text('echo $(( $1 - $2 ))\n')
    (root / "tests").mkdir()
    (root / "tests" / "run-tests.sh").write_text(RUNNER)
    for task_id, files in TESTS.items():
        (root / "tests" / task_id).mkdir()
        for name, text in files.items():
            (root / "tests" / task_id / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bundle(tmp_path_factory.mktemp("sandbox") / "terminal")


@pytest.fixture(scope="module")
def env(bundle: Path) -> Any:
    with envhub.load(bundle, trust_code=True) as loaded:
        yield loaded


def call(name: str, i: int = 0, **arguments: Any) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def turn(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def bash(command: str, i: int = 0) -> dict[str, Any]:
    return turn(call("bash", i, command=command))


def play(env: Any, task_id: str, actions: list[Any]) -> tuple[Any, list[str]]:
    """Play ``actions`` (then a final message) through the sync API; (score, tool outputs)."""
    outputs: list[str] = []
    with env.episode(env.task("train", task_id)) as episode:
        episode.reset()
        for action in [*actions, "done"]:
            result = episode.step(action)
            outputs.extend(result.info.get("tool_results", []))
            if result.done:
                return episode.score, outputs
    raise AssertionError("the episode did not end")


# --- the workspace and the tools ------------------------------------------------------------


def test_the_tools_are_offered_with_schemas_from_their_signatures(env: Any) -> None:
    names = [spec["function"]["name"] for spec in env.tool_specs]
    assert names == ["bash", "read_file", "write_file", "edit_file", "list_files"]
    bash_spec = env.tool_specs[0]["function"]
    assert bash_spec["parameters"]["required"] == ["command"]
    assert "state" not in bash_spec["parameters"]["properties"]
    assert env.tool_specs[3]["function"]["parameters"]["required"] == ["path", "old", "new"]


def test_the_workspace_is_snapshot_task_directory_files_and_setup(env: Any) -> None:
    _, outputs = play(env, "max", [
        bash("ls -a; cat README; cat data/input.txt; ls out data"),
        turn(call("read_file", 1, path="data/sorted.txt")),
        turn(call("list_files", 2)),
    ])
    listing, sorted_text, files = outputs
    assert "the shared starting tree" in listing and "3\n10\n2" in listing
    assert "tests" not in listing.split()  # the tests are nowhere in the workspace
    assert sorted_text.split() == ["2", "3", "10"]  # the task's setup-field ran after the files were written
    assert "out/" in files.split() and "data/input.txt" in files.split()


def test_the_shell_keeps_its_directory_and_variables_between_commands(env: Any) -> None:
    _, outputs = play(env, "greeting", [bash("mkdir -p a/b && cd a/b && export GREETING=hi"),
                                        bash("pwd; echo $GREETING", 1)])
    assert outputs[1].splitlines()[:2] == ["/workspace/a/b", "hi"]


def test_file_tools_write_edit_and_report_errors_as_output(env: Any) -> None:
    _, outputs = play(env, "greeting", [
        turn(call("write_file", 0, path="src/x.py", content="x = 1\n")),
        turn(call("edit_file", 1, path="src/x.py", old="x = 1", new="x = 2")),
        turn(call("read_file", 2, path="src/x.py")),
        turn(call("edit_file", 3, path="src/x.py", old="nope", new="y")),
        turn(call("read_file", 4, path="missing.txt")),
        turn(call("bash", 5)),  # no command: the tool's arguments are refused, not raised
    ])
    assert outputs[0].startswith("Wrote 6 bytes")
    assert outputs[2] == "x = 2\n"
    assert outputs[3].startswith("Error:") and outputs[4].startswith("Error:")
    assert outputs[5].startswith("Error: invalid arguments for bash")


def test_each_episode_starts_from_a_fresh_workspace(env: Any) -> None:
    play(env, "greeting", [bash("echo left > leftover.txt")])
    _, outputs = play(env, "greeting", [bash("ls")])
    assert "leftover.txt" not in outputs[0]


def test_the_async_api_plays_on_the_callers_loop(env: Any) -> None:
    async def main() -> float:
        async with env.episode(env.task("train", "greeting")) as episode:
            await episode.areset()
            await episode.astep(bash("echo 'hello world' > hello.txt"))
            result = await episode.astep("done")
            assert result.done
            return result.reward  # type: ignore[no-any-return]

    assert asyncio.run(main()) == 1.0


# --- faults are contained and reported; the episode goes on ----------------------------------


def test_overlong_commands_are_killed_and_the_episode_goes_on(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", timeout=1)
    with envhub.load(root, trust_code=True) as env:
        _, outputs = play(env, "greeting", [bash("sleep 30"), bash("echo still here", 1)])
    assert "killed" in outputs[0] and "1 s" in outputs[0]
    assert outputs[1].startswith("still here")


def test_output_is_capped(env: Any) -> None:
    _, outputs = play(env, "greeting", [bash("yes 0123456789 | head -c 100000")])
    assert len(outputs[0]) < 8000


def test_a_fork_bomb_and_a_full_disk_are_contained_and_the_episode_goes_on(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", timeout=5)
    text = (root / "envhub.toml").read_text().replace("output-kb = 4", "output-kb = 4\nprocesses = 32\ndisk-mb = 8")
    (root / "envhub.toml").write_text(text)
    with envhub.load(root, trust_code=True) as env:
        _, outputs = play(env, "greeting", [
            bash("bomb() { bomb | bomb & }; bomb; sleep 1; echo after"),
            bash("head -c 20000000 /dev/zero > big; echo wrote $?", 1),
            bash("rm -f big; echo 'hello world' > hello.txt; cat hello.txt", 2),
        ])
    # Contained either way: reported at the process limit, or (bash retrying its forks with a
    # backoff) killed at the command's time limit once it has hit the process limit.
    assert ("[too many processes: the limit is 32; every process the command left was ended]" in outputs[0]
            or ("Resource temporarily unavailable" in outputs[0] and "[killed: took longer than 5 s]" in outputs[0]))
    assert "No space left on device" in outputs[1] and "[the disk is full" in outputs[1]
    assert outputs[2].startswith("hello world")


def test_nothing_outside_the_workspace_changes(env: Any, tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    _, outputs = play(env, "greeting", [bash(f"echo x > {target}; echo x > /etc/escape; echo x > /usr/escape")])
    assert not target.exists() and not Path("/etc/escape").exists() and not Path("/usr/escape").exists()
    target.write_text("the test process itself can write here")  # positive control: the path is writable
    assert target.exists()


@pytest.mark.parametrize("network", [False, True], ids=["off-by-default", "control-on"])
def test_network_is_off_unless_the_manifest_turns_it_on(tmp_path: Path, network: bool) -> None:
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    root = make_bundle(tmp_path / "b", state_extra="network = true\n" if network else "")
    try:
        with envhub.load(root, trust_code=True) as env:
            _, outputs = play(env, "greeting", [bash(f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && "
                                                     "echo connected || echo refused")])
    finally:
        server.close()
    assert outputs[0].split()[0] == ("connected" if network else "refused")


# --- setup that fails, bad bundles ---------------------------------------------------------


def test_a_failing_setup_command_is_the_environments_error(tmp_path: Path) -> None:
    tasks = [{**TASKS[0], "setup": "echo cannot build >&2; exit 3"}]
    root = make_bundle(tmp_path / "b", tasks=tasks)
    with envhub.load(root, trust_code=True) as env, env.episode(env.task("train", "greeting")) as episode, \
            pytest.raises(SandboxSetupError) as e:
        episode.reset()
    assert "task 'greeting': the setup command of task field 'setup' failed" in e.value.message
    assert "cannot build" in e.value.message and "3" in e.value.message


def test_a_task_without_its_directory_is_an_error(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    (root / "tasks" / "greeting").rmdir()
    with envhub.load(root, trust_code=True) as env, env.episode(env.task("train", "greeting")) as episode, \
            pytest.raises(SandboxSetupError, match="its task directory tasks/greeting is not a directory"):
        episode.reset()


def test_a_bundle_tool_may_not_hide_a_builtin_one(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    (root / "tools.py").write_text("def bash(command: str) -> str:\n    return 'fake'\n")
    text = (root / "envhub.toml").read_text().replace('builtin-tools = [', 'tools = ["tools:bash"]\nbuiltin-tools = [')
    (root / "envhub.toml").write_text(text)
    with pytest.raises(BundleError, match="tool tools:bash is named 'bash', like the built-in tool it would hide"):
        envhub.load(root, trust_code=True)


def test_the_bundles_own_tools_receive_the_workspace(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    (root / "tools.py").write_text(textwrap.dedent("""\
        async def count_files(state) -> str:
            \"\"\"How many files the workspace has.\"\"\"
            return str(len([e for e in await state.list_files(".", depth=1) if not e.endswith("/")]))
    """))
    text = (root / "envhub.toml").read_text().replace('builtin-tools = [', 'tools = ["tools:count_files"]\n'
                                                                          'builtin-tools = [')
    (root / "envhub.toml").write_text(text)
    with envhub.load(root, trust_code=True) as env:
        _, outputs = play(env, "greeting", [turn(call("count_files"))])
    assert outputs == ["1"]  # README


def test_check_notices_a_workspace_that_outlives_its_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envhub.runtime import SandboxStateFactory, StateHandle, self_test

    root = make_bundle(tmp_path / "b", tasks=TASKS[:1])
    with envhub.load(root, trust_code=True) as env:
        assert [p.code for p in self_test(env).problems] == []
        # The control: a factory that hands every episode the same workspace is caught.
        kept: list[StateHandle] = []
        make = SandboxStateFactory.new

        def shared(self: SandboxStateFactory, task: Any) -> StateHandle:
            if not kept:
                kept.append(make(self, task))
            return StateHandle(kept[0].value, loop=kept[0].loop)

        monkeypatch.setattr(SandboxStateFactory, "new", shared)
        try:
            problems = self_test(env).problems
        finally:
            kept[0].release()
    assert "check-reset" in [p.code for p in problems]
