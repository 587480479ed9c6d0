"""The ``processes`` executor: one run's rollouts over worker processes give the records the
local executor gives, really use the processes, resume, report a killed worker and leave no
process behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub._evaluate import prepare_evaluation
from envhub.context import Context
from envhub.errors import UsageError
from envhub.runtime import RolloutRecord, WorkerError, read_records
from tests.conftest import ENVHUB, run_envhub
from tests.runtime_fixtures import scaffold

ARITH = Path(__file__).parent.parent / "example_envs" / "arith-word-problems"

#: A policy that notes the process it runs in (a file per pid under $PIDS_DIR) and answers
#: after $POLICY_DELAY seconds.
PID_POLICY = '''
import asyncio, os
from pathlib import Path

async def act(messages):
    Path(os.environ["PIDS_DIR"], str(os.getpid())).touch()
    await asyncio.sleep(float(os.environ.get("POLICY_DELAY", "0")))
    return "42"
'''


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context.create(autoload=False, cwd=tmp_path)


@pytest.fixture
def pid_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """The spec of :data:`PID_POLICY` and the directory its pids go to."""
    path = tmp_path / "pid_policy.py"
    path.write_text(PID_POLICY)
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("PIDS_DIR", str(pids))
    return f"python:{path}:act", pids


def _same(record: RolloutRecord) -> dict[str, Any]:
    """A record without what differs between two runs of the same rollout (its timing)."""
    return record.model_dump(mode="json", exclude={"timing"})


def _by_rollout(records: list[RolloutRecord]) -> list[dict[str, Any]]:
    return [_same(r) for r in sorted(records, key=lambda r: (r.task_id, r.rollout))]


def _pids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.iterdir()}


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.parametrize(("root", "split", "k", "trust"), [
    pytest.param(ARITH, "dev", 2, False, id="arith-word-problems"),
    pytest.param(None, "dev", 3, True, id="tool-use-sqlite"),
])
def test_same_records_as_the_local_executor(tmp_path: Path, context: Context, root: Path | None, split: str, k: int,
                                            trust: bool) -> None:
    if root is None:
        root = scaffold(tmp_path, protocol="tool-use", state="sqlite")
    local = envhub.evaluate(root, "reference", split=split, k=k, seed=7, output=tmp_path / "local.jsonl",
                            context=context, trust_code=trust)
    processes = envhub.evaluate(root, "reference", split=split, k=k, seed=7, output=tmp_path / "processes.jsonl",
                                executor="processes", jobs=2, context=context, trust_code=trust)

    assert processes.ran == local.ran > 2
    assert _by_rollout(processes.records) == _by_rollout(local.records)
    assert processes.summary == local.summary
    assert processes.summary.mean_reward == 1.0
    assert len({(r.task_id, r.rollout) for r in processes.records}) == processes.ran


def test_two_jobs_run_in_two_worker_processes(tmp_path: Path, context: Context,
                                              pid_policy: tuple[str, Path]) -> None:
    spec, pids = pid_policy
    result = envhub.evaluate(ARITH, spec, split="dev", n=8, output=tmp_path / "out.jsonl", executor="processes",
                             jobs=2, concurrency=2, context=context)
    assert result.ran == 8
    seen = _pids(pids)
    assert len(seen) == 2 and os.getpid() not in seen
    assert not any(_alive(pid) for pid in seen)  # stopped and reaped when the run ended
    # Positive control: the local executor runs the same policy in this process only.
    for p in pids.iterdir():
        p.unlink()
    envhub.evaluate(ARITH, spec, split="dev", n=8, output=tmp_path / "local.jsonl", context=context)
    assert _pids(pids) == {os.getpid()}


def test_resume_plays_only_the_missing_rollouts(tmp_path: Path, context: Context,
                                                pid_policy: tuple[str, Path]) -> None:
    out = tmp_path / "out.jsonl"
    full = envhub.evaluate(ARITH, "reference", split="dev", k=2, seed=1, output=tmp_path / "full.jsonl",
                           context=context)
    lines = (tmp_path / "full.jsonl").read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][:40])  # three records and a torn one, as a killed run leaves

    resumed = envhub.evaluate(ARITH, "reference", split="dev", k=2, seed=1, output=out, resume=True,
                              executor="processes", jobs=2, context=context)
    assert (resumed.skipped, resumed.ran) == (3, full.ran - 3)
    assert _by_rollout(read_records(out)) == _by_rollout(full.records)


def test_a_killed_worker_is_named_and_the_file_resumes(tmp_path: Path, context: Context,
                                                       pid_policy: tuple[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    spec, pids = pid_policy
    monkeypatch.setenv("POLICY_DELAY", "0.2")
    out = tmp_path / "out.jsonl"
    killed: list[int] = []

    def kill_one(record: RolloutRecord) -> None:
        if killed:
            return
        deadline = time.monotonic() + 10
        while len(_pids(pids)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        victim = max(_pids(pids))
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)

    with pytest.raises(WorkerError) as exc:
        envhub.evaluate(ARITH, spec, split="dev", n=12, output=out, executor="processes", jobs=2, concurrency=2,
                        context=context, on_record=kill_one)
    [victim] = killed
    assert exc.value.message.endswith(f"(pid {victim}) was killed by signal 9 before its rollouts finished")
    assert exc.value.message.startswith("worker ")
    assert exc.value.hint == ("the rollouts that finished are in the records file; run again with --resume to play "
                              "the missing ones")
    assert not any(_alive(pid) for pid in _pids(pids))  # the other worker was stopped too
    written = read_records(out, repair=True)
    assert 1 <= len(written) < 12
    assert len({r.task_id for r in written}) == len(written)

    monkeypatch.setenv("POLICY_DELAY", "0")
    resumed = envhub.evaluate(ARITH, spec, split="dev", n=12, output=out, resume=True, executor="processes",
                              jobs=2, context=context)
    assert (resumed.skipped, resumed.ran) == (len(written), 12 - len(written))
    records = read_records(out)
    assert len(records) == 12 and len({r.task_id for r in records}) == 12


def test_cancelling_the_run_stops_every_worker(tmp_path: Path, context: Context,
                                               pid_policy: tuple[str, Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    spec, pids = pid_policy
    monkeypatch.setenv("POLICY_DELAY", "0.5")
    evaluation = prepare_evaluation(ARITH, spec, split="dev", n=20, output=tmp_path / "out.jsonl",
                                    executor="processes", jobs=2, concurrency=4, context=context)

    async def cancel_after_first_record() -> None:
        first = asyncio.Event()
        task = asyncio.create_task(evaluation.run(lambda record: first.set()))
        await asyncio.wait_for(first.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_after_first_record())
    evaluation.close()
    seen = _pids(pids)
    assert len(seen) == 2
    assert not any(_alive(pid) for pid in seen)
    assert 1 <= len(read_records(tmp_path / "out.jsonl")) < 20


def test_the_installed_command_with_two_jobs(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = run_envhub("eval", str(ARITH), "-s", "dev", "-k", "2", "--executor", "processes", "-j", "2",
                        "-o", str(out), "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["ran"], summary["mean_reward"], summary["errors"]) == (len(read_records(out)), 1.0, 0)
    assert summary["ran"] > 2


def test_ctrl_c_stops_the_workers(tmp_path: Path, pid_policy: tuple[str, Path]) -> None:
    spec, pids = pid_policy
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([ENVHUB, "eval", str(ARITH), "-s", "dev", "-p", spec, "--executor", "processes",
                             "-j", "2", "-c", "2", "-o", str(out)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "POLICY_DELAY": "0.3"},
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while (not out.exists() or not out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted; the rollouts that finished are in" in err and "--resume" in err
    assert "Traceback" not in err
    seen = _pids(pids)
    assert len(seen) == 2
    assert not any(_alive(pid) for pid in seen)


def test_a_worker_that_fails_to_load_is_named(tmp_path: Path, context: Context) -> None:
    # The policy loads in the driver but raises in a worker process.
    path = tmp_path / "fussy.py"
    # Any process but this one (the driver) is a worker. (Not "sys.argv[0] == '-c'": pytest-xdist
    # runs the tests themselves in python -c processes.)
    path.write_text("import os\n"
                    f"if os.getpid() != {os.getpid()}:  # a worker process\n"
                    "    raise ImportError('not in a worker')\n"
                    "def act(messages):\n    return '1'\n")
    with pytest.raises(WorkerError) as exc:
        envhub.evaluate(ARITH, f"python:{path}:act", split="dev", output=tmp_path / "out.jsonl",
                        executor="processes", jobs=2, context=context)
    assert exc.value.message.startswith("worker ")
    assert "failed: " in exc.value.message and "not in a worker" in exc.value.message


def test_policy_objects_and_jobs_without_workers_are_refused(tmp_path: Path, context: Context) -> None:
    from envhub.runtime.policies import make_policy

    policy = make_policy("reference", settings=context.settings, plugins=context.plugins)
    with pytest.raises(UsageError) as exc:
        envhub.evaluate(ARITH, policy, split="dev", executor="processes", context=context)
    assert exc.value.message == ("executor 'processes' rebuilds the policy in each worker process, so it needs a "
                                 "policy spec, not a ReferencePolicy object")
    assert exc.value.hint == ("name the policy by its spec ('python:MODULE:FUNC' for your own function, "
                              "'openai:MODEL'), or use executor='local'")
    env = envhub.load(ARITH, context=context)
    try:
        with pytest.raises(UsageError, match="needs the environment's id, directory or URL, not a loaded"):
            envhub.evaluate(env, "reference", split="dev", executor="processes", context=context)
        # Positive control: the local executor takes both objects.
        assert envhub.evaluate(env, policy, split="dev", n=2, context=context).ran == 2
    finally:
        env.close()
    with pytest.raises(UsageError) as exc:
        envhub.evaluate(ARITH, "reference", split="dev", jobs=2, context=context)
    assert exc.value.message == "-j/--jobs applies to an executor with worker processes; executor 'local' has none"


def test_the_processes_executor_is_listed() -> None:
    result = subprocess.run([sys.executable, "-m", "envhub", "eval", "--help"], capture_output=True, text=True)
    assert "--jobs" in result.stdout and "processes" in result.stdout


def test_workers_of_a_killed_driver_exit_on_their_own(tmp_path: Path, pid_policy: tuple[str, Path]) -> None:
    spec, pids = pid_policy
    proc = subprocess.Popen([ENVHUB, "eval", str(ARITH), "-s", "dev", "-p", spec, "--executor", "processes",
                             "-j", "2", "-c", "2", "-o", str(tmp_path / "out.jsonl")], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "POLICY_DELAY": "0.3"})
    deadline = time.monotonic() + 60
    while len(_pids(pids)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()  # SIGKILL: the driver cannot stop its workers
    proc.wait()
    seen = _pids(pids)
    assert len(seen) == 2
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in seen)


def test_a_script_without_a_main_guard(tmp_path: Path) -> None:
    # Workers are started, not forked, and do not re-run the caller's __main__.
    script = tmp_path / "run.py"
    script.write_text("import envhub\n"
                      f"result = envhub.evaluate({str(ARITH)!r}, 'reference', split='dev', executor='processes', "
                      "jobs=2)\n"
                      "print(result.ran, result.summary.mean_reward)\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ran, reward = done.stdout.split()
    assert int(ran) > 2 and float(reward) == 1.0
    assert done.stdout.count("\n") == 1  # printed once: no worker ran the script again


def test_an_id_from_a_registry_is_pulled_by_each_worker(tmp_path: Path, context: Context, envhub_cli) -> None:
    registry = tmp_path / "registry"
    pushed = envhub_cli("push", str(ARITH), "--registry", str(registry), "--json")
    assert pushed.code == 0, pushed.err
    ref = f"{json.loads(pushed.out)['name']}@{json.loads(pushed.out)['version']}"
    local = envhub.evaluate(ref, "reference", split="dev", output=tmp_path / "local.jsonl", registry=str(registry),
                            context=context)
    processes = envhub.evaluate(ref, "reference", split="dev", output=tmp_path / "processes.jsonl",
                                registry=str(registry), executor="processes", jobs=2, context=context)
    assert processes.records[0].digest == local.records[0].digest is not None
    assert _by_rollout(processes.records) == _by_rollout(local.records)


def test_a_served_environment_is_reached_by_each_worker(tmp_path: Path, context: Context) -> None:
    from tests.serve_fixtures import start_server

    server = start_server([str(ARITH)], tmp_path / "serve")
    try:
        [url] = server.urls
        local = envhub.evaluate(url, "noop", split="dev", output=tmp_path / "local.jsonl", context=context)
        processes = envhub.evaluate(url, "noop", split="dev", output=tmp_path / "processes.jsonl",
                                    executor="processes", jobs=2, context=context)
    finally:
        server.stop()
    assert processes.ran == local.ran > 2
    assert _by_rollout(processes.records) == _by_rollout(local.records)


def test_an_executor_option_reaches_only_an_executor_that_takes_it(tmp_path: Path) -> None:
    from envhub.plugin import ExecutorKind, hookimpl
    from envhub.runtime import LocalExecutor

    made: list[dict[str, str]] = []

    class Clustered:
        @hookimpl
        def envhub_executors(self) -> list[ExecutorKind]:
            def make(address: str | None = None) -> LocalExecutor:
                made.append({"address": address} if address else {})
                return LocalExecutor()
            return [ExecutorKind("clustered", make, options=("address",))]

    context = Context.create(autoload=False, cwd=tmp_path)
    context.plugins.register(Clustered(), "clustered")
    result = envhub.evaluate(ARITH, "reference", split="dev", n=2, executor="clustered",
                             executor_options={"address": "10.0.0.1:6379"}, context=context)
    assert result.ran == 2 and made == [{"address": "10.0.0.1:6379"}]
    # An executor that does not name the option refuses it before anything is loaded or run,
    # and says which executor takes it.
    for executor in ("local", "processes"):
        with pytest.raises(UsageError) as exc:
            envhub.evaluate(ARITH, "reference", split="dev", executor=executor,
                            executor_options={"address": "10.0.0.1:6379"}, context=context)
        assert (exc.value.message, exc.value.hint) == (f"executor {executor!r} takes no --address",
                                                       "--address is for --executor clustered")
    with pytest.raises(UsageError, match="apply to an executor named by its name"):
        envhub.evaluate(ARITH, "reference", split="dev", executor=LocalExecutor(),
                        executor_options={"address": "x:1"}, context=context)
    assert made == [{"address": "10.0.0.1:6379"}]


def test_address_on_the_command_line_for_an_executor_without_a_cluster_exits_2(tmp_path: Path) -> None:
    result = run_envhub("eval", str(ARITH), "-s", "dev", "--address", "10.0.0.1:6379", "-o", "out.jsonl",
                        cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.err
    # The Ray plugin is in the dev set: it is the executor the hint names.
    assert result.err == ("envhub: error: executor 'local' takes no --address\n"
                          "  hint: --address is for --executor ray\n")
    assert not (tmp_path / "out.jsonl").exists()
