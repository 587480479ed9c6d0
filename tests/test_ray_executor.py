"""The ``ray`` executor (plugins/envhub-ray) on a real Ray cluster: a head and two worker
nodes started as processes on 127.0.0.1 by the module's fixture, and ``envhub eval
--executor ray`` run through the installed command. Its records are the local executor's;
its actors run on both worker nodes; a worker node killed mid-run has its episodes re-run
elsewhere and no record written twice; bad addresses and a missing Ray are clear errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.context import Context
from envhub.errors import UsageError
from envhub.runtime import RolloutRecord, read_records
from tests.conftest import ENVHUB, run_envhub

pytest.importorskip("ray")
pytest.importorskip("envhub_ray")

ARITH = Path(__file__).parent.parent / "example_envs" / "arith-word-problems"
RAY = str(Path(sys.executable).parent / "ray")
#: The test cluster's nodes and the drivers that join it: no usage report, and no token
#: authentication (Ray turns it on when it finds a token in ~/.ray, which a local ray.init
#: writes there).
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}

#: A policy that notes, per call, its process and the task (a file ``PID-HASH`` under
#: $ENVHUB_TEST_CALLS) and answers after $ENVHUB_TEST_DELAY seconds. (The actors get the
#: driver's ENVHUB_* variables.)
CALL_POLICY = '''
import asyncio, hashlib, os
from pathlib import Path

async def act(messages):
    key = hashlib.sha256(messages[-1]["content"].encode()).hexdigest()[:16]
    Path(os.environ["ENVHUB_TEST_CALLS"], f"{os.getpid()}-{key}").touch()
    await asyncio.sleep(float(os.environ.get("ENVHUB_TEST_DELAY", "0")))
    return "42"
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    address: str
    #: ``ray start --block`` of each node, each the leader of its own process group: the
    #: head first, then the two worker nodes.
    nodes: list[subprocess.Popen[bytes]]

    def kill_node(self, index: int, workers: set[int]) -> list[int]:
        """Kill node ``index`` outright: everything in its process group (its raylet) and
        those of ``workers`` (Ray worker processes, which Ray starts in groups of their own)
        that its raylet started. Returns those workers."""
        group = self.nodes[index].pid
        ours = [pid for pid in workers if _pgid(_ppid(pid)) == group]
        os.killpg(group, signal.SIGKILL)
        for pid in ours:
            os.kill(pid, signal.SIGKILL)
        self.nodes[index].wait()
        return ours


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def _pgid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[2])


def _start_node(temp: Path, *args: str) -> subprocess.Popen[bytes]:
    ports = [f"--{name}={_free_port()}" for name in ("node-manager-port", "object-manager-port",
                                                     "metrics-export-port", "runtime-env-agent-port",
                                                     "dashboard-agent-listen-port", "dashboard-agent-grpc-port")]
    log = open(temp / f"node-{len(list(temp.glob('node-*.log')))}.log", "wb")  # noqa: SIM115  (held by the node)
    return subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats", "--object-store-memory=80000000",
                             *ports, *args],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **RAY_ENV})


def _wait_for_nodes(address: str, count: int, nodes: list[subprocess.Popen[bytes]], logs: Path) -> None:
    """Wait until ``count`` nodes with a CPU are alive in the cluster; fail at once, with its
    log, if a node exits."""
    code = ("import ray, sys, time\n"
            f"ray.init(address={address!r}, logging_level='error', log_to_driver=False)\n"
            f"while sum(1 for n in ray.nodes() if n['Alive'] and n['Resources'].get('CPU')) < {count}:\n"
            "    time.sleep(0.2)\n")
    waiter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env={**os.environ, **RAY_ENV})
    deadline = time.monotonic() + 90
    try:
        while waiter.poll() is None:
            for i, node in enumerate(nodes):
                assert node.poll() is None, (logs / f"node-{i}.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Ray nodes did not join within 90 s"
            time.sleep(0.2)
    finally:
        if waiter.poll() is None:
            waiter.kill()
        _, err = waiter.communicate()
    assert waiter.returncode == 0, err.decode()[-2000:]


def _wait_started(nodes: list[subprocess.Popen[bytes]], logs: Path) -> None:
    """Wait until the last of ``nodes`` says it has started (its log), or fail with its log."""
    log = logs / f"node-{len(nodes) - 1}.log"
    deadline = time.monotonic() + 90
    while "Ray runtime started" not in log.read_text():
        assert nodes[-1].poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"a Ray node did not start within 90 s: {log}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A head (no CPUs: it only coordinates) and two worker nodes of one CPU each, on
    127.0.0.1, all stopped (their process groups killed) when the module's tests end."""
    temp = Path("/tmp") / f"envhub-ray-{os.getpid()}"  # short: Ray's socket paths must fit in 107 bytes
    temp.mkdir(exist_ok=True)
    logs = tmp_path_factory.mktemp("ray-logs")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    nodes = [_start_node(logs, "--head", f"--port={port}", "--num-cpus=0", "--include-dashboard=false",
                         f"--temp-dir={temp}")]
    try:
        _wait_started(nodes, logs)
        for _ in range(2):  # one at a time: two nodes of one machine starting at once may pick the same socket
            nodes.append(_start_node(logs, f"--address={address}", "--num-cpus=1"))
            _wait_started(nodes, logs)
        _wait_for_nodes(address, 2, nodes, logs)
        yield Cluster(address, nodes)
    finally:
        for node in reversed(nodes):
            try:
                os.killpg(node.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for node in nodes:
            try:
                node.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        # What the nodes started outside their groups (Ray detaches a few helpers): found by
        # this cluster's own session directory, never by name.
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    if str(temp).encode() in (proc / "cmdline").read_bytes():
                        os.kill(int(proc.name), signal.SIGKILL)
                except (OSError, ProcessLookupError):
                    pass
        subprocess.run(["rm", "-rf", str(temp)], check=False)


@pytest.fixture
def call_policy(tmp_path: Path) -> tuple[str, Path]:
    """The spec of :data:`CALL_POLICY` and the directory its calls go to."""
    path = tmp_path / "call_policy.py"
    path.write_text(CALL_POLICY)
    calls = tmp_path / "calls"
    calls.mkdir()
    return f"python:{path}:act", calls


def _same(record: RolloutRecord) -> dict[str, Any]:
    """A record without what differs between two runs of the same rollout (its timing)."""
    return record.model_dump(mode="json", exclude={"timing"})


def _by_rollout(records: list[RolloutRecord]) -> list[dict[str, Any]]:
    return [_same(r) for r in sorted(records, key=lambda r: (r.task_id, r.rollout))]


def _exactly_once(records: list[RolloutRecord], expected: set[tuple[str, int]]) -> list[str]:
    """What is wrong with ``records`` as the records of the rollouts ``expected``: each one
    exactly once, nothing else."""
    counts = Counter((r.task_id, r.rollout) for r in records)
    problems = [f"{key} written {n} times" for key, n in sorted(counts.items()) if n > 1]
    problems += [f"{key} missing" for key in sorted(expected - set(counts))]
    problems += [f"{key} not a rollout of the run" for key in sorted(set(counts) - expected)]
    return problems


def _pids(calls: Path) -> set[int]:
    return {int(p.name.split("-")[0]) for p in calls.iterdir()}


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def _eval(cluster: Cluster, *args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    """``envhub eval ARGS`` on the cluster, named with ``--address`` (the tests that kill nodes
    name it with RAY_ADDRESS, the other way)."""
    return run_envhub("eval", *args, "--executor", "ray", "--address", cluster.address, cwd=cwd,
                      env={**RAY_ENV, **(env or {})})


# --- records --------------------------------------------------------------------------------


def test_same_records_as_the_local_executor(cluster: Cluster, tmp_path: Path) -> None:
    local = envhub.evaluate(ARITH, "reference", split="dev", k=2, seed=7, output=tmp_path / "local.jsonl",
                            context=Context.create(autoload=False, cwd=tmp_path))
    result = _eval(cluster, str(ARITH), "-s", "dev", "-k", "2", "--seed", "7", "-o", "ray.jsonl", "--json",
                   cwd=tmp_path)
    assert result.code == 0, result.err
    records = read_records(tmp_path / "ray.jsonl")
    assert len(records) == local.ran == 200
    assert _exactly_once(records, {(r.task_id, r.rollout) for r in local.records}) == []
    assert _by_rollout(records) == _by_rollout(local.records)
    assert json.loads(result.out)["mean_reward"] == local.summary.mean_reward == 1.0


def test_resume_plays_only_the_missing_rollouts(cluster: Cluster, tmp_path: Path) -> None:
    full = envhub.evaluate(ARITH, "reference", split="dev", k=2, seed=1, output=tmp_path / "full.jsonl",
                           context=Context.create(autoload=False, cwd=tmp_path))
    lines = (tmp_path / "full.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "out.jsonl").write_text("".join(lines[:150]) + lines[150][:40])  # and a torn one, as a kill leaves
    result = _eval(cluster, str(ARITH), "-s", "dev", "-k", "2", "--seed", "1", "-o", "out.jsonl", "--resume",
                   "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    assert (json.loads(result.out)["skipped"], json.loads(result.out)["ran"]) == (150, 50)
    assert _by_rollout(read_records(tmp_path / "out.jsonl")) == _by_rollout(full.records)


def test_actors_run_on_both_worker_nodes_and_end_with_the_run(cluster: Cluster, tmp_path: Path,
                                                              call_policy: tuple[str, Path]) -> None:
    spec, calls = call_policy
    result = _eval(cluster, str(ARITH), "-s", "dev", "-n", "20", "-c", "4", "-p", spec, "-o", "out.jsonl",
                   cwd=tmp_path, env={"ENVHUB_TEST_CALLS": str(calls), "ENVHUB_TEST_DELAY": "0.02"})
    assert result.code == 0, result.err
    pids = _pids(calls)
    assert len(pids) == 2, pids  # one actor per worker node (the head has no CPU)
    assert len(list(calls.iterdir())) == 20
    assert not any(_alive(pid) for pid in pids)  # the actors are gone once the run ends
    assert len(_raylets()) >= 3  # (the check of the local-cluster test sees a cluster's nodes)
    # Positive control: -j 1 asks for one actor, and one process plays every episode.
    for p in calls.iterdir():
        p.unlink()
    result = _eval(cluster, str(ARITH), "-s", "dev", "-n", "20", "-j", "1", "-p", spec, "-o", "one.jsonl",
                   cwd=tmp_path, env={"ENVHUB_TEST_CALLS": str(calls)})
    assert result.code == 0, result.err
    assert len(_pids(calls)) == 1


# --- a worker node that dies ---------------------------------------------------------------------


def test_a_killed_worker_node_has_its_episodes_rerun_and_no_record_written_twice(
        cluster: Cluster, tmp_path: Path, call_policy: tuple[str, Path]) -> None:
    spec, calls = call_policy
    out = tmp_path / "out.jsonl"
    # 100 episodes of 0.1 s, two at a time on each of the two actors: about 2.5 s of run.
    proc = subprocess.Popen([ENVHUB, "eval", str(ARITH), "-s", "dev", "-c", "4", "-p", spec, "-o", str(out),
                             "--executor", "ray", "--json"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **RAY_ENV, "RAY_ADDRESS": cluster.address,
                                 "ENVHUB_TEST_CALLS": str(calls),
                                 "ENVHUB_TEST_DELAY": "0.1"})
    try:
        deadline = time.monotonic() + 60
        while not (out.exists() and out.read_text().count("\n") >= 20 and len(_pids(calls)) == 2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr and proc.stderr.read()
            time.sleep(0.05)
        [victim] = cluster.kill_node(2, _pids(calls))  # the second worker node: its raylet and its actor
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert json.loads(stdout)["ran"] == 100

    records = read_records(out)
    with envhub.load(ARITH) as env:
        expected = {(task.id, 0) for task in env.tasks("dev")}
    assert len(expected) == 100
    assert _exactly_once(records, expected) == []
    # The killed actor had started episodes it never sent back: the survivor played them again.
    by_task: dict[str, set[int]] = {}
    for p in calls.iterdir():
        pid, key = p.name.split("-")
        by_task.setdefault(key, set()).add(int(pid))
    assert len(_pids(calls)) == 2
    assert not _alive(victim)
    rerun = [key for key, pids in by_task.items() if len(pids) == 2]
    assert rerun, "no episode was re-run after the node died"
    assert all(victim in by_task[key] for key in rerun)  # started by the killed actor, finished by the other


def test_when_every_actor_dies_the_run_stops_and_resumes_to_exactly_one_record_each(
        cluster: Cluster, tmp_path: Path, call_policy: tuple[str, Path]) -> None:
    spec, calls = call_policy
    out = tmp_path / "out.jsonl"
    args = [ENVHUB, "eval", str(ARITH), "-s", "dev", "-c", "2", "-j", "1", "-p", spec, "-o", str(out), "--executor",
            "ray"]
    env = {**os.environ, **RAY_ENV, "RAY_ADDRESS": cluster.address, "ENVHUB_TEST_CALLS": str(calls),
           "ENVHUB_TEST_DELAY": "0.1"}
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not (out.exists() and out.read_text().count("\n") >= 10):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr and proc.stderr.read()
            time.sleep(0.05)
        [actor] = _pids(calls)  # -j 1: the one actor
        os.kill(actor, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, stderr
    assert "envhub: error: every Ray actor died before the run's rollouts finished (the last: actor 0 (pid " \
           f"{actor} on node " in stderr
    assert "hint: the rollouts that finished are in the records file; run again with --resume" in stderr
    written = read_records(out)
    assert 10 <= len(written) < 100
    assert _exactly_once(written, {(r.task_id, 0) for r in written}) == []

    resumed = subprocess.run([*args, "--resume"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    with envhub.load(ARITH) as environment:
        expected = {(task.id, 0) for task in environment.tasks("dev")}
    assert _exactly_once(read_records(out), expected) == []


def test_the_exactly_once_check_notices_a_duplicate_a_missing_and_a_stray_record(tmp_path: Path) -> None:
    """Positive control of :func:`_exactly_once`, the fault test's check."""
    result = envhub.evaluate(ARITH, "reference", split="dev", n=3, output=tmp_path / "out.jsonl",
                             context=Context.create(autoload=False, cwd=tmp_path))
    records = result.records
    expected = {(r.task_id, r.rollout) for r in records}
    assert _exactly_once(records, expected) == []
    a, b, c = sorted(records, key=lambda r: r.task_id)
    assert _exactly_once([a, b, b], expected) == [f"{(b.task_id, 0)} written 2 times", f"{(c.task_id, 0)} missing"]
    assert _exactly_once([a, b, c], expected - {(c.task_id, 0)}) == [f"{(c.task_id, 0)} not a rollout of the run"]


def _raylets() -> set[int]:
    """The raylets running on this machine (one per Ray node)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if b"/raylet/raylet\0" in (proc / "cmdline").read_bytes():
                    found.add(int(proc.name))
            except OSError:
                pass
    return found


def test_without_an_address_a_local_cluster_is_started_for_the_run_and_stopped(tmp_path: Path) -> None:
    before = _raylets()
    # Ray writes a token for a local cluster under ~/.ray: a home of the test's own.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, "HOME": str(tmp_path)}
    proc = subprocess.run([ENVHUB, "eval", str(ARITH), "-s", "dev", "-n", "6", "--executor", "ray", "-o", "out.jsonl",
                           "--json"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ran"] == 6
    assert len(read_records(tmp_path / "out.jsonl")) == 6
    deadline = time.monotonic() + 10
    while _raylets() - before:  # the local node's raylet is stopped with the run
        assert time.monotonic() < deadline, _raylets() - before
        time.sleep(0.2)


# --- errors ------------------------------------------------------------------------------------


def test_an_address_nothing_listens_on_is_a_clear_error_within_seconds(tmp_path: Path) -> None:
    port = _free_port()
    start = time.monotonic()
    result = run_envhub("eval", str(ARITH), "-s", "dev", "-n", "2", "--executor", "ray", "-o", "out.jsonl",
                        cwd=tmp_path, env={"RAY_ADDRESS": f"127.0.0.1:{port}"})
    assert result.code == 2, result.err
    assert result.err.splitlines() == [
        f"envhub: error: cannot connect to the Ray cluster at 127.0.0.1:{port}: Connection refused",
        "  hint: start it with 'ray start --head --port PORT' (and 'ray start --address HEAD:PORT' on the other "
        "machines), and pass HEAD:PORT with --address (or in RAY_ADDRESS)"]
    assert time.monotonic() - start < 30
    assert not (tmp_path / "out.jsonl").exists() or not (tmp_path / "out.jsonl").read_text()  # no record


def test_an_actor_that_cannot_load_the_policy_ends_the_run_naming_it(cluster: Cluster, tmp_path: Path) -> None:
    # Loads in the driver (which has not imported Ray yet when it makes the policy), fails in an actor.
    (tmp_path / "broken_policy.py").write_text("import sys\nif 'ray' in sys.modules:\n"
                                               "    raise RuntimeError('no model here')\n"
                                               "def act(messages):\n    return '42'\n")
    result = _eval(cluster, str(ARITH), "-s", "dev", "-n", "4", "-p", f"python:{tmp_path / 'broken_policy.py'}:act",
                   "-o", "out.jsonl", cwd=tmp_path)
    assert result.code != 0
    assert "envhub: error: a Ray actor failed: " in result.err
    assert "no model here" in result.err
    assert "Traceback" not in result.err


def test_the_plugin_imports_no_ray_until_the_executor_runs() -> None:
    code = ("import sys, envhub_ray\n"
            "[kind] = envhub_ray.envhub_executors()\n"
            "executor = kind.make()\n"
            "assert 'ray' not in sys.modules, 'ray imported'\n"
            "print(kind.name, type(executor).__name__, executor.needs_source, executor.uses_workers)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ray", "RayExecutor", "True", "True"]


def test_without_ray_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from envhub_ray._executor import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what importing a package that is not installed does
    with pytest.raises(UsageError) as exc:
        import_ray()
    assert exc.value.message.startswith("the ray executor needs Ray, which is not installed here (")
    assert exc.value.hint == "pip install envhub-ray (it installs ray>=2.40), or pip install 'ray>=2.40'"
