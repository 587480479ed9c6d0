"""Resolving environment requirements to exact versions, with resolvelib.

Candidates come from an :class:`Index` (every configured registry, first one first); each
candidate's dependencies come from its index entry, so resolving downloads no archive.
The rules (``spec/lockfile.md``): the highest non-yanked version first; pre-releases only
when a requirement names one or ``prereleases=True``; a yanked version only when a
requirement pins it exactly (``==1.2.0``, ``@1.2.0``) or the lock already has it. When
there is no solution the error says why in the user's terms, from resolvelib's causes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from packaging.specifiers import SpecifierSet
from packaging.version import Version
from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, ResolutionTooDeep, Resolver

from envhub.errors import EnvhubError
from envhub.ids import parse_ref
from envhub.registry._base import VersionEntry

__all__ = ["Index", "Requirement", "Resolution", "ResolutionError", "parse_requirement", "resolve"]

#: Who asked for a root requirement, in messages.
ROOT = "your project"


class ResolutionError(EnvhubError):
    """No set of versions satisfies every requirement (the message says why)."""


class Index(Protocol):
    """Where candidates come from: every published version of a name, oldest first,
    yanked ones included, empty for an unknown name."""

    def versions(self, name: str) -> Sequence[VersionEntry]: ...

    def describe(self) -> str:
        """Where names are looked up, for messages ("the registry at ...")."""
        ...


@dataclass(frozen=True)
class Requirement:
    """An environment and the versions it may have."""

    name: str
    specifier: SpecifierSet = field(default_factory=SpecifierSet)

    @property
    def exact(self) -> Version | None:
        """The version pinned by ``==V`` (no wildcard), if that is the requirement."""
        specs = list(self.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and not specs[0].version.endswith("*"):
            return Version(specs[0].version)
        return None

    @property
    def wants_prereleases(self) -> bool:
        """PEP 440: a specifier that names a pre-release admits pre-releases."""
        return any(s.operator != "===" and Version(s.version.removesuffix(".*")).is_prerelease
                   for s in self.specifier)

    def __str__(self) -> str:
        return f"{self.name}{self.specifier}"


def parse_requirement(text: str) -> Requirement:
    """``acme/a``, ``acme/a>=1,<2`` or ``acme/a@1.2.0`` (same as ``==1.2.0``)."""
    ref = parse_ref(text)
    if ref.version is not None:
        return Requirement(str(ref.name), _specifier(f"=={ref.version}"))
    return Requirement(str(ref.name), ref.specifier or SpecifierSet())


@functools.lru_cache(maxsize=65536)
def _specifier(text: str) -> SpecifierSet:
    return SpecifierSet(text)


@functools.lru_cache(maxsize=262144)
def _version(text: str) -> Version:
    return Version(text)


@dataclass(frozen=True, eq=False)
class Candidate:
    entry: VersionEntry
    version: Version

    @property
    def name(self) -> str:
        return self.entry.name

    def __str__(self) -> str:
        return f"{self.entry.name} {self.entry.version}"


@dataclass
class Resolution:
    """The chosen version of every environment, and who needs whom."""

    requirements: list[Requirement]
    pins: dict[str, VersionEntry]
    #: name -> names of its dependencies (all in ``pins``).
    dependencies: dict[str, list[str]]

    def roots(self) -> list[str]:
        return sorted({r.name for r in self.requirements})


class _Provider(AbstractProvider):  # type: ignore[type-arg]
    def __init__(self, index: Index, *, prereleases: bool, preferred: Mapping[str, str]) -> None:
        self.index = index
        self.prereleases = prereleases
        self.preferred = {name: _version(v) for name, v in preferred.items()}
        self._candidates: dict[str, list[Candidate]] = {}

    def candidates(self, name: str) -> list[Candidate]:
        """Every version of ``name``, newest first (the resolver's order of preference)."""
        found = self._candidates.get(name)
        if found is None:
            found = [Candidate(e, _version(e.version)) for e in self.index.versions(name)]
            found.sort(key=lambda c: c.version, reverse=True)
            self._candidates[name] = found
        return found

    def identify(self, requirement_or_candidate: Requirement | Candidate) -> str:
        return requirement_or_candidate.name

    def narrow_requirement_selection(self, identifiers: Iterable[str], resolutions: Mapping[str, Candidate],
                                     candidates: Mapping[str, Iterator[Candidate]],
                                     information: Mapping[str, Iterator[Any]],
                                     backtrack_causes: Sequence[Any]) -> Iterable[str]:
        # Work on what just caused a backtrack first (resolvelib's advice); otherwise keep
        # the preference scan short: it runs every round, over what is narrowed here.
        identifiers = list(identifiers)
        causes = {c.requirement.name for c in backtrack_causes} | {c.parent.name for c in backtrack_causes if c.parent}
        hot = [i for i in identifiers if i in causes]
        return hot or identifiers[:32]

    def get_preference(self, identifier: str, resolutions: Mapping[str, Candidate],
                       candidates: Mapping[str, Iterator[Candidate]], information: Mapping[str, Iterator[Any]],
                       backtrack_causes: Sequence[Any]) -> tuple[bool, int, str]:
        pinned = any(info.requirement.exact is not None for info in information[identifier])
        left = sum(1 for _ in candidates[identifier])
        # Exact pins first, then the most constrained, then by name for a stable order.
        return (not pinned, left, identifier)

    def find_matches(self, identifier: str, requirements: Mapping[str, Iterator[Requirement]],
                     incompatibilities: Mapping[str, Iterator[Candidate]]) -> list[Candidate]:
        reqs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}
        pre = self.prereleases or any(r.wants_prereleases for r in reqs)
        exact = {r.exact for r in reqs if r.exact is not None}
        preferred = self.preferred.get(identifier)
        matches = []
        for c in self.candidates(identifier):
            if c.version in bad:
                continue
            if c.entry.yanked and c.version not in exact and c.version != preferred:
                continue
            if c.version.is_prerelease and not pre and c.version not in exact and c.version != preferred:
                continue
            if all(r.specifier.contains(c.version, prereleases=True) for r in reqs):
                matches.append(c)
        if preferred is not None:
            # Keep what the lock has while it still fits (``envhub lock`` without --upgrade).
            matches.sort(key=lambda c: c.version != preferred)
        return matches

    def is_satisfied_by(self, requirement: Requirement, candidate: Candidate) -> bool:
        return requirement.specifier.contains(candidate.version, prereleases=True)

    def get_dependencies(self, candidate: Candidate) -> list[Requirement]:
        return [Requirement(name, _specifier(spec)) for name, spec in candidate.entry.dependencies]


def resolve(requirements: Sequence[Requirement], index: Index, *, prereleases: bool = False,
            preferred: Mapping[str, str] | None = None, max_rounds: int = 200_000) -> Resolution:
    """Choose a version of every environment ``requirements`` need, transitively.

    ``preferred`` maps names to the versions a lock has: kept while they still satisfy
    every requirement. Raises :class:`ResolutionError` when there is no solution (saying
    which requirements conflict) or the graph has a cycle.
    """
    provider = _Provider(index, prereleases=prereleases, preferred=preferred or {})
    resolver: Resolver[Requirement, Candidate, str] = Resolver(provider, BaseReporter())
    try:
        result = resolver.resolve(requirements, max_rounds=max_rounds)
    except ResolutionImpossible as e:
        raise ResolutionError(explain(e.causes, provider), hint=_hint(e.causes, provider)) from None
    except ResolutionTooDeep as e:
        raise ResolutionError(f"gave up after {e.round_count} rounds of backtracking",
                              hint="narrow your requirements' specifiers (envhub tree shows who needs what)") from None
    pins = {name: c.entry for name, c in result.mapping.items()}
    dependencies = {name: sorted({dep for dep, _ in entry.dependencies}) for name, entry in pins.items()}
    cycle = _find_cycle(dependencies)
    if cycle:
        path = " -> ".join(f"{n} {pins[n].version}" for n in cycle[:-1]) + f" -> {cycle[-1]}"
        raise ResolutionError(f"dependency cycle: {path}",
                              hint="an environment cannot depend on itself, directly or through others; "
                                   "remove one of these dependencies")
    return Resolution(list(requirements), pins, dependencies)


def _find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle as a path that returns to its start, or None. Iterative: deep chains are fine."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(graph.get(start, ()))]
        state[start] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                state[path.pop()] = 2
                continue
            if state.get(child) == 1:
                return path[path.index(child):] + [child]
            if child not in state and child in graph:
                state[child] = 1
                path.append(child)
                stack.append(iter(graph[child]))
    return None


# --- explanations -----------------------------------------------------------------------


def _who(info: Any) -> str:
    return ROOT if info.parent is None else f"{info.parent.name} {info.parent.entry.version}"


def _need(info: Any) -> str:
    spec = str(info.requirement.specifier)
    return f"{info.requirement.name}{spec}" if spec else f"any version of {info.requirement.name}"


def explain(causes: Sequence[Any], provider: _Provider) -> str:
    """Say why ``causes`` (resolvelib's RequirementInformation) cannot all hold:
    "acme/a 1.0 needs acme/b>=2, but acme/c 3.1 needs acme/b<2"."""
    by_name: dict[str, list[Any]] = {}
    for info in causes:
        by_name.setdefault(info.requirement.name, []).append(info)
    lines = []
    for name, infos in by_name.items():
        seen: dict[tuple[str, str], Any] = {}
        for info in infos:
            seen.setdefault((_who(info), str(info.requirement.specifier)), info)
        infos = list(seen.values())
        known = provider.candidates(name)
        if not known:
            asked = ", ".join(f"{_who(i)} needs it" for i in infos)
            lines.append(f"{name} is not in {provider.index.describe()} ({asked})")
            continue
        needs = [f"{_who(i)} needs {_need(i)}" for i in infos]
        line = ", but ".join(needs) if len(needs) > 1 else f"{needs[0]}, and no version matches"
        notes = _near_misses(known, [i.requirement for i in infos], provider.prereleases)
        versions = ", ".join(c.entry.version + (" (yanked)" if c.entry.yanked else "") for c in reversed(known[:12]))
        more = f"{len(known) - 12} older and " if len(known) > 12 else ""
        lines.append(f"{line} ({more}versions of {name}: {versions}){notes}")
    return "no set of versions satisfies every requirement:\n  " + "\n  ".join(lines)


def _near_misses(known: list[Candidate], reqs: list[Requirement], prereleases: bool) -> str:
    """Versions that would match but for being yanked or a pre-release."""
    fits = [c for c in known if all(r.specifier.contains(c.version, prereleases=True) for r in reqs)]
    notes = []
    yanked = [c for c in fits if c.entry.yanked]
    if yanked:
        c = yanked[0]
        reason = f": {c.entry.yank_reason}" if c.entry.yank_reason else ""
        notes.append(f"{c} would match but is yanked{reason}; pin it exactly ({c.name}=={c.entry.version}) "
                     "to use it anyway")
    pre = [c for c in fits if c.version.is_prerelease and not c.entry.yanked]
    if pre and not prereleases:
        c = pre[0]
        notes.append(f"{c} would match but is a pre-release; ask for it ({c.name}>={c.entry.version}) "
                     "or pass --prerelease")
    return "".join(f"\n    {n}" for n in notes)


def _hint(causes: Sequence[Any], provider: _Provider) -> str:
    if any(not provider.candidates(info.requirement.name) for info in causes):
        return "check the name (envhub search), or add the registry that has it under [tool.envhub.registries]"
    if any(info.parent is None for info in causes):
        return "loosen the specifier in [tool.envhub] environments, or choose versions that agree"
    return "loosen your requirements, or ask the environments' authors to widen their [dependencies]"
