"""How long does ``envhub --help`` take, next to a Python that only imports click?

    .venv/bin/python bench/startup.py [--runs 20]

Times whole processes, taking turns: ``envhub --help`` (the installed command beside this
Python) and ``python -c "import click"`` with the same Python. click is the floor: the CLI
is built on it, so ``--help`` cannot start faster than importing it. The subcommands are
imported only when run, so listing them should cost little more than that floor. Prints the
median of ``--runs`` runs of each and their ratio; the target is <= 1.5x. This is a
measurement, not a test: it exits 0 whatever the timing.
"""

from __future__ import annotations

import argparse
import sys

from _common import envhub_command, median, runs_text, time_interleaved, verdict

TARGET = 1.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each command (default: %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every run's time too")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    commands = {
        "baseline": [sys.executable, "-c", "import click"],
        "envhub": [*envhub_command(), "--help"],
    }
    times = time_interleaved(commands, args.runs)
    base, cli = median(times["baseline"]), median(times["envhub"])
    ratio = cli / base

    print(f"envhub --help against import click, median of {args.runs} run(s)")
    print(f"  baseline (python -c 'import click'): {base * 1000:7.1f} ms   "
          f"range {min(times['baseline']) * 1000:.1f}-{max(times['baseline']) * 1000:.1f}")
    print(f"  envhub --help:                       {cli * 1000:7.1f} ms   "
          f"range {min(times['envhub']) * 1000:.1f}-{max(times['envhub']) * 1000:.1f}")
    print(f"  ratio envhub / baseline: {ratio:.2f}x  ({verdict(ratio, TARGET)})")
    if args.verbose:
        print("  baseline runs (ms):", runs_text(times["baseline"], unit_ms=True))
        print("  envhub runs (ms):  ", runs_text(times["envhub"], unit_ms=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
