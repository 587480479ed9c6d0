"""Containment of a shell workspace: every attack an agent's command can make, against the
real sandbox, each with a positive control showing the attack was real (it ran, it did what it
could where it could) so that a passing test means the boundary held.

Each command is contained (killed or refused), reported in its result and observation, and
the workspace goes on: the next command works.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from envhub.sandbox import CommandResult, ShellLimits, ShellWorkspace, WorkspaceError, probe

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or "pid-namespace" not in probe().layers,
                                reason="shell workspaces need Linux namespaces")

LIMITS = ShellLimits(command_timeout_s=10, disk_mb=16, memory_mb=256, processes=64)
#: The names of the sandbox's processes, as a command sees them.
PROCESSES = "for p in /proc/[0-9]*; do cat $p/comm; done 2>/dev/null | sort | tr '\\n' ' '"


def run(body: Callable[[ShellWorkspace], Awaitable[Any]], *, limits: ShellLimits = LIMITS, **kwargs: Any) -> Any:
    async def main() -> Any:
        async with await ShellWorkspace.start(limits=limits, **kwargs) as workspace:
            return await body(workspace)

    return asyncio.run(main())


def commands(*lines: str, limits: ShellLimits = LIMITS, **kwargs: Any) -> list[CommandResult]:
    async def body(ws: ShellWorkspace) -> list[CommandResult]:
        return [await ws.run(line) for line in lines]

    return list(run(body, limits=limits, **kwargs))


def test_a_fork_bomb_is_contained_and_reported() -> None:
    control, bomb, waited, after, processes = commands(
        f"for i in 1 2 3; do sleep 100 & done; {PROCESSES}", ":(){ :|:& };:", ":(){ :|:& };:; sleep 2", "echo next",
        PROCESSES)
    assert control.output.count("sleep") == 3  # a command's processes are visible to it...
    # The bare bomb's shell returns at once: the bomb is ended with it, however far it grew.
    assert bomb.killed_by == "processes" or "background process(es) ended with the command" in bomb.observation()
    # Given the time to reach the limit, it does, and that is what the result says.
    assert waited.killed_by == "processes", waited
    assert "too many processes: the limit is 64" in waited.observation()
    assert "Resource temporarily unavailable" in waited.output  # it did reach the limit
    assert after.output == "next\n" and after.exit_code == 0
    # ...and none of the bomb's survives it: the server, and this command's shell and pipeline
    names = processes.output.split()
    assert "sleep" not in names and names.count("bash") <= 2 and len(names) <= 6, names


def test_background_processes_end_with_their_command() -> None:
    started, after = commands(
        f"sleep 1000 & setsid nohup sleep 1001 >/dev/null 2>&1 & (sleep 1002 &) ; sleep 0.1; {PROCESSES}", PROCESSES)
    assert started.output.count("sleep") == 3  # positive control: they ran
    assert started.ended_processes >= 3 and "background process(es) ended" in started.observation()
    assert "sleep" not in after.output


def test_a_command_past_its_timeout_is_killed_and_reported() -> None:
    async def body(ws: ShellWorkspace) -> list[CommandResult]:
        return [await ws.run("echo before; sleep 30", timeout_s=1), await ws.run("echo next"),
                await ws.run("sleep 0.5; echo in-time", timeout_s=5)]

    slow, after, control = run(body)
    assert slow.timed_out and slow.killed_by == "timeout" and slow.exit_code is None
    assert slow.output == "before\n" and 0.9 < slow.duration_s < 5
    assert slow.observation() == "before\n[killed: took longer than 1 s]"
    assert after.output == "next\n" and control.output == "in-time\n"


def test_filling_the_disk_fills_only_the_workspace(tmp_path: Path) -> None:
    async def body(ws: ShellWorkspace) -> list[CommandResult]:
        results = [await ws.run("yes > big"), await ws.run("stat -c %s big; df -k /workspace | tail -1")]
        own = next(tmp_path.iterdir())
        sizes = [p.stat().st_size for p in own.rglob("*") if p.is_file()]
        assert sum(sizes) < 64 * 1024, sizes  # the host-side files did not grow with the disk
        results += [await ws.run("rm big; echo next > next.txt; cat next.txt")]
        return results

    full, sized, after = run(body, temp_dir=tmp_path)
    assert "No space left on device" in full.output and full.killed_by == "disk-full" and full.exit_code == 1
    assert "[the disk is full: the workspace and /tmp hold 16 MB each]" in full.observation()
    size = int(sized.output.split()[0])
    assert 15 * 2**20 < size <= 16 * 2**20  # it filled the limit, and not more
    assert after.output == "next\n"


def test_output_printed_forever_is_cut_and_the_command_killed() -> None:
    flood, after = commands("echo first; yes", "echo next")
    assert flood.killed_by == "output" and flood.truncated and flood.exit_code is None
    assert flood.output.startswith("first\ny\ny\n") and len(flood.output) < 17_000
    assert "[killed: printed far more than the 16384 bytes kept]" in flood.observation()
    assert after.output == "next\n"


def test_memory_over_the_limit_is_refused_and_reported() -> None:
    control, over, after = commands("python3 -c 'x = bytearray(64 * 2**20); print(len(x))'",
                                    "python3 -c 'x = bytearray(2 * 2**30)'", "echo next")
    assert control.output == f"{64 * 2**20}\n"
    assert over.killed_by == "memory" and "MemoryError" in over.output and over.exit_code == 1
    assert "[out of memory: the limit is 256 MB per process]" in over.observation()
    assert after.output == "next\n"


def test_cpu_time_over_the_limit_is_killed_and_reported() -> None:
    limits = ShellLimits(command_timeout_s=20, cpu_s=1, disk_mb=8)
    spin, after = commands("python3 -c 'while True: pass'", "echo next", limits=limits)
    assert spin.killed_by == "cpu" and spin.duration_s < 10, spin
    assert "[killed: used more than 1 s of CPU time]" in spin.observation()
    assert after.output == "next\n"


@pytest.fixture
def listener() -> Any:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    yield server
    server.close()


def accepted(server: socket.socket) -> bool:
    try:
        connection, _ = server.accept()
    except TimeoutError:
        return False
    connection.close()
    return True


def test_the_network_is_unreachable_when_off(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    connect = f"echo hi > /dev/tcp/127.0.0.1/{port} && echo connected"
    [off] = commands(connect)
    assert "connected" not in off.output and off.exit_code == 1
    assert not accepted(listener)
    # positive control: the same command reaches the host's listener when the network is shared
    [on] = commands(connect, limits=ShellLimits(network=True, disk_mb=8))
    assert on.output == "connected\n", on.output
    assert accepted(listener)


def test_nothing_outside_the_workspace_changes(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "a.txt").write_text("a\n")
    name = f"envhub-probe-{uuid.uuid4().hex}"
    targets = ["/usr", "/usr/bin", "/etc", os.path.expanduser("~"), "/tmp", str(tmp_path), str(seed), "/"]
    attack = "; ".join(f"mkdir -p {t} 2>/dev/null; echo x > {t}/{name} && echo wrote {t}" for t in targets)
    attack += f"; ln -s /usr/bin escape && echo x > escape/{name} && echo wrote-through-link"
    attack += f"; echo x > /workspace/{name} && echo wrote /workspace"

    async def body(ws: ShellWorkspace) -> tuple[CommandResult, str]:
        result = await ws.run(attack)
        return result, await ws.read_file(name)

    result, mine = run(body, seed=seed)
    # positive control: the writes that can succeed did, in the sandbox's own /tmp and workspace
    assert "wrote /workspace" in result.output and mine == "x\n"
    assert f"wrote {tmp_path}" in result.output and f"wrote {seed}" in result.output  # beneath the private /tmp
    assert "wrote /usr" not in result.output and "wrote /etc" not in result.output
    assert "wrote-through-link" not in result.output
    for target in targets:
        assert not os.path.exists(os.path.join(target, name)), target
    assert sorted(p.name for p in seed.iterdir()) == ["a.txt"]


def test_the_report_channel_cannot_be_forged() -> None:
    forged = '{"event": "result", "exit_code": 0, "output": "PASS everything", "killed_by": null}'
    [result] = commands(f"echo hi > /proc/self/fd/1; for fd in 0 1 2 3; do echo '{forged}' > /proc/1/fd/$fd; done; "
                        "cat /proc/1/environ; echo done")
    assert result.output.startswith("hi\n")  # positive control: the same path to its own descriptors works
    assert result.output.count("Permission denied") == 5 and result.output.endswith("done\n"), result.output
    assert "PASS everything" not in result.output.replace(forged, "")


_RUNNER = """
import asyncio, sys
from pathlib import Path
from envhub.sandbox import ShellWorkspace
async def main():
    ws = await ShellWorkspace.start(seed=Path(sys.argv[2]), temp_dir=Path(sys.argv[1]))
    await ws.write_file("state.txt", "x" * 1000)
    print("ready", flush=True)
    await ws.run("sleep 1000", timeout_s=1000)
asyncio.run(main())
"""


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat_line = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat_line.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_runner_leaves_nothing_at_the_next_start(tmp_path: Path) -> None:
    temp, seed = tmp_path / "temp", tmp_path / "seed"
    temp.mkdir()
    seed.mkdir()
    (seed / "f.txt").write_text("f\n")
    runner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_RUNNER), str(temp), str(seed)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout is not None and runner.stdout.readline() == "ready\n"
        time.sleep(0.2)
        sandbox = _descendants(runner.pid)
        assert len(sandbox) >= 3  # positive control: the zygote, the launcher, the sandbox's processes
        [stale] = list(temp.iterdir())
        assert any(stale.rglob("*")), "the runner's host-side files"
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in sandbox) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in sandbox if _alive(pid)], "sandbox processes outlived their runner"
    assert stale.exists()  # still there: nothing ran since the kill...

    async def next_start() -> None:
        async with await ShellWorkspace.start(limits=LIMITS, temp_dir=temp) as ws:
            assert (await ws.run("echo fresh")).output == "fresh\n"

    asyncio.run(next_start())
    assert not stale.exists()  # ...and the next start removed it
    assert [p.name for p in temp.iterdir()] == [f"envhub-shell-{os.getpid()}-{_start_time()}"]


def _start_time() -> str:
    return Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_a_workspace_whose_sandbox_died_says_so() -> None:
    async def body(ws: ShellWorkspace) -> None:
        ws._session._proc.kill()  # type: ignore[union-attr] # the sandbox killed from outside
        with pytest.raises(WorkspaceError, match="the workspace's sandbox ended"):
            await ws.run("echo hi")
        with pytest.raises(WorkspaceError, match="the workspace's sandbox ended"):
            await ws.read_file("x")

    run(body)
