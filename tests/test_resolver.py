"""Tests of envhub/project/_resolver.py: the cases under tests/data/resolver/, then direct tests.

A case is a TOML file (tests/data/resolver/README.md says the same, with an example):

    description = "what the case shows"              # required
    requested = ["acme/a>=1", "acme/b@2.0"]           # required: the project's requirements
    prereleases = true                                 # optional, default false
    preferred = { "acme/b" = "1.0" }                  # optional: versions an existing lock has
    xfail = "why, with a link"                         # optional: a known bug; the case must fail

    [index."acme/a"]                                   # every published version of acme/a
    "1.0" = { dependencies = { "acme/b" = ">=1" } }   # "" as a specifier: any version
    "2.0" = { yanked = "broken scorer" }              # yanked = "reason", or true for no reason

    [expected]                                         # either
    resolution = { "acme/a" = "1.0", "acme/b" = "1.0" }   # every pinned environment, nothing more
    # or an error: all of these, with at least one of explanation / message
    explanation = ["acme/a 1.0 needs acme/b>=2"]       # substrings of the error message
    message = "..."                                    # the whole message
    hint = "..."                                       # the whole hint

Unknown keys are refused, so a misspelt key cannot turn a case into one that passes by default.
"""

from __future__ import annotations

import sys
import tomllib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envhub.errors import EnvhubError, InvalidIdError
from envhub.project import Requirement, ResolutionError, parse_requirement, resolve
from envhub.registry import VersionEntry

CASES = Path(__file__).parent / "data" / "resolver"
CASE_FILES = sorted(CASES.glob("*.toml"))

_TOP_KEYS = {"description", "requested", "prereleases", "preferred", "xfail", "index", "expected"}
_VERSION_KEYS = {"dependencies", "yanked"}
_EXPECTED_KEYS = {"resolution", "explanation", "message", "hint"}


class MemoryIndex:
    """An index in memory, with the interface the resolver reads; counts ``versions()`` calls."""

    def __init__(self, entries: Mapping[str, Sequence[VersionEntry]]) -> None:
        self.entries = entries
        self.calls: Counter[str] = Counter()

    def versions(self, name: str) -> list[VersionEntry]:
        self.calls[name] += 1
        return list(self.entries.get(name, ()))

    def describe(self) -> str:
        return "the test index"


def entry(name: str, version: str, dependencies: Mapping[str, str] | None = None,
          yanked: bool | str = False) -> VersionEntry:
    return VersionEntry(
        name=name, version=version, digest="sha256:" + "0" * 64, size=1, published_at="2025-01-01T00:00:00Z",
        yanked=bool(yanked), yank_reason=yanked if isinstance(yanked, str) else None,
        dependencies=tuple(sorted((dependencies or {}).items())),
    )


@dataclass
class Case:
    path: Path
    description: str
    requested: list[str]
    index: MemoryIndex
    prereleases: bool = False
    preferred: dict[str, str] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    xfail: str | None = None


def _refuse_unknown(where: str, data: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")


def load_case(path: Path) -> Case:
    """A case file as a :class:`Case`; ValueError saying what is wrong with a malformed one."""
    data = tomllib.loads(path.read_text())
    _refuse_unknown(path.name, data, _TOP_KEYS)
    for key in ("description", "requested", "index", "expected"):
        if key not in data:
            raise ValueError(f"{path.name}: {key!r} is required")
    entries: dict[str, list[VersionEntry]] = {}
    # In file order, not sorted: the resolver must not rely on the index's order.
    for name, versions in data["index"].items():
        entries[name] = []
        for version, spec in versions.items():
            _refuse_unknown(f"{path.name}: index.{name}.{version}", spec, _VERSION_KEYS)
            entries[name].append(entry(name, version, spec.get("dependencies"), spec.get("yanked", False)))
    expected = data["expected"]
    _refuse_unknown(f"{path.name}: expected", expected, _EXPECTED_KEYS)
    is_error = bool({"explanation", "message"} & set(expected))
    if ("resolution" in expected) == is_error or ("hint" in expected and not is_error):
        raise ValueError(f"{path.name}: [expected] needs either resolution, or explanation/message (and hint)")
    return Case(path, data["description"], list(data["requested"]), MemoryIndex(entries),
                data.get("prereleases", False), dict(data.get("preferred", {})), expected, data.get("xfail"))


def run_case(case: Case) -> dict[str, str]:
    """The case's resolution as name -> version (raises what resolve raises)."""
    resolution = resolve([parse_requirement(r) for r in case.requested], case.index,
                         prereleases=case.prereleases, preferred=case.preferred)
    return {name: e.version for name, e in resolution.pins.items()}


def test_the_cases_are_there() -> None:
    # An empty glob would parametrize no test at all: say so instead of passing quietly.
    assert len(CASE_FILES) >= 35


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_case(path: Path, request: pytest.FixtureRequest) -> None:
    case = load_case(path)
    if case.xfail:
        # strict: once fixed, the case passes and this fails, so the marker comes off.
        request.applymarker(pytest.mark.xfail(reason=case.xfail, raises=ResolutionError, strict=True))
    expected = case.expected
    if "resolution" in expected:
        assert run_case(case) == expected["resolution"], case.description
    else:
        with pytest.raises(ResolutionError) as info:
            run_case(case)
        error = info.value
        missing = [part for part in expected.get("explanation", []) if part not in error.message]
        assert not missing, f"{case.description}\nnot in the message: {missing}\nmessage:\n{error.message}"
        if "message" in expected:
            assert error.message == expected["message"].strip("\n")
        if "hint" in expected:
            assert error.hint == expected["hint"]
    # Every name read once at most, however much backtracking the case needs.
    assert max(case.index.calls.values()) == 1


def test_load_case_refuses_a_misspelt_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('description = "x"\nrequested = ["acme/a"]\n[index."acme/a"]\n"1.0" = { yank = true }\n'
                    '[expected]\nresolution = { "acme/a" = "1.0" }\n')
    with pytest.raises(ValueError, match=r"index.acme/a.1.0: unknown key\(s\) \['yank'\]"):
        load_case(path)


# --- deep graphs, built here rather than written out ------------------------------------------


def chain(depth: int, versions: Sequence[str] = ("1.0", "2.0")) -> dict[str, list[VersionEntry]]:
    """acme/e0 -> acme/e1 -> ... : version V of each level needs the next level at >=V."""
    names = [f"acme/e{i}" for i in range(depth)]
    return {name: [entry(name, v, {names[i + 1]: f">={v}"} if i + 1 < depth else None) for v in versions]
            for i, name in enumerate(names)}


def test_a_chain_1000_deep() -> None:
    index = MemoryIndex(chain(1000))
    resolution = resolve([parse_requirement("acme/e0")], index)
    assert {name: e.version for name, e in resolution.pins.items()} == {f"acme/e{i}": "2.0" for i in range(1000)}
    assert resolution.dependencies["acme/e0"] == ["acme/e1"]
    assert resolution.dependencies["acme/e999"] == []
    assert set(index.calls.values()) == {1}


def test_a_cycle_1000_long_is_found_and_shortened_in_the_message() -> None:
    entries = chain(1000, versions=("1.0",))
    entries["acme/e999"] = [entry("acme/e999", "1.0", {"acme/e0": ""})]
    with pytest.raises(ResolutionError) as info:
        resolve([parse_requirement("acme/e500")], MemoryIndex(entries))
    assert info.value.message == (
        "dependency cycle: acme/e0 1.0 -> acme/e1 1.0 -> acme/e2 1.0 -> acme/e3 1.0 -> acme/e4 1.0 -> ... (991 more)"
        " -> acme/e996 1.0 -> acme/e997 1.0 -> acme/e998 1.0 -> acme/e999 1.0 -> acme/e0"
    )


def test_the_resolver_does_not_recurse_per_level() -> None:
    # A chain deeper than Python's recursion limit resolves: nothing walks it recursively.
    depth = sys.getrecursionlimit() + 200
    resolution = resolve([parse_requirement("acme/e0")], MemoryIndex(chain(depth, versions=("1.0",))))
    assert len(resolution.pins) == depth


# --- reading the index ---------------------------------------------------------------------------


def test_each_name_is_read_once_through_backtracking_and_explaining() -> None:
    # Every version of acme/a needs an acme/b that does not exist: the resolver tries all
    # five, then explains, and reads acme/a and acme/b once each.
    entries = {"acme/a": [entry("acme/a", f"{v}.0", {"acme/b": f">={v + 5}"}) for v in range(1, 6)],
               "acme/b": [entry("acme/b", "1.0")]}
    index = MemoryIndex(entries)
    with pytest.raises(ResolutionError) as info:
        resolve([parse_requirement("acme/a")], index)
    assert info.value.message == (
        "no set of versions satisfies every requirement:\n"
        "  acme/a 5.0 needs acme/b>=10 and acme/a 4.0 needs acme/b>=9 and acme/a 3.0 needs acme/b>=8 and "
        "acme/a 2.0 needs acme/b>=7 and acme/a 1.0 needs acme/b>=6, and no version matches "
        "(versions of acme/b: 1.0)"
    )
    assert index.calls == {"acme/a": 1, "acme/b": 1}


def test_names_that_are_not_needed_are_not_read() -> None:
    entries = chain(3) | {"acme/unrelated": [entry("acme/unrelated", "1.0")]}
    index = MemoryIndex(entries)
    resolve([parse_requirement("acme/e1")], index)
    assert dict(index.calls) == {"acme/e1": 1, "acme/e2": 1}


# --- parse_requirement ---------------------------------------------------------------------------

REQUIREMENTS = [
    ("acme/a", Requirement("acme/a"), None, False),
    ("acme/a>=1,<2", Requirement("acme/a", SpecifierSet(">=1,<2")), None, False),
    (" acme/a >= 1 ", Requirement("acme/a", SpecifierSet(">=1")), None, False),
    ("acme/a@1.2.0", Requirement("acme/a", SpecifierSet("==1.2.0")), Version("1.2.0"), False),
    ("acme/a==1.2.0", Requirement("acme/a", SpecifierSet("==1.2.0")), Version("1.2.0"), False),
    ("acme/a===1.2.0", Requirement("acme/a", SpecifierSet("===1.2.0")), Version("1.2.0"), False),
    ("acme/a==1.*", Requirement("acme/a", SpecifierSet("==1.*")), None, False),
    ("acme/a~=1.2", Requirement("acme/a", SpecifierSet("~=1.2")), None, False),
    ("acme/a@2.0rc1", Requirement("acme/a", SpecifierSet("==2.0rc1")), Version("2.0rc1"), True),
    ("acme/a>=2.0b1,<3", Requirement("acme/a", SpecifierSet(">=2.0b1,<3")), None, True),
]


@pytest.mark.parametrize(("text", "requirement", "exact", "prereleases"), REQUIREMENTS,
                         ids=[r[0].strip() for r in REQUIREMENTS])
def test_parse_requirement(text: str, requirement: Requirement, exact: Version | None, prereleases: bool) -> None:
    parsed = parse_requirement(text)
    assert parsed == requirement
    assert parsed.exact == exact
    assert parsed.wants_prereleases is prereleases


def test_str_of_a_requirement_parses_back() -> None:
    for text, requirement, _, _ in REQUIREMENTS:
        assert parse_requirement(str(requirement)) == requirement, text


BAD_REQUIREMENTS = [
    ("acme/a===foo", "invalid version specifier '===foo' in 'acme/a===foo': '===foo' names no PEP 440 version, so "
                     "no published version can match it; write '===' with a version such as '===1.0.0', or use '=='"),
    ("acme", "invalid environment id 'acme': expected 'namespace/name', e.g. 'acme/sql-shop'"),
    ("Acme/A>=1", "invalid environment id 'Acme/A': ids are lowercase; did you mean 'acme/a'?"),
    ("acme/a@", "invalid version '' in 'acme/a@': not a PEP 440 version (e.g. '1.2.0', '2.0rc1')"),
    ("acme/a@1.x", "invalid version '1.x' in 'acme/a@1.x': not a PEP 440 version (e.g. '1.2.0', '2.0rc1')"),
    ("acme/a>=", "invalid version specifier '>=' in 'acme/a>=': expected PEP 440 clauses such as "
                 "'>=1.2,<2' or '==1.4.*'"),
    ("acme/a>=1,<<2", "invalid version specifier '>=1,<<2' in 'acme/a>=1,<<2': expected PEP 440 clauses such as "
                      "'>=1.2,<2' or '==1.4.*'"),
    ("acme/a~=1", "invalid version specifier '~=1' in 'acme/a~=1': expected PEP 440 clauses such as "
                  "'>=1.2,<2' or '==1.4.*'"),
    (None, "invalid environment id None: expected a string like 'acme/sql-shop'"),
]


@pytest.mark.parametrize(("text", "message"), BAD_REQUIREMENTS, ids=[str(r[0]) for r in BAD_REQUIREMENTS])
def test_parse_requirement_refuses(text: Any, message: str) -> None:
    with pytest.raises(InvalidIdError) as info:
        parse_requirement(text)
    assert info.value.message == message
    assert isinstance(info.value, EnvhubError)
    # Nothing of packaging's shows: no chained InvalidVersion / InvalidSpecifier traceback.
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ or info.value.__context__ is None


def test_an_invalid_specifier_in_the_index_is_a_resolution_error() -> None:
    index = MemoryIndex({"acme/a": [entry("acme/a", "1.0", {"acme/b": ">>1"})], "acme/b": [entry("acme/b", "1.0")]})
    with pytest.raises(ResolutionError) as info:
        resolve([parse_requirement("acme/a")], index)
    assert info.value.message == ("acme/a 1.0 in the test index has an invalid [dependencies] specifier: "
                                  "Invalid specifier: '>>1'")
    assert info.value.hint == "publish a fixed version, or yank this one"


def test_the_resolution_says_who_needs_whom() -> None:
    index = MemoryIndex({"acme/a": [entry("acme/a", "1.0", {"acme/c": ">=1", "acme/b": ""})],
                         "acme/b": [entry("acme/b", "1.0", {"acme/c": "<2"})],
                         "acme/c": [entry("acme/c", "1.0"), entry("acme/c", "2.0")]})
    requirements = [parse_requirement("acme/a")]
    resolution = resolve(requirements, index)
    assert resolution.dependencies == {"acme/a": ["acme/b", "acme/c"], "acme/b": ["acme/c"], "acme/c": []}
    assert resolution.roots() == ["acme/a"]
    assert resolution.requirements == requirements
    assert resolution.pins["acme/c"] == index.entries["acme/c"][0]
