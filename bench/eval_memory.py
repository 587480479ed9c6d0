"""Does ``envhub eval``'s memory stay flat as the records grow?

    .venv/bin/python bench/eval_memory.py [--small 1000] [--large 30000]

Pushes a single-turn exact-match environment of ``--large`` tasks and, as the baseline in
the same run, one of ``--small`` tasks to a directory registry, then runs the installed
``envhub eval ID --split train --policy reference -o OUT`` on each pulled environment, each in
a fresh process, and prints each eval process's peak RSS (``wait4``'s ``ru_maxrss``) and their
ratio. (A pulled environment, as evaluations usually run: a directory's digest is computed by
building the bundle, whose cost is the build's, not the run's.) Flat memory is a ratio near 1: a run that keeps
its records, or reads the file back for the summary, grows with them. Target: the large
run's peak RSS under 120 MiB. A measurement, not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envhub.scaffold import create_bundle

ENVHUB = str(Path(sys.executable).with_name("envhub"))


def bundle(root: Path, n: int) -> Path:
    path = create_bundle(f"bench/memory-{n}", root / f"memory-{n}")
    rows = "".join(json.dumps({"id": f"t{i}", "prompt": f"Repeat the word w{i}.", "answer": f"w{i}"}) + "\n"
                   for i in range(n))
    (path / "tasks" / "train.jsonl").write_text(rows)
    manifest = path / "envhub.toml"
    text = manifest.read_text()
    start, end = text.index("[verifier]"), text.index("[state]")
    manifest.write_text(text[:start] + '[verifier]\nkind = "exact-match"\nfield = "answer"\n\n' + text[end:])
    return path


def peak_rss_mib(env_id: str, out: Path, env: dict[str, str]) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of one ``envhub eval`` process."""
    start = time.perf_counter()
    proc = subprocess.Popen([ENVHUB, "eval", env_id, "--split", "train", "--policy", "reference", "-o",
                             str(out), "-c", "64"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"envhub eval failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return usage.ru_maxrss / 1024, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1000, help="tasks of the baseline run")
    parser.add_argument("--large", type=int, default=30000, help="tasks of the measured run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "ENVHUB_REGISTRY": (root / "registry").as_uri(), "ENVHUB_HOME": str(root / "home"),
               "ENVHUB_CACHE": str(root / "cache")}
        for n in (args.small, args.large):
            subprocess.run([ENVHUB, "push", str(bundle(root, n))], check=True, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        small_rss, small_s = peak_rss_mib(f"bench/memory-{args.small}", root / "small.jsonl", env)
        large_rss, large_s = peak_rss_mib(f"bench/memory-{args.large}", root / "large.jsonl", env)
        records = sum(1 for _ in (root / "large.jsonl").open())
    print(f"envhub eval, reference policy: {args.small:>6} records: peak RSS {small_rss:6.1f} MiB ({small_s:.1f} s)")
    print(f"envhub eval, reference policy: {records:>6} records: peak RSS {large_rss:6.1f} MiB ({large_s:.1f} s)")
    verdict = "met" if large_rss <= 120 else "missed"
    print(f"  ratio {large_rss / small_rss:.2f}x   target: the large run <= 120 MiB: {verdict}")


if __name__ == "__main__":
    main()
