"""Rollouts per second of ``envhub eval --executor ray`` (two worker nodes) against
``processes -j 2`` and the local executor, at 50 ms of model latency.

    .venv/bin/python bench/eval_ray.py [--tasks 3000] [--repeat 3] [--latency-ms 50]

The workload of bench/eval_processes.py's second half: single-turn exact-match tasks, an
``openai:`` policy against an OpenAI-compatible stub (tests/openai_server.py, in its own
process) that answers after ``--latency-ms``, at concurrency 256 and 1,024, each run through
``envhub.evaluate`` and every rollout checked. The three executors take turns. The Ray
cluster is started here as processes on this machine, as the tests start it: a head with no
CPU (it only coordinates) and two worker nodes of one CPU each, so the ray executor starts
one actor on each.

Each figure is also printed as a fraction of its bound, min(concurrency / latency, N x one
worker's ceiling), N being 1 for local and 2 for the others, and the ceiling the local
executor's rollouts/s against the same stub without latency. The processes and ray figures
include starting their workers (for ray: connecting to the cluster, starting the actors and
loading the environment in each). A measurement, not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))  # eval_processes: the bundle, the stub server, the tables

from eval_processes import bundle, interleaved, serve, show  # noqa: E402

import envhub  # noqa: E402
from envhub.context import Context  # noqa: E402

RAY = str(Path(sys.executable).parent / "ray")
#: The bench cluster's nodes and this driver: no usage report, no token authentication.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


#: The driver's CPU seconds per rollout of each run, by executor (this process, its threads included).
DRIVER_CPU: dict[str, list[float]] = {}


def run(env: Path, out: Path, *, concurrency: int, executor: object, jobs: int | None, base_url: str,
        tasks: int, limit: int | None = None) -> float:
    """Rollouts/s of one ``envhub.evaluate`` (of the first ``limit`` tasks), every rollout checked."""
    out.unlink(missing_ok=True)
    start, cpu = time.perf_counter(), time.process_time()
    result = envhub.evaluate(env, "openai:bench", split="train", output=out, concurrency=concurrency,
                             executor=executor, jobs=jobs, base_url=base_url, n=limit,  # type: ignore[arg-type]
                             context=Context.create(cwd=out.parent))
    elapsed = time.perf_counter() - start
    count = limit or tasks
    assert result.ran == count and result.summary.mean_reward == 1.0, (executor, result.summary)
    DRIVER_CPU.setdefault(executor if isinstance(executor, str) else "ray", []).append(
        (time.process_time() - cpu) / count)
    return count / elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A Ray head (no CPU) and ``workers`` worker nodes of one CPU each on this machine, each
    ``ray start --block`` in a process group of its own, stopped by :meth:`stop`."""

    def __init__(self, root: Path, workers: int) -> None:
        self.temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short: socket paths must fit 107 bytes
        self.root = root
        self.nodes: list[subprocess.Popen[bytes]] = []
        port = _free_port()
        self.address = f"127.0.0.1:{port}"
        self._start("--head", f"--port={port}", "--num-cpus=0", "--include-dashboard=false",
                    f"--temp-dir={self.temp}")
        for _ in range(workers):  # one at a time: nodes of one machine starting at once may pick one socket
            self._start(f"--address={self.address}", "--num-cpus=1")

    def _start(self, *args: str) -> None:
        log = self.root / f"ray-node-{len(self.nodes)}.log"
        with log.open("wb") as f:
            self.nodes.append(subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats",
                                                "--object-store-memory=80000000", *args],
                                               stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                               env={**os.environ, **RAY_ENV}))
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            if self.nodes[-1].poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"a Ray node did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        for node in reversed(self.nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGTERM)
        for node in self.nodes:
            try:
                node.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        for proc in Path("/proc").iterdir():  # what the nodes detached, by this cluster's session directory
            if proc.name.isdigit():
                try:
                    if str(self.temp).encode() in (proc / "cmdline").read_bytes():
                        os.kill(int(proc.name), signal.SIGKILL)
                except OSError:
                    pass
        subprocess.run(["rm", "-rf", str(self.temp)], check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args(argv)
    from envhub_ray import RayExecutor

    print(f"{os.cpu_count()} CPU(s); {args.tasks} single-turn rollouts per run; medians of {args.repeat} round(s)")
    with tempfile.TemporaryDirectory(prefix="envhub-bench-ray-") as tmp:
        root = Path(tmp)
        env = bundle(root, args.tasks)
        out = root / "out.jsonl"
        n = args.tasks

        fast = serve(root / "answers.json", 0)
        try:
            assert fast.stdout is not None
            url = fast.stdout.readline().strip()
            run(env, out, concurrency=256, executor="local", jobs=None, base_url=url, tasks=n)  # warm-up
            ceiling = statistics.median(run(env, out, concurrency=256, executor="local", jobs=None, base_url=url,
                                            tasks=n) for _ in range(args.repeat))
        finally:
            fast.terminate()
            fast.wait()
        print(f"one worker's ceiling (local, no latency, concurrency 256): {ceiling:.0f} rollouts/s")

        os.environ.update(RAY_ENV)
        cluster = Cluster(root, workers=2)
        slow = serve(root / "answers.json", args.latency_ms / 1000)
        try:
            assert slow.stdout is not None
            url = slow.stdout.readline().strip()
            ray = RayExecutor(address=cluster.address)
            run(env, out, concurrency=256, executor=ray, jobs=None, base_url=url, tasks=n)  # warm-up
            latency = args.latency_ms / 1000
            print("start-up: seconds for a run of 8 rollouts (connecting, starting the workers, loading, stopping)")
            for name, executor, jobs in (("local", "local", None), ("processes -j 2", "processes", 2),
                                         ("ray (2 nodes)", ray, None)):
                seconds = statistics.median(8 / run(env, out, concurrency=8, executor=executor, jobs=jobs,
                                                    base_url=url, tasks=n, limit=8) for _ in range(args.repeat))
                print(f"  {name:<14} {seconds:6.2f} s")
            DRIVER_CPU.clear()
            for concurrency in (256, 1024):
                common = {"concurrency": concurrency, "base_url": url, "tasks": n}
                sides: dict[str, object] = {
                    "local": partial(run, env, out, executor="local", jobs=None, **common),
                    "processes -j 2": partial(run, env, out, executor="processes", jobs=2, **common),
                    "ray (2 nodes)": partial(run, env, out, executor=ray, jobs=None, **common),
                }
                bounds = {"local": min(concurrency / latency, ceiling),
                          "processes -j 2": min(concurrency / latency, 2 * ceiling),
                          "ray (2 nodes)": min(concurrency / latency, 2 * ceiling)}
                figures = interleaved(sides, args.repeat)
                show(f"latency: openai:MODEL, {args.latency_ms:g} ms per answer, concurrency {concurrency}",
                     figures, bounds)
                ratio = statistics.median(figures["ray (2 nodes)"]) / statistics.median(figures["local"])
                print(f"  ratio ray (2 nodes) / local: {ratio:.2f}x")
            print("the driver's CPU per 1,000 rollouts (this process; the workers' CPU not counted):")
            for name, values in DRIVER_CPU.items():
                print(f"  {name:<14} {statistics.median(values) * 1000:6.2f} CPU-s")
        finally:
            slow.terminate()
            slow.wait()
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
