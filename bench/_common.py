"""Helpers shared by the benchmarks: finding the commands, timing whole processes."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def envhub_command() -> list[str]:
    """The ``envhub`` installed beside the running Python (the one under test)."""
    bindir = Path(sys.executable).parent
    for name in ("envhub", "envhub.exe"):
        if (bindir / name).is_file():
            return [str(bindir / name)]
    sys.exit(f"error: no 'envhub' command beside {sys.executable}\n"
             f"  hint: run this script with the Python of the environment where envhub is installed, "
             f"e.g. .venv/bin/python {Path(sys.argv[0]).as_posix()}")


DATA = Path(__file__).resolve().parent / ".data"


def _child_env() -> dict[str, str]:
    # Users run envhub with compiled bytecode (pip writes it at install time), but an
    # editable install under PYTHONDONTWRITEBYTECODE=1 would recompile envhub's modules on
    # every run. So the children may write bytecode, into a cache under bench/.data/ rather
    # than into the source tree; the untimed warm-up run fills it. Both sides of every
    # comparison run with the same setting.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(DATA / "pycache")
    env["NO_COLOR"] = "1"
    return env


def run_once(cmd: Sequence[str], *, cwd: Path | None = None,
             extra_env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    """Run ``cmd`` to completion; its wall-clock time in seconds, and its result."""
    env = {**_child_env(), **(extra_env or {})}
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False, cwd=cwd)
    return time.perf_counter() - start, done


def time_interleaved(commands: dict[str, Sequence[str]], runs: int, *, cwd: Path | None = None,
                     extra_env: dict[str, str] | None = None) -> dict[str, list[float]]:
    """Time each command ``runs`` times, taking turns so drift (other load, CPU clock)
    spreads over all of them alike. One untimed warm-up run each fills the OS caches.
    Exits with the command's output if one fails."""
    times: dict[str, list[float]] = {label: [] for label in commands}
    for i in range(runs + 1):
        for label, cmd in commands.items():
            elapsed, done = run_once(cmd, cwd=cwd, extra_env=extra_env)
            if done.returncode != 0:
                sys.exit(f"error: {label} failed (exit {done.returncode}): {' '.join(cmd)}\n"
                         + done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace"))
            if i > 0:
                times[label].append(elapsed)
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def verdict(ratio: float, target: float) -> str:
    return f"target <= {target:.1f}x: {'met' if ratio <= target else 'NOT met'}"


def runs_text(values: Sequence[float], unit_ms: bool = False) -> str:
    scale, fmt = (1000, "{:.1f}") if unit_ms else (1, "{:.3f}")
    return ", ".join(fmt.format(v * scale) for v in values)
