"""What does a shell workspace cost?

    .venv/bin/python bench/shell.py [--runs 20] [--files 300] [--concurrent 64]

Measured in one run, taking turns so a slow spell falls on every side alike:

1. episode start: ``ShellWorkspace.start(seed)`` until the workspace is ready (a seed of
   ``--files`` files in nested directories), against ``cp -r`` of the same tree;
2. per-command overhead: ``workspace.run("true")`` and ``workspace.run("echo hi")``, against
   ``subprocess.run(["bash", "-c", ...])`` of the same command, unsandboxed;
3. ``--concurrent`` workspaces at once on one event loop, each started, given a few commands
   and the file tools, exported and closed: whether all complete, the wall time, the runner's
   peak RSS, and the peak RSS and PSS of the runner with every process it started (sampled).

Each line prints medians and the ratio to its baseline. A measurement, not a test: it exits 0
whatever the timing (non-zero only when a workspace fails).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envhub.sandbox import ShellLimits, ShellWorkspace, probe  # noqa: E402

LIMITS = ShellLimits(command_timeout_s=60, disk_mb=64)


def make_seed(root: Path, files: int) -> Path:
    seed = root / "seed"
    for i in range(files):
        path = seed / f"pkg{i % 10}" / f"sub{i % 7}" / f"module_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# module {i}\n" + "def f(x):\n    return x + 1\n" * 40)
    return seed


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms"


def line(label: str, ours: list[float], base: list[float], base_label: str) -> None:
    ratio = statistics.median(ours) / statistics.median(base)
    spread = f"[{min(ours) * 1000:.1f}-{max(ours) * 1000:.1f}]"
    print(f"{label:<34}{median_ms(ours)} {spread:<16} {base_label:<30}{median_ms(base)}   ratio {ratio:5.1f}x")


async def episode_start(seed: Path, scratch: Path, runs: int) -> None:
    ours, base = [], []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(["cp", "-r", str(seed), str(scratch / f"copy{i}")], check=True)
        copied = time.perf_counter() - start
        start = time.perf_counter()
        workspace = await ShellWorkspace.start(seed=seed, limits=LIMITS)
        ready = time.perf_counter() - start
        await workspace.close()
        shutil.rmtree(scratch / f"copy{i}")
        if i:  # the first of each warms the page cache and the sandbox's zygote
            ours.append(ready)
            base.append(copied)
    line("episode start (workspace ready)", ours, base, "cp -r of the seed")


async def per_command(seed: Path, runs: int) -> None:
    async with await ShellWorkspace.start(seed=seed, limits=LIMITS) as workspace:
        for command in ("true", "echo hi"):
            ours, base = [], []
            for _ in range(runs + 1):
                start = time.perf_counter()
                subprocess.run(["bash", "-c", command], capture_output=True, check=True)
                base.append(time.perf_counter() - start)
                start = time.perf_counter()
                result = await workspace.run(command)
                ours.append(time.perf_counter() - start)
                assert result.exit_code == 0, result
            line(f"run({command!r})", ours[1:], base[1:], "subprocess.run(bash -c)")


def _tree_memory(pid: int) -> tuple[int, int]:
    """RSS and PSS, in KiB, of ``pid`` and every process beneath it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    rss = pss = 0
    todo = [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            for row in Path(f"/proc/{current}/smaps_rollup").read_text().splitlines():
                if row.startswith("Rss:"):
                    rss += int(row.split()[1])
                elif row.startswith("Pss:"):
                    pss += int(row.split()[1])
        except OSError:
            continue
    return rss, pss


async def concurrent(seed: Path, scratch: Path, count: int) -> bool:
    import os

    peak = [0, 0]
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            rss, pss = await asyncio.to_thread(_tree_memory, os.getpid())
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            await asyncio.sleep(0.5)

    async def episode(i: int) -> bool:
        async with await ShellWorkspace.start(seed=seed, limits=LIMITS) as workspace:
            await workspace.write_file("notes.txt", f"episode {i}\n")
            await workspace.edit_file("notes.txt", old=f"episode {i}", new=f"episode {i} done")
            results = [await workspace.run("ls pkg0 | wc -l; cat notes.txt"),
                       await workspace.run("python3 -c 'print(sum(range(10**5)))'"),
                       await workspace.run("sleep 0.5; grep -rl 'def f' . | wc -l")]
            await workspace.export(scratch / f"final{i}")
            return (all(r.exit_code == 0 for r in results) and results[0].output.endswith(f"episode {i} done\n")
                    and (scratch / f"final{i}" / "notes.txt").exists())

    sampler = asyncio.create_task(sample())
    start = time.perf_counter()
    outcomes = await asyncio.gather(*(episode(i) for i in range(count)), return_exceptions=True)
    wall = time.perf_counter() - start
    done.set()
    await sampler
    ok = sum(1 for o in outcomes if o is True)
    failures = [o for o in outcomes if o is not True]
    print(f"{count} concurrent workspaces: {ok}/{count} completed in {wall:.1f} s; runner peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; with every process it started: "
          f"peak RSS {peak[0] / 1024:.0f} MiB, peak PSS {peak[1] / 1024:.0f} MiB")
    for failure in failures[:3]:
        print(f"  failed: {failure!r}")
    return not failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=64)
    args = parser.parse_args()
    found = probe()
    print(f"sandbox layers: {', '.join(found.layers)}")
    with tempfile.TemporaryDirectory(prefix="envhub-bench-shell-") as scratch_dir:
        scratch = Path(scratch_dir)
        seed = make_seed(scratch, args.files)
        print(f"seed: {args.files} files, {sum(p.stat().st_size for p in seed.rglob('*') if p.is_file()) // 1024} KiB")
        asyncio.run(episode_start(seed, scratch, args.runs))
        asyncio.run(per_command(seed, args.runs))
        ok = asyncio.run(concurrent(seed, scratch, args.concurrent))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
