from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envhub.errors import EnvhubError, InvalidIdError
from envhub.ids import EnvName, EnvRef, parse_name, parse_ref, parse_specifier, parse_version

VALID_REFS = [
    ("acme/sql-shop", EnvRef(EnvName("acme", "sql-shop")), "acme/sql-shop"),
    ("acme/sql-shop@1.2.0", EnvRef(EnvName("acme", "sql-shop"), version=Version("1.2.0")), "acme/sql-shop@1.2.0"),
    ("acme/sql-shop>=1.2,<2", EnvRef(EnvName("acme", "sql-shop"), SpecifierSet(">=1.2,<2")), "acme/sql-shop<2,>=1.2"),
    ("acme/sql-shop >= 1.2", EnvRef(EnvName("acme", "sql-shop"), SpecifierSet(">=1.2")), "acme/sql-shop>=1.2"),
    ("acme/sql-shop==1.4.*", EnvRef(EnvName("acme", "sql-shop"), SpecifierSet("==1.4.*")), "acme/sql-shop==1.4.*"),
    ("a1/b.c_d-e", EnvRef(EnvName("a1", "b.c_d-e")), "a1/b.c_d-e"),
    ("acme/x@2.0rc1", EnvRef(EnvName("acme", "x"), version=Version("2.0rc1")), "acme/x@2.0rc1"),
]


@pytest.mark.parametrize(("text", "ref", "formatted"), VALID_REFS, ids=[c[0] for c in VALID_REFS])
def test_parse_ref(text: str, ref: EnvRef, formatted: str) -> None:
    parsed = parse_ref(text)
    assert parsed == ref
    assert str(parsed) == formatted
    assert parse_ref(str(parsed)) == parsed


INVALID = [
    ("acme", "invalid environment id 'acme': expected 'namespace/name', e.g. 'acme/sql-shop'"),
    ("a/b/c", "invalid environment id 'a/b/c': expected 'namespace/name', e.g. 'acme/sql-shop'"),
    ("Acme/Shop", "invalid environment id 'Acme/Shop': ids are lowercase; did you mean 'acme/shop'?"),
    ("/shop", "invalid environment id '/shop': the namespace is empty"),
    ("acme/", "invalid environment id 'acme/': the name is empty"),
    ("acme/my shop", "invalid environment id 'acme/my shop': the name 'my shop' contains ' '; "
                     "use lowercase letters, digits, '.', '_' and '-'; did you mean 'acme/my-shop'?"),
    ("Acme/SQL Shop", "invalid environment id 'Acme/SQL Shop': ids are lowercase letters, digits, '.', '_' and '-'; "
                      "did you mean 'acme/sql-shop'?"),
    ("acme/ö", "invalid environment id 'acme/ö': the name 'ö' contains 'ö'; "
               "use lowercase letters, digits, '.', '_' and '-'"),
    ("acme/-shop", "invalid environment id 'acme/-shop': the name '-shop' must start and end with a letter or digit"),
    ("acme/a--b", "invalid environment id 'acme/a--b': the name 'a--b' contains '--' or '..'"),
    ("acme/" + "x" * 65, f"invalid environment id 'acme/{'x' * 65}': the name is 65 characters long; the limit is 64"),
    ("acme/x@1.x", "invalid version '1.x' in 'acme/x@1.x': not a PEP 440 version (e.g. '1.2.0', '2.0rc1')"),
    ("acme/x>=1.2,<<2", "invalid version specifier '>=1.2,<<2' in 'acme/x>=1.2,<<2': "
                        "expected PEP 440 clauses such as '>=1.2,<2' or '==1.4.*'"),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[c[0][:20] for c in INVALID])
def test_parse_ref_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidIdError) as exc:
        parse_ref(text)
    assert str(exc.value) == message
    assert isinstance(exc.value, (EnvhubError, ValueError))


def test_pinned_and_accepts() -> None:
    assert parse_ref("acme/x@1.0").pinned == Version("1.0")
    assert parse_ref("acme/x==1.0").pinned == Version("1.0")
    assert parse_ref("acme/x==1.*").pinned is None
    assert parse_ref("acme/x>=1").pinned is None
    assert parse_ref("acme/x>=1,<2").accepts("1.5")
    assert not parse_ref("acme/x>=1,<2").accepts("2.0")
    assert parse_ref("acme/x@2.0rc1").accepts("2.0rc1")
    assert parse_ref("acme/x").accepts("3.0")


def test_parse_helpers() -> None:
    assert parse_name("acme/x") == EnvName("acme", "x")
    assert parse_version("1.02") == Version("1.2")
    assert parse_specifier("*") == SpecifierSet()
    assert not parse_ref("acme/x").accepts("2.0rc1", prereleases=False)
    assert parse_specifier("") == SpecifierSet()
