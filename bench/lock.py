"""How long does resolving take (the resolution step of ``envhub lock``), and how does it grow?

    .venv/bin/python bench/lock.py [--envs 2000] [--versions 30] [--repeat 3] [--seed 1] [--profile]

A synthetic registry, generated in memory from a seeded random generator: ``--envs``
environments (``bench/e00000`` ...) with ``--versions`` versions each (1.0 ... 3.9). Each
version depends on 0-4 lower-numbered environments, so there are no cycles, with
specifiers of three kinds:

- most (90%) a wide range ``>=a,<b`` (a among the oldest 13 versions, b among the newest
  12), so most requirements on one environment overlap;
- some (8-10%) a narrow range of three versions, which can exclude what another parent
  needs, so the resolver must go back to an older version of a parent;
- a few (2%, only in the newest three versions of an environment) ``>=9``, which no
  version satisfies: the newest version cannot be used and an older one must be found.

The project asks for the top 1% of the environments (``--roots``), by bare name.

It times ``resolve()`` (envhub.project._resolver, what ``envhub lock`` runs) on that graph,
then on one ten times bigger (ten times the environments and the roots), and prints the
growth ratio next to the target (<= 12x). Each resolution is checked (every pin satisfies
every requirement on it); a wrong one exits 1. The baseline, measured in the same run: reading
the versions of every environment the resolution read, and parsing every version and
every dependency specifier once (with packaging, as the resolver does); no resolver can
do less. Medians of ``--repeat`` runs. ``--profile`` prints where the time of one
bigger resolution goes. A measurement, not a test: it exits 0 whatever the timing.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from _common import median, runs_text, verdict

from envhub.project._resolver import Requirement, Resolution, parse_requirement, resolve
from envhub.registry._base import VersionEntry

TARGET = 12.0


class SyntheticIndex:
    """An in-memory index with the interface the resolver reads (``versions``, ``describe``).
    Records which names were read, for the baseline."""

    def __init__(self, entries: dict[str, list[VersionEntry]]) -> None:
        self.entries = entries
        self.read: list[str] = []

    def versions(self, name: str) -> list[VersionEntry]:
        self.read.append(name)
        return self.entries.get(name, [])

    def describe(self) -> str:
        return "the synthetic registry"


def _name(i: int) -> str:
    return f"bench/e{i:05d}"


def _version(k: int) -> str:
    return f"{1 + k // 10}.{k % 10}"


def generate(envs: int, versions: int, seed: int) -> dict[str, list[VersionEntry]]:
    """``envs`` environments of ``versions`` versions each, oldest first (see the docstring)."""
    rng = random.Random(seed)
    entries: dict[str, list[VersionEntry]] = {}
    for i in range(envs):
        name = _name(i)
        entries[name] = []
        for k in range(versions):
            deps: dict[str, str] = {}
            for _ in range(rng.randint(0, 4) if i else 0):
                kind = rng.random()
                if kind < 0.02 and k >= versions - 3:
                    spec = ">=9"
                elif kind < 0.10:
                    lo = rng.randrange(versions - 2)
                    spec = f">={_version(lo)},<{_version(lo + 3)}"
                else:
                    spec = f">={_version(rng.randrange(13))},<{_version(versions - rng.randrange(12))}"
                deps[_name(rng.randrange(i))] = spec
            entries[name].append(VersionEntry(
                name=name, version=_version(k), digest="sha256:" + "0" * 64, size=1,
                published_at="2025-01-01T00:00:00Z", dependencies=tuple(sorted(deps.items()))))
    return entries


@dataclass
class Sample:
    resolve_s: list[float]
    baseline_s: list[float]
    pins: int
    names_read: int


def _baseline(entries: dict[str, list[VersionEntry]], names: Sequence[str]) -> None:
    # Uncached, unlike the resolver: this is the floor, parsing each thing once.
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    index = SyntheticIndex(entries)
    for name in names:
        for entry in index.versions(name):
            Version(entry.version)
            for _, spec in entry.dependencies:
                SpecifierSet(spec)


def measure(envs: int, versions: int, roots: int, seed: int, repeat: int) -> Sample:
    entries = generate(envs, versions, seed)
    requirements = [parse_requirement(_name(i)) for i in range(envs - roots, envs)]
    sample = Sample([], [], 0, 0)
    for _ in range(repeat):
        # Turns: resolve, then the baseline on what it read. Parsed versions and
        # specifiers are cached across runs by the resolver's module: clear them, so
        # every run starts as `envhub lock` does, in a fresh process.
        _clear_caches()
        index = SyntheticIndex(entries)
        start = time.perf_counter()
        resolution: Resolution = resolve(requirements, index)
        sample.resolve_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        _baseline(entries, sorted(set(index.read)))
        sample.baseline_s.append(time.perf_counter() - start)
        sample.pins, sample.names_read = len(resolution.pins), len(set(index.read))
        check(resolution, requirements)
    return sample


def check(resolution: Resolution, requirements: Sequence[Requirement]) -> None:
    """Exit 1 unless every pin satisfies every requirement on it, the project's and its parents'."""
    from packaging.specifiers import SpecifierSet

    pins = resolution.pins
    needs = [(r.name, r.specifier, "the project") for r in requirements]
    needs += [(dep, SpecifierSet(spec), e.ref) for e in pins.values() for dep, spec in e.dependencies]
    for name, spec, who in needs:
        if name not in pins or not spec.contains(pins[name].version, prereleases=True):
            pinned = pins[name].version if name in pins else "nothing"
            sys.exit(f"error: wrong resolution: {who} needs {name}{spec}, and {name} is pinned at {pinned}")


def _clear_caches() -> None:
    from envhub.project import _resolver

    for cached in (_resolver._specifier, _resolver._version):
        cached.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=2000, help="environments in the small graph (default: %(default)s)")
    parser.add_argument("--versions", type=int, default=30, help="versions of each (default: %(default)s)")
    parser.add_argument("--roots", type=float, default=1.0, help="percent of the environments the project asks for, "
                                                                 "from the top (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each size (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default: %(default)s)")
    parser.add_argument("--profile", action="store_true", help="profile one resolution of the bigger graph")
    args = parser.parse_args(argv)
    if args.envs < 10 or args.repeat < 1 or not 2 <= args.versions <= 90:
        parser.error("--envs must be at least 10, --repeat at least 1, --versions between 2 and 90")

    results = {}
    for scale in (1, 10):
        envs = args.envs * scale
        roots = max(1, round(envs * args.roots / 100))
        print(f"generating {envs:,} environments x {args.versions} versions ...", file=sys.stderr)
        results[scale] = s = measure(envs, args.versions, roots, args.seed, args.repeat)
        t, b = median(s.resolve_s), median(s.baseline_s)
        print(f"{envs:,} environments, {roots} roots: {s.pins:,} pinned, {s.names_read:,} read, "
              f"median of {args.repeat} run(s)")
        print(f"  baseline (read + parse what it read): {b:8.3f} s   runs: {runs_text(s.baseline_s)}")
        print(f"  resolve:                              {t:8.3f} s   runs: {runs_text(s.resolve_s)}")
        print(f"  resolve / baseline: {t / b:.1f}x;  {t / s.pins * 1e3:.2f} ms per pin")

    small, big = (median(results[k].resolve_s) for k in (1, 10))
    growth = big / small
    pins = results[10].pins / results[1].pins
    print(f"growth, ten times the graph: {growth:.1f}x the time for {pins:.1f}x the pins  "
          f"({verdict(growth, TARGET)})")

    if args.profile:
        envs = args.envs * 10
        entries = generate(envs, args.versions, args.seed)
        requirements = [parse_requirement(_name(i)) for i in range(envs - max(1, round(envs * args.roots / 100)), envs)]
        _clear_caches()
        profiler = cProfile.Profile()
        profiler.runcall(resolve, requirements, SyntheticIndex(entries))
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
