"""Malformed ids, references and manifests are refused at once with a clear message, never
a crash: through the installed ``envhub`` command (exit 2, no internal error, no traceback)
and through the public functions. Ends with a bounded, seeded fuzz of the example manifests."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from envhub.errors import InvalidIdError, ManifestError
from envhub.ids import parse_name, parse_ref, parse_specifier, parse_version
from envhub.manifest import MAX_ELEMENTS, RegexMatch, load_manifest, parse_manifest
from envhub.runtime import Task, Trajectory
from envhub.runtime.verifiers import RegexVerifier, VerifierError
from tests.conftest import run_envhub

REPO = Path(__file__).resolve().parent.parent
BIG = "1" * 5000  # past the interpreter's 4,300-digit limit on int conversion
LONG = "a" * 80  # what a message quotes of an overlong input
FAST_S = 3.0  # each refusal: well under a few seconds

# --- ids and references ---------------------------------------------------------------

# (id, input, the InvalidIdError's message)
BAD_REFS = [
    ("pin-past-int-limit", f"a/b@{BIG}",
     f"invalid environment reference 'a/b@{'1' * 76}...': it is 5004 characters long; the limit is 400"),
    ("specifier-past-int-limit", f"a/b>={BIG}",
     f"invalid environment reference 'a/b>={'1' * 75}...': it is 5005 characters long; the limit is 400"),
    ("long-version", "a/b@1.0." + "1" * 100,
     f"invalid version '1.0.{'1' * 76}...' in 'a/b@1.0.{'1' * 72}...' (108 characters): "
     "it is 104 characters long; the limit is 64"),
    ("long-specifier", "a/b>=1.0" + ",<2" * 90,
     f"invalid version specifier '{('>=1.0' + ',<2' * 90)[:80]}...' in '{('a/b>=1.0' + ',<2' * 90)[:80]}...' "
     "(278 characters): it is 275 characters long; the limit is 256"),
    ("long-name", "a/" + "b" * 300,
     f"invalid environment id 'a/{'b' * 78}...' (302 characters): the name is 300 characters long; the limit is 64"),
    ("long-no-slash", "a" * 300,
     f"invalid environment id '{LONG}...' (300 characters): expected 'namespace/name', e.g. 'acme/sql-shop'"),
    ("arbitrary-equality-not-a-version", "a/b===x",
     "invalid version specifier '===x' in 'a/b===x': '===x' names no PEP 440 version, so no published "
     "version can match it; write '===' with a version such as '===1.0.0', or use '=='"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD_REFS], ids=[c[0] for c in BAD_REFS])
def test_bad_ref_in_process(text: str, message: str) -> None:
    with pytest.raises(InvalidIdError) as e:
        parse_ref(text)
    assert e.value.message == message


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD_REFS], ids=[c[0] for c in BAD_REFS])
def test_bad_ref_on_the_command_line(text: str, message: str, tmp_path: Path) -> None:
    r = run_envhub("pull", text, cwd=tmp_path)
    assert (r.code, r.out, r.err) == (2, "", f"envhub: error: {message}\n")


def test_overlong_ref_in_info(tmp_path: Path) -> None:
    # Too long for a file name: once 'File name too long' while info checked for a directory.
    r = run_envhub("info", f"a/b@{BIG}", cwd=tmp_path)
    assert (r.code, r.out, r.err) == (2, "", f"envhub: error: {BAD_REFS[0][2]}\n")


def test_overlong_path_in_validate(tmp_path: Path) -> None:
    r = run_envhub("validate", "a" * 300, cwd=tmp_path)
    assert (r.code, r.err) == (2, "")
    assert r.out == (f"{'a' * 300}: error: no such directory\n"
                     "  hint: pass a bundle directory (one with an envhub.toml)\n"
                     f"invalid: {'a' * 300}: 1 error(s), 0 warning(s)\n")


def test_bad_ref_in_add(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n')
    r = run_envhub("add", f"a/b@{BIG}", cwd=tmp_path)
    assert (r.code, r.err) == (2, f"envhub: error: {BAD_REFS[0][2]}\n")
    assert (tmp_path / "pyproject.toml").read_text() == '[project]\nname = "p"\nversion = "0"\n'


# (id, function, input, message)
BAD_PARTS = [
    ("version-past-int-limit", parse_version, BIG,
     f"invalid version '{'1' * 80}...': it is 5000 characters long; the limit is 64"),
    ("specifier-past-int-limit", parse_specifier, f"<={BIG}",
     f"invalid version specifier '<={'1' * 78}...': it is 5002 characters long; the limit is 256"),
    ("arbitrary-equality", parse_specifier, "===x",
     "invalid version specifier '===x': '===x' names no PEP 440 version, so no published version can "
     "match it; write '===' with a version such as '===1.0.0', or use '=='"),
    ("name-past-limit", parse_name, "acme/" + "x" * 65,
     f"invalid environment id 'acme/{'x' * 65}': the name is 65 characters long; the limit is 64"),
]


@pytest.mark.parametrize(("parse", "text", "message"), [c[1:] for c in BAD_PARTS], ids=[c[0] for c in BAD_PARTS])
def test_bad_id_parts(parse: Any, text: str, message: str) -> None:
    with pytest.raises(InvalidIdError) as e:
        parse(text)
    assert e.value.message == message


def test_lengths_at_the_limits_are_accepted() -> None:
    assert str(parse_version("1." + "0" * 62)) == "1.0"
    assert parse_ref("a/b===1.0.0").pinned is not None
    assert len(parse_specifier(">=1.0" + "".join(f",!=1.{i}" for i in range(10, 45)))) == 36
    assert parse_ref(f"{'n' * 64}/{'m' * 64}@1.0").name.name == "m" * 64


# --- manifests ---------------------------------------------------------------------------

BASE = """\
[environment]
name = "acme/arith"
version = "1.0.0"

[tasks]
splits.train = { path = "tasks/train.jsonl" }

[verifier]
kind = "exact-match"
"""


def _with(after_version: str = "", *, verifier: str = 'kind = "exact-match"', path: str = "tasks/train.jsonl",
          tail: str = "") -> str:
    text = BASE.replace('version = "1.0.0"\n', f'version = "1.0.0"\n{after_version}')
    return text.replace('kind = "exact-match"', verifier).replace("tasks/train.jsonl", path) + tail


def _keys(n: int) -> str:
    return "".join(f"k{i} = 1\n" for i in range(n))


# (id, manifest text, (code, field, line, column, message) of the one problem)
BAD_MANIFESTS: list[tuple[str, str, tuple[str, str | None, int | None, int | None, str]]] = [
    ("score-version-past-int-limit", _with(f"score-version = {BIG}\n"),
     ("invalid-toml", None, 4, 17, "invalid TOML: an integer of 5,000 digits; TOML integers are 64-bit")),
    ("score-version-past-64-bits", _with("score-version = 99999999999999999999\n"),
     ("out-of-range", "environment.score-version", 4, 1,
      "the integer 99999999999999999999 is out of range: TOML integers are 64-bit, from -2**63 to 2**63 - 1")),
    ("version-past-int-limit", BASE.replace('"1.0.0"', f'"{BIG}"'),
     ("value-error", "environment.version", 3, 1,
      f"invalid version '{'1' * 80}...': it is 5000 characters long; the limit is 64")),
    ("dependency-past-int-limit", _with(tail=f'\n[dependencies]\n"a/b" = ">={BIG}"\n'),
     ("value-error", 'dependencies."a/b"', 12, 1,
      f"invalid version specifier '>={'1' * 78}...': it is 5002 characters long; the limit is 256")),
    ("dependency-arbitrary-equality", _with(tail='\n[dependencies]\n"a/b" = "===x"\n'),
     ("value-error", 'dependencies."a/b"', 12, 1,
      "invalid version specifier '===x': '===x' names no PEP 440 version, so no published version can "
      "match it; write '===' with a version such as '===1.0.0', or use '=='")),
    ("nested-arrays", _with(tail="\n[config]\nparams.x = " + "[" * 5000 + "]" * 5000 + "\n"),
     ("invalid-toml", None, 12, 44, "invalid TOML: arrays and inline tables nested more than 32 levels deep")),
    ("nested-inline-tables", _with(tail="\n[config]\nparams.x = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n"),
     ("invalid-toml", None, 12, 108, "invalid TOML: arrays and inline tables nested more than 32 levels deep")),
    ("nested-dotted-keys", _with(tail="\n[config]\nparams." + ".".join(["a"] * 40) + " = 1\n"),
     ("too-deep", "config.params.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a", 11, 2,
      "tables and arrays nested more than 32 levels deep")),
    ("regex-huge-repetition", _with(verifier='kind = "regex"\npattern = "a{99999999999}"'),
     ("value-error", "verifier.pattern", 10, 1,
      "invalid regular expression 'a{99999999999}': a repetition count is too large (the limit is 4294967294)")),
    ("regex-nested-groups", _with(verifier=f'kind = "regex"\npattern = "{"(" * 2000}{")" * 2000}"'),
     ("value-error", "verifier.pattern", 10, 1,
      f"invalid regular expression '{'(' * 2000}{')' * 2000}': groups are nested too deeply")),
    ("nul-in-path", _with(path="tasks/tr\\u0000ain.jsonl"),
     ("value-error", "tasks.splits.train.path", 6, 18,
      "path 'tasks/tr\\x00ain.jsonl' contains the control character(s) '\\x00': "
      "name a file without control characters")),
    ("ten-megabyte-comment", BASE + "#" + "x" * 10_000_000 + "\n",
     ("too-large", None, None, None, "the manifest is 10,000,142 bytes; the limit is 1,048,576 (1 MiB)")),
    ("fifty-thousand-unknown-keys", BASE.replace("[tasks]", _keys(50_000) + "\n[tasks]"),
     ("too-many-keys", "environment", 1, 2, "the manifest has more than 10,000 keys")),
    ("fifty-thousand-params", _with(tail="\n[config.params]\n" + _keys(50_000)),
     ("too-many-keys", "config.params", 11, 2, "the manifest has more than 10,000 keys")),
    ("hundred-thousand-tags", _with("tags = [" + ",".join(f'"t{i}"' for i in range(100_000)) + "]\n"),
     ("too-long", "environment.tags", 4, 1, "the array has 100,000 elements; the limit is 10,000")),
    ("sixty-thousand-dependencies",
     _with("python-dependencies = [" + ",".join(f'"p{i}>=1"' for i in range(60_000)) + "]\n"),
     ("too-long", "environment.python-dependencies", 4, 1, "the array has 60,000 elements; the limit is 10,000")),
    ("hundred-thousand-dependencies",
     _with("python-dependencies = [" + ",".join(f'"p{i}>=1"' for i in range(100_000)) + "]\n"),
     ("too-large", None, None, None, "the manifest is 1,189,054 bytes; the limit is 1,048,576 (1 MiB)")),
    ("long-description", _with('description = "' + "x" * 70_000 + '"\n'),
     ("too-long", "environment.description", 4, 1, "the string is 70,000 characters long; the limit is 65,536")),
]
_LIMIT_HINT = "keep long text and data in files of the bundle (prompts, task files) and name them in the manifest"


def _bundle(root: Path, text: str) -> Path:
    bundle = root / "bundle"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "envhub.toml").write_text(text, encoding="utf-8")
    (bundle / "tasks" / "train.jsonl").write_text('{"id": "1", "prompt": "p", "answer": "a"}\n')
    return bundle


@pytest.mark.parametrize(("text", "problem"), [c[1:] for c in BAD_MANIFESTS], ids=[c[0] for c in BAD_MANIFESTS])
def test_bad_manifest_in_process(text: str, problem: tuple[Any, ...]) -> None:
    start = time.monotonic()
    manifest, problems = parse_manifest(text.encode())
    assert time.monotonic() - start < FAST_S
    assert manifest is None
    assert [(p.code, p.field, p.line, p.column, p.message) for p in problems] == [problem]


@pytest.mark.parametrize(("text", "problem"), [c[1:] for c in BAD_MANIFESTS], ids=[c[0] for c in BAD_MANIFESTS])
def test_bad_manifest_in_validate(text: str, problem: tuple[Any, ...], tmp_path: Path) -> None:
    _bundle(tmp_path, text)
    start = time.monotonic()
    r = run_envhub("validate", "bundle", cwd=tmp_path)
    assert time.monotonic() - start < FAST_S + 2  # and the interpreter's start
    code, field, line, column, message = problem
    where = f":{line}:{column}" if line else ""
    assert r.code == 2
    assert f"bundle/envhub.toml{where}: error: {field + ': ' if field else ''}{message}\n" in r.out
    assert "internal error" not in r.out + r.err and "Traceback" not in r.out + r.err
    assert "invalid: bundle: 1 error(s), 0 warning(s)" in r.out + r.err


def test_limit_problems_carry_a_hint() -> None:
    _, problems = parse_manifest(_with(tail="\n[config.params]\n" + _keys(10_001)))
    assert [p.hint for p in problems] == [_LIMIT_HINT]


def test_at_the_limits_a_manifest_is_valid() -> None:
    tags = ",".join(f'"t{i}"' for i in range(MAX_ELEMENTS))
    nested = "[" * 30 + "1" + "]" * 30  # params.x is at level 2: 32 levels in all
    text = _with(f"tags = [{tags}]\nscore-version = 9223372036854775807\n",
                 tail=f"\n[config]\nparams.x = {nested}\n")
    start = time.monotonic()
    manifest, problems = parse_manifest(text)
    assert time.monotonic() - start < FAST_S
    assert [p.message for p in problems] == [] and manifest is not None
    assert len(manifest.environment.tags) == MAX_ELEMENTS


def test_thousands_of_unknown_keys_are_reported_fast() -> None:
    # Each problem is placed on its line; placing 5,000 of them once took minutes.
    start = time.monotonic()
    _, problems = parse_manifest(BASE.replace("[tasks]", _keys(5_000) + "\n[tasks]"))
    assert time.monotonic() - start < FAST_S
    assert len(problems) == 5_000
    assert (problems[-1].line, problems[-1].field, problems[-1].code) == (5004, "environment.k4999", "extra-forbidden")


def test_regex_from_a_task_with_a_huge_repetition() -> None:
    verifier = RegexVerifier(RegexMatch(kind="regex", pattern_field="p"))
    task = Task(id="t1", split="dev", data={"id": "t1", "p": "a{99999999999}"})
    with pytest.raises(VerifierError) as e:
        verifier.score(task, Trajectory.of("a"))
    assert e.value.message == ("task 't1' field 'p' is not a valid regular expression: a repetition count is "
                               "too large (the limit is 4294967294)")


# --- fuzz ---------------------------------------------------------------------------------

_TOKENS = ["[", "]", "{", "}", '"', "'", '"""', "=", ",", ".", "\n", "#", "\x00", "\\u0000", "\\", "-1",
           "1" * 5000, "1e999", "nan", "true", "[[x]]", "===x", '"a{99999999999}"', "[" * 40, "{a=" * 40,
           '"' + "x" * 70_000 + '"', "\ufeff", "\udcff", "é", "kind", "path", "held-out", "2024-01-01"]


def _mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(text) + 1)
        op = rng.randrange(4)
        if op == 0:
            text = text[:at] + rng.choice(_TOKENS) + text[at:]
        elif op == 1:
            text = text[:at] + text[at + rng.randint(1, 40):]
        elif op == 2:
            end = min(len(text), at + rng.randint(1, 200))
            text = text[:at] + text[at:end] * rng.randint(2, 50) + text[at:]
        else:
            lines = text.splitlines(keepends=True)
            rng.shuffle(lines)
            text = "".join(lines)
    return text


def test_fuzzed_example_manifests_raise_only_envhub_errors(tmp_path: Path) -> None:
    sources = sorted((REPO / "example_envs").glob("*/envhub.toml"))
    assert sources
    texts = [path.read_text(encoding="utf-8") for path in sources]
    rng = random.Random(21)
    start = time.monotonic()
    valid = 0
    for i in range(300):
        mutated = _mutate(rng.choice(texts), rng)
        source = mutated.encode("utf-8", "surrogatepass")
        manifest, problems = parse_manifest(source)  # returns problems; never raises
        assert (manifest is None) == any(p.severity == "error" for p in problems), mutated[:200]
        path = tmp_path / f"{i}.toml"
        path.write_bytes(source)
        try:
            load_manifest(path)
            valid += 1
        except ManifestError:
            pass
    assert time.monotonic() - start < 30
    assert 0 < valid < 300  # the mutator both breaks manifests and leaves some intact
