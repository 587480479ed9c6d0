"""How fast is ``envhub validate`` on a large split, next to just parsing the file?

    .venv/bin/python bench/validate.py [--rows 1000000] [--repeat 3]

Builds (once, under bench/.data/, reused while its size is right) a bundle whose one split
holds ``--rows`` JSONL tasks of about 130 bytes each, shaped like the rows of
example_envs/arith-word-problems, with a manifest that declares the same fields. Then it
times, as whole processes and taking turns:

- baseline: the same Python reading the file and parsing every line with the fastest JSON
  parser there is (``for line in f: orjson.loads(line)``), and nothing else;
- ``envhub validate`` on the bundle, which also hashes the bytes, checks the fields and the
  difficulty of every row, and keeps every task id to find duplicates.

It prints the median of ``--repeat`` runs of each and their ratio; the target is that
validating costs at most twice the bare parse (<= 2.0x). This is a measurement, not a test:
it exits 0 whatever the timing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from pathlib import Path

from _common import DATA, envhub_command, median, runs_text, time_interleaved, verdict

TARGET = 2.0
_FORMAT = 1  # bump when the generated rows change, so old data is rebuilt

_ROW = ('{{"id":"r{i:07d}","prompt":"Ann has {a} pens, buys {k} boxes of {m}. How many?",'
        '"answer":"{answer}","difficulty":{d},"solution":"{a}+{k}*{m}={answer}"}}\n')

_MANIFEST = """\
[environment]
name = "bench/validate"
version = "0.0.0"
description = "Benchmark data for bench/validate.py: {rows} generated rows."
license = "Apache-2.0"
canary = "envhub-canary:00000000000000000000000000000000"

[tasks]
format = "jsonl"
difficulty-field = "difficulty"
splits.train = {{ path = "tasks/train.jsonl", rows = {rows}, sha256 = "{sha256}" }}

[harness]
protocol = "single-turn"

[verifier]
kind = "numeric"
field = "answer"
"""

# The baseline: read and parse, nothing more. orjson is a dependency of envhub, so it is
# there; the json fallback only keeps the script usable elsewhere.
_BASELINE = """\
import sys
try:
    from orjson import loads
except ImportError:
    from json import loads
with open(sys.argv[1], "rb") as f:
    for line in f:
        loads(line)
"""


def build(rows: int) -> tuple[Path, Path]:
    """The bundle directory and its task file for ``rows`` rows, made if missing or stale."""
    bundle = DATA / f"validate-{rows}"
    tasks = bundle / "tasks" / "train.jsonl"
    meta_path = bundle / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
        if meta == {"format": _FORMAT, "rows": rows, "bytes": tasks.stat().st_size}:
            return bundle, tasks
    except (OSError, ValueError):
        pass
    print(f"building {rows:,} rows in {bundle} ...", file=sys.stderr)
    tasks.parent.mkdir(parents=True, exist_ok=True)
    meta_path.unlink(missing_ok=True)  # written last: a killed build is never reused
    rng = random.Random(rows)
    digest = hashlib.sha256()
    partial = tasks.with_suffix(".partial")
    with open(partial, "wb") as f:
        chunk: list[str] = []
        for i in range(1, rows + 1):
            a, k, m = rng.randint(10, 999), rng.randint(2, 9), rng.randint(2, 99)
            chunk.append(_ROW.format(i=i, a=a, k=k, m=m, answer=a + k * m, d=1 + i % 5))
            if len(chunk) == 100_000 or i == rows:
                data = "".join(chunk).encode()
                digest.update(data)
                f.write(data)
                chunk.clear()
    os.replace(partial, tasks)
    (bundle / "envhub.toml").write_text(_MANIFEST.format(rows=rows, sha256=digest.hexdigest()))
    meta_path.write_text(json.dumps({"format": _FORMAT, "rows": rows, "bytes": tasks.stat().st_size}))
    return bundle, tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the split (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each command (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.repeat < 1:
        parser.error("--rows and --repeat must be at least 1")

    envhub = envhub_command()
    bundle, tasks = build(args.rows)
    size = tasks.stat().st_size
    commands = {
        "baseline": [sys.executable, "-c", _BASELINE, str(tasks)],
        "validate": [*envhub, "validate", str(bundle)],
    }
    times = time_interleaved(commands, args.repeat)
    base, check = median(times["baseline"]), median(times["validate"])
    ratio = check / base

    print(f"envhub validate on {args.rows:,} rows ({size / 1e6:.1f} MB, {size / args.rows:.0f} bytes/row), "
          f"median of {args.repeat} run(s)")
    print(f"  baseline (read + orjson.loads every line): {base:7.3f} s   runs: {runs_text(times['baseline'])}")
    print(f"  envhub validate:                           {check:7.3f} s   runs: {runs_text(times['validate'])}")
    print(f"  ratio validate / baseline: {ratio:.2f}x  ({verdict(ratio, TARGET)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
