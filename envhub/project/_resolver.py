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
import operator
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, ResolutionTooDeep, Resolver

try:  # resolvelib's own loop, made cheaper (see _Resolution); it is private: the public Resolver if it moves
    from resolvelib.resolvers.resolution import Resolution as _ResolvelibResolution
    from resolvelib.resolvers.resolution import _build_result
    from resolvelib.structs import State
except ImportError:  # pragma: no cover - another resolvelib
    _ResolvelibResolution = None  # type: ignore[misc,assignment]

from envhub.errors import EnvhubError
from envhub.ids import parse_ref
from envhub.registry import VersionEntry

__all__ = ["Index", "Requirement", "Resolution", "ResolutionError", "parse_requirement", "resolve"]

#: Who asked for a root requirement, in messages.
ROOT = "your project"


class ResolutionError(EnvhubError):
    """No set of versions satisfies every requirement (the message says why)."""


class Index(Protocol):
    """Where candidates come from: every published version of a name, oldest first,
    yanked ones included, empty for an unknown name."""

    def versions(self, name: str) -> Sequence[VersionEntry]:
        """Every published version of ``name``, oldest first; empty for an unknown name."""
        ...

    def describe(self) -> str:
        """Where names are looked up, for messages ("the registry at ...")."""
        ...


@dataclass(frozen=True)
class Requirement:
    """An environment and the versions it may have."""

    name: str
    specifier: SpecifierSet = field(default_factory=SpecifierSet)

    # Cached: the resolver asks every round. (A frozen dataclass still has a __dict__.)
    @functools.cached_property
    def exact(self) -> Version | None:
        """The version pinned by ``==V`` or ``===V`` (no wildcard), if that is the requirement."""
        specs = list(self.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and not specs[0].version.endswith("*"):
            try:
                return Version(specs[0].version)
            except InvalidVersion:  # '===foo' is valid PEP 440, and matches no version
                return None
        return None

    @functools.cached_property
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
    #: id(specifier) -> (specifier, whether it contains this version). resolvelib checks
    #: every pin against every requirement on it each round, and SpecifierSet.contains
    #: (and hashing a SpecifierSet) costs microseconds; the entry keeps the specifier
    #: alive, so its id is not reused while cached.
    fits: dict[int, tuple[SpecifierSet, bool]] = field(default_factory=dict, repr=False)

    def satisfies(self, specifier: SpecifierSet) -> bool:
        hit = self.fits.get(id(specifier))
        if hit is None:
            hit = self.fits[id(specifier)] = (specifier, specifier.contains(self.version, prereleases=True))
        return hit[1]

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
        """The names the requirements asked for directly, sorted."""
        return sorted({r.name for r in self.requirements})


class _Provider(AbstractProvider):
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
        if not backtrack_causes:
            return identifiers[:32]
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
            if all(c.satisfies(r.specifier) for r in reqs):
                matches.append(c)
        if preferred is not None:
            # Keep what the lock has while it still fits (``envhub lock`` without --upgrade).
            matches.sort(key=lambda c: c.version != preferred)
        return matches

    def is_satisfied_by(self, requirement: Requirement, candidate: Candidate) -> bool:
        return candidate.satisfies(requirement.specifier)

    def get_dependencies(self, candidate: Candidate) -> list[Requirement]:
        try:
            return [Requirement(name, _specifier(spec)) for name, spec in candidate.entry.dependencies]
        except InvalidSpecifier as e:
            # A registry validates [dependencies] when publishing; an index edited by hand,
            # or written by another tool, may still hold anything.
            raise ResolutionError(f"{candidate} in {self.index.describe()} has an invalid [dependencies] "
                                  f"specifier: {e}",
                                  hint="publish a fixed version, or yank this one") from e


if _ResolvelibResolution is not None:
    class _Resolution(_ResolvelibResolution):
        """resolvelib's resolution loop, with what it costs cut (not what it decides).

        - Each incompatible candidate kept once: on every backjump resolvelib's
          ``_patch_criteria`` appends the current criterion's incompatibilities to the broken
          state's copy, which already holds them, so the lists doubled each time; backtracking
          up a 30-deep chain made lists of 2**27 candidates and took minutes
          (``tests/data/resolver/deep-chain-30-backtracks-to-the-top.toml``), now 0.2 s.
        - Every round resolvelib copies the state and asks, for every criterion, whether its
          pin still satisfies it: the copies and the answers are made cheap below. The work
          per round still grows with the number of pins (``bench/lock.py``).
        """

        def __init__(self, provider: _Provider, reporter: BaseReporter) -> None:
            super().__init__(provider, reporter)
            self._satisfying: dict[tuple[int, int], tuple[Any, Candidate, bool]] = {}

        def _patch_criteria(self, incompatibilities_from_broken: list[tuple[str, list[Candidate]]]) -> bool:
            patched: bool = super()._patch_criteria(incompatibilities_from_broken)
            for _, incompatibilities in incompatibilities_from_broken:
                if len(incompatibilities) > 1:  # the lists the patched criteria now hold
                    incompatibilities[:] = {id(c): c for c in incompatibilities}.values()
            return patched

        def _push_new_state(self) -> None:
            # A dict, not resolvelib's OrderedDict, for the pins: the same order, the same
            # popitem() (the last pin), and copied 30 times faster, once per round.
            base = self._states[-1]
            self._states.append(State(mapping=dict(base.mapping), criteria=base.criteria.copy(),
                                      backtrack_causes=base.backtrack_causes[:]))

        def _is_current_pin_satisfying(self, name: str, criterion: Any) -> bool:
            # Asked for every criterion every round, though few change in a round: a
            # criterion is replaced, never changed, so the answer for this criterion
            # object and this pin holds. The entry keeps both alive, so no id is reused.
            pin = self.state.mapping.get(name)
            if pin is None:
                return False
            key = (id(criterion), id(pin))
            hit = self._satisfying.get(key)
            if hit is None:
                fits = all(pin.satisfies(r.specifier) for r in criterion.iter_requirement())
                hit = self._satisfying[key] = (criterion, pin, fits)
            return hit[2]


def resolve(requirements: Sequence[Requirement], index: Index, *, prereleases: bool = False,
            preferred: Mapping[str, str] | None = None, max_rounds: int = 200_000) -> Resolution:
    """Choose a version of every environment ``requirements`` need, transitively.

    ``preferred`` maps names to the versions a lock has: kept while they still satisfy
    every requirement. Raises :class:`ResolutionError` when there is no solution (saying
    which requirements conflict) or the graph has a cycle.
    """
    provider = _Provider(index, prereleases=prereleases, preferred=preferred or {})
    try:
        if _ResolvelibResolution is None:
            result = Resolver(provider, BaseReporter()).resolve(requirements, max_rounds=max_rounds)
        else:
            result = _build_result(_Resolution(provider, BaseReporter()).resolve(requirements, max_rounds))
    except ResolutionImpossible as e:
        raise ResolutionError(explain(e.causes, provider), hint=_hint(e.causes, provider)) from None
    except ResolutionTooDeep as e:
        raise ResolutionError(f"gave up after {e.round_count} rounds of backtracking",
                              hint="narrow your requirements' specifiers (envhub tree shows who needs what)") from None
    pins = {name: c.entry for name, c in result.mapping.items()}
    dependencies = {name: sorted({dep for dep, _ in entry.dependencies}) for name, entry in pins.items()}
    cycle = _find_cycle(dependencies)
    if cycle:
        steps = [f"{n} {pins[n].version}" for n in cycle[:-1]]
        if len(steps) > 10:  # a long cycle is still read from both ends
            steps[5:-4] = [f"... ({len(steps) - 9} more)"]
        path = " -> ".join(steps) + f" -> {cycle[-1]}"
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


def _need(name: str, specifier: SpecifierSet) -> str:
    return f"{name}{specifier}" if str(specifier) else f"any version of {name}"


def _versions_text(versions: Sequence[str]) -> str:
    """'1.0', '1.0 and 2.0', '3.0, 2.0 and 1.0', '5.0, 4.0, 3.0 and 2 older versions'."""
    if len(versions) > 4:
        return f"{', '.join(versions[:3])} and {len(versions) - 3} older versions"
    return versions[0] if len(versions) == 1 else f"{', '.join(versions[:-1])} and {versions[-1]}"


def _askers(infos: Sequence[Any]) -> dict[str, dict[str, tuple[SpecifierSet, list[Candidate]]]]:
    """Who asked for one name: the project's requirements, or each parent's, by what they
    asked (specifier text) and which of the parent's versions asked it."""
    askers: dict[str, dict[str, tuple[SpecifierSet, list[Candidate]]]] = {}
    for info in infos:
        who = ROOT if info.parent is None else info.parent.name
        spec = info.requirement.specifier
        by_spec = askers.setdefault(who, {})
        _, parents = by_spec.setdefault(str(spec), (spec, []))
        if info.parent is not None and info.parent not in parents:
            parents.append(info.parent)
    if ROOT in askers:
        # The project's requirements on one name hold together: say them as one.
        combined = functools.reduce(operator.and_, (spec for spec, _ in askers[ROOT].values()))
        askers[ROOT] = {str(combined): (combined, [])}
    return askers


def _said(who: str, by_spec: Mapping[str, tuple[SpecifierSet, list[Candidate]]], name: str | None) -> str:
    """"acme/a 1.0 needs acme/b>=2", or with no ``name`` "acme/a 1.0 and 2.0 need it": what
    one asker needs. The versions of one parent are alternatives, each of which was tried."""
    if name is None:  # what they asked does not matter: merge the specifiers
        merged = [c for _, parents in by_spec.values() for c in parents]
        by_spec = {"": (SpecifierSet(), list(dict.fromkeys(merged)))}
    parts = []
    for spec, parents in by_spec.values():
        need_text = "it" if name is None else _need(name, spec)
        if who == ROOT:
            parts.append(f"{ROOT} needs {need_text}")
            continue
        versions = [c.entry.version for c in sorted(parents, key=lambda c: c.version, reverse=True)]
        verb = "needs" if len(versions) == 1 else "need"
        parts.append(f"{who} {_versions_text(versions)} {verb} {need_text}")
    return " and ".join(parts)


def explain(causes: Collection[Any], provider: _Provider) -> str:
    """Say why ``causes`` (resolvelib's RequirementInformation) cannot all hold:
    "acme/a 1.0 needs acme/b>=2, but acme/c 3.1 needs acme/b<2"."""
    by_name: dict[str, list[Any]] = {}
    for info in causes:
        by_name.setdefault(info.requirement.name, []).append(info)
    lines = []
    for name, infos in by_name.items():
        askers = _askers(infos)
        known = provider.candidates(name)
        if not known:
            asked = ", ".join(_said(who, by_spec, None) for who, by_spec in askers.items())
            lines.append(f"{name} is not in {provider.index.describe()} ({asked})")
            continue
        needs = [_said(who, by_spec, name) for who, by_spec in askers.items()]
        line = ", but ".join(needs) if len(needs) > 1 else f"{needs[0]}, and no version matches"
        notes = _near_misses(known, askers, provider.prereleases)
        shown = ", ".join(c.entry.version + (" (yanked)" if c.entry.yanked else "") for c in reversed(known[:12]))
        which = f"the newest 12 of {len(known)} versions" if len(known) > 12 else "versions"
        lines.append(f"{line} ({which} of {name}: {shown}){notes}")
    return "no set of versions satisfies every requirement:\n  " + "\n  ".join(lines)


def _near_misses(known: list[Candidate], askers: Mapping[str, Mapping[str, tuple[SpecifierSet, list[Candidate]]]],
                 prereleases: bool) -> str:
    """Versions that would match but for being yanked or a pre-release: a version matches
    when every asker accepts it (a parent does when one of its tried versions does)."""
    fits = [c for c in known
            if all(any(c.satisfies(spec) for spec, _ in by_spec.values()) for by_spec in askers.values())]
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


def _hint(causes: Collection[Any], provider: _Provider) -> str:
    if any(not provider.candidates(info.requirement.name) for info in causes):
        return "check the name (envhub search), or add the registry that has it under [tool.envhub.registries]"
    if any(info.parent is None for info in causes):
        return "loosen the specifier in [tool.envhub] environments, or choose versions that agree"
    return "loosen your requirements, or ask the environments' authors to widen their [dependencies]"
