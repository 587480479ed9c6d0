"""``envhub validate``: every bad input gives a clear message naming file, field and fix,
exit 2, and nothing written."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from envhub.bundle import validate_bundle
from envhub.context import make_plugin_manager

#: envhub's built-in plugin only (nothing installed is loaded).
PLUGINS = make_plugin_manager(autoload=False)

BASE_MANIFEST = """\
[environment]
name = "acme/arith"
version = "1.0.0"
description = "Arithmetic."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
splits.train = { path = "tasks/train.jsonl" }
splits.test = { path = "tasks/test.jsonl", held-out = true }

[verifier]
kind = "exact-match"
"""


def _rows(prefix: str, n: int) -> str:
    return "".join(json.dumps({"id": f"{prefix}-{i}", "prompt": f"{i}+1?", "answer": str(i + 1)}) + "\n"
                   for i in range(n))


def make_bundle(root: Path, manifest: str = BASE_MANIFEST, files: dict[str, str | bytes] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    contents: dict[str, str | bytes] = {"tasks/train.jsonl": _rows("train", 3), "tasks/test.jsonl": _rows("test", 2)}
    contents.update(files or {})
    contents["envhub.toml"] = manifest
    for rel, data in contents.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    return root


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if not p.is_symlink()}


def test_valid_bundle(tmp_path: Path, envhub_cli) -> None:
    root = make_bundle(tmp_path / "b")
    result = envhub_cli("validate", str(root))
    assert result.code == 0, result.out
    assert result.out == f"valid: acme/arith 1.0.0 ({root}): 2 split(s), 5 task(s)\n"


def _manifest_sub(old: str, new: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        text = BASE_MANIFEST.replace(old, new)
        assert text != BASE_MANIFEST, old
        (root / "envhub.toml").write_text(text)
    return apply


def _write(rel: str, data: str | bytes) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return apply


def _remove(rel: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).unlink()


def _symlink_out(root: Path) -> None:
    outside = root.parent / "outside.jsonl"
    outside.write_text(_rows("out", 1))
    (root / "tasks" / "train.jsonl").unlink()
    os.symlink(outside, root / "tasks" / "train.jsonl")


M = "envhub.toml"
T = "tasks/train.jsonl"

# (id, mutation, exact expected problem lines (the bundle path replaced by '{b}'))
BAD_INPUT: list[tuple[str, Callable[[Path], None], list[str]]] = [
    ("invalid-toml", _manifest_sub('version = "1.0.0"', 'version = "1.0.0'),
     ["{b}/envhub.toml:3:17: error: invalid TOML: Illegal character '\\n'",
      "  hint: fix the TOML syntax at this position"]),
    ("wrong-type", _manifest_sub('description = "Arithmetic."', "description = 12"),
     ["{b}/envhub.toml:4:1: error: environment.description: expected a string, got integer 12"]),
    ("unknown-key", _manifest_sub('[verifier]', '[verifier]\nfeild = "answer"'),
     ["{b}/envhub.toml:12:1: error: verifier.feild: unknown key 'feild'", "  hint: did you mean 'field'?"]),
    ("missing-required", _manifest_sub('version = "1.0.0"\n', ""),
     ["{b}/envhub.toml:1:2: error: environment.version: missing required key 'version'",
      "  hint: add version = ... to [environment]"]),
    ("bad-name", _manifest_sub('"acme/arith"', '"Acme/Arith"'),
     ["{b}/envhub.toml:2:1: error: environment.name: invalid environment id 'Acme/Arith': ids are lowercase; "
      "did you mean 'acme/arith'?"]),
    ("bad-version", _manifest_sub('"1.0.0"', '"v1-final"'),
     ["{b}/envhub.toml:3:1: error: environment.version: invalid version 'v1-final': "
      "not a PEP 440 version (e.g. '1.2.0', '2.0rc1')"]),
    ("bad-specifier", _manifest_sub("[verifier]", '[dependencies]\n"acme/basics" = ">=1.0,<<2"\n\n[verifier]'),
     ['{b}/envhub.toml:12:1: error: dependencies."acme/basics": invalid version specifier \'>=1.0,<<2\': '
      "expected PEP 440 clauses such as '>=1.2,<2' or '==1.4.*'"]),
    ("path-traversal", _manifest_sub('"tasks/train.jsonl"', '"../train.jsonl"'),
     ["{b}/envhub.toml:8:18: error: tasks.splits.train.path: path '../train.jsonl' leaves the bundle: "
      "use a path inside the bundle directory"]),
    ("absolute-path", _manifest_sub('"tasks/train.jsonl"', '"/etc/passwd"'),
     ["{b}/envhub.toml:8:18: error: tasks.splits.train.path: absolute path '/etc/passwd': "
      "paths are relative to the directory of envhub.toml"]),
    ("symlink-leaves-bundle", _symlink_out,
     ["{b}/tasks/train.jsonl: error: symlink leaves the bundle (it points to {o}/outside.jsonl)",
      "  hint: copy the file into the bundle instead of linking to it",
      "{b}/envhub.toml:8:18: error: tasks.splits.train.path: task file 'tasks/train.jsonl' symlink leaves the bundle "
      "(it resolves to {o}/outside.jsonl)"]),
    ("missing-task-file", _remove(T),
     ["{b}/envhub.toml:8:18: error: tasks.splits.train.path: task file 'tasks/train.jsonl' not found",
      "  hint: create tasks/train.jsonl, or fix the path (relative to envhub.toml)"]),
    ("row-not-json", _write(T, _rows("train", 2) + '{"id": "train-9", "prompt": "x"\n'),
     ["{b}/tasks/train.jsonl:3: error: not valid JSON: unexpected end of data",
      "  hint: each line must be one complete JSON object"]),
    ("row-not-object", _write(T, _rows("train", 1) + '["a"]\n'),
     ["{b}/tasks/train.jsonl:2: error: expected a JSON object, got an array"]),
    ("missing-field", _write(T, '{"id": "a", "prompt": "p"}\n'),
     ["{b}/tasks/train.jsonl:1: error: row has no 'answer' field",
      "  hint: every task needs 'id', 'prompt', 'answer'"]),
    ("duplicate-id-within", _write(T, _rows("train", 2) + _rows("train", 1)),
     ["{b}/tasks/train.jsonl:3: error: duplicate task id 'train-0' (first on line 1)",
      "  hint: task ids must be unique across all splits"]),
    ("duplicate-id-across", _write("tasks/test.jsonl", _rows("train", 1)),
     ["{b}/tasks/test.jsonl:1: error: task id 'train-0' is also in split 'train' (line 1)",
      "  hint: task ids must be unique across all splits"]),
    ("not-utf8-task",
     _write(T, (_rows("train", 1) + '{"id": "b", "prompt": "caf').encode() + b"\xe9" + b'", "answer": "1"}\n'),
     ["{b}/tasks/train.jsonl:2: error: byte 27 of the line is not valid UTF-8", "  hint: save the file as UTF-8"]),
    ("not-utf8-manifest",
     lambda root: (root / M).write_bytes(BASE_MANIFEST.replace("Arithmetic", "Caf\xe9").encode("latin-1")),
     ["{b}/envhub.toml:4: error: byte 71 is not valid UTF-8", "  hint: save the file as UTF-8"]),
    ("empty-split", _write(T, ""),
     ["{b}/tasks/train.jsonl: error: split 'train' has no tasks",
      "  hint: add tasks to the file, or remove the split"]),
    ("line-over-limit",
     _write(T, _rows("train", 1) + json.dumps({"id": "big", "prompt": "x" * 2000, "answer": "1"}) + "\n"),
     ["{b}/tasks/train.jsonl:2: error: line is longer than the limit of 1000 bytes",
      "  hint: split the task into smaller fields, or raise the limit with --max-line-bytes"]),
    ("parquet-not-parquet",
     lambda root: (_manifest_sub("[tasks]", '[tasks]\nformat = "parquet"')(root),
                   _write("tasks/train.jsonl", b"id,prompt,answer\n1,a,b\n")(root),
                   _write("tasks/test.jsonl", b"")(root)),
     ["{b}/tasks/train.jsonl: error: not a Parquet file (it does not start and end with 'PAR1')",
      "  hint: write the split with pyarrow or pandas .to_parquet(), or set format = 'jsonl'",
      "{b}/tasks/test.jsonl: error: not a Parquet file (it does not start and end with 'PAR1')",
      "  hint: write the split with pyarrow or pandas .to_parquet(), or set format = 'jsonl'"]),
    ("rows-mismatch", _manifest_sub('{ path = "tasks/train.jsonl" }', '{ path = "tasks/train.jsonl", rows = 4 }'),
     ["{b}/envhub.toml:8:46: error: tasks.splits.train.rows: the manifest records rows = 4, but the file has 3",
      "  hint: update or remove 'rows'"]),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input(tmp_path: Path, envhub_cli, mutate: Callable[[Path], None], expected: list[str]) -> None:
    root = make_bundle(tmp_path / "b")
    mutate(root)
    before = _snapshot(tmp_path)
    result = envhub_cli("validate", "--max-line-bytes", "1000", str(root))
    assert result.code == 2, result.out + result.err
    lines = result.out.splitlines()
    assert lines[-1].startswith("invalid: "), result.out
    got = [line.replace(str(root), "{b}").replace(str(tmp_path.resolve()), "{o}") for line in lines[:-1]]
    assert got == expected
    assert "Traceback" not in result.out + result.err
    assert _snapshot(tmp_path) == before  # nothing written, nothing changed


def test_gathers_every_problem(tmp_path: Path, envhub_cli) -> None:
    root = make_bundle(tmp_path / "b", files={T: '{"id": 1}\nnot json\n{"id": 1, "prompt": "p", "answer": "a"}\n'})
    (root / "tasks/test.jsonl").unlink()
    result = envhub_cli("validate", str(root))
    assert result.code == 2
    codes = [p["code"] for p in json.loads(envhub_cli("validate", "--format", "json", str(root)).out)["problems"]]
    assert codes == ["missing-field", "missing-field", "invalid-json", "bad-path", "duplicate-id"]


def test_digest_recorded_and_checked(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    check = validate_bundle(root, plugins=PLUGINS)
    train = next(s for s in check.splits if s.name == "train")
    assert train.rows == 3
    good = BASE_MANIFEST.replace('{ path = "tasks/train.jsonl" }',
                                 f'{{ path = "tasks/train.jsonl", rows = 3, sha256 = "{train.sha256}" }}')
    (root / M).write_text(good)
    assert validate_bundle(root, plugins=PLUGINS).ok
    (root / T).write_text(_rows("train", 2) + json.dumps({"id": "train-2", "prompt": "changed", "answer": "3"}) + "\n")
    problems = validate_bundle(root, plugins=PLUGINS).problems
    assert [p.code for p in problems] == ["digest-mismatch"]
    assert problems[0].message.startswith(f"the manifest records sha256 = {train.sha256[:12]}..., but the file's is ")


def test_many_bad_rows_are_capped(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", files={T: "nope\n" * 50 + _rows("train", 1)})
    problems = validate_bundle(root, plugins=PLUGINS).problems
    assert len(problems) == 11
    assert problems[-1].message == "... and 40 more like this (50 in all)"


def test_parquet_split(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    root = make_bundle(tmp_path / "b", manifest=BASE_MANIFEST.replace("[tasks]", '[tasks]\nformat = "parquet"')
                       .replace(".jsonl", ".parquet"))
    pq.write_table(pa.table({"id": ["a", "b"], "prompt": ["p", "q"], "answer": ["1", "2"]}),
                   root / "tasks/train.parquet")
    pq.write_table(pa.table({"id": ["z"], "prompt": ["r"], "answer": [None]}, schema=pa.schema(
        [("id", pa.string()), ("prompt", pa.string()), ("answer", pa.string())])), root / "tasks/test.parquet")
    check = validate_bundle(root, plugins=PLUGINS)
    assert [s.rows for s in check.splits] == [2, 1]
    assert [p.message for p in check.problems] == ["column 'answer' has 1 null values"]
    pq.write_table(pa.table({"id": ["z"], "prompt": ["p"]}), root / "tasks/test.parquet")
    assert [p.message for p in validate_bundle(root, plugins=PLUGINS).problems] == ["no column 'answer'"]


def test_warnings_and_strict(tmp_path: Path, envhub_cli) -> None:
    manifest = BASE_MANIFEST.replace('canary = "envhub-canary:0123456789abcdef0123456789abcdef"\n', "")
    root = make_bundle(tmp_path / "b", manifest=manifest)
    result = envhub_cli("validate", str(root))
    assert result.code == 0
    assert (f"{root}/envhub.toml:1:2: warning: environment.canary: no canary: "
            "contamination of training sets cannot be detected") in result.out
    assert 'hint: add canary = "envhub-canary:' in result.out
    assert envhub_cli("validate", "--strict", str(root)).code == 1


def test_only_held_out_split_warns(tmp_path: Path) -> None:
    manifest = BASE_MANIFEST.replace('splits.train = { path = "tasks/train.jsonl" }\n', "")
    problems = validate_bundle(make_bundle(tmp_path / "b", manifest=manifest), plugins=PLUGINS).problems
    assert [p.code for p in problems] == ["only-held-out"]


def test_json_format(tmp_path: Path, envhub_cli) -> None:
    root = make_bundle(tmp_path / "b")
    data = json.loads(envhub_cli("validate", "--format", "json", str(root)).out)
    assert data["ok"] is True
    assert [(s["name"], s["rows"], s["held_out"]) for s in data["bundles"][0]["splits"]] == [
        ("train", 3, False), ("test", 2, True)]


def test_github_format(tmp_path: Path, envhub_cli) -> None:
    root = make_bundle(tmp_path / "b", files={T: _rows("train", 1) + "oops\n"})
    result = envhub_cli("validate", "--format", "github", str(root))
    assert result.code == 2
    assert result.out == (f"::error file={root}/tasks/train.jsonl,line=2,title=envhub invalid-json::"
                          "not valid JSON: unexpected character, expected a JSON value"
                          "%0Ahint: each line must be one complete JSON object\n")


def test_no_manifest(tmp_path: Path, envhub_cli) -> None:
    result = envhub_cli("validate", str(tmp_path))
    assert result.code == 2
    assert result.out.splitlines()[0] == f"{tmp_path}: error: no envhub.toml in this directory"


def test_never_imports_environment_code(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    root = make_bundle(tmp_path / "b", files={"acme_code/__init__.py": f"open({str(marker)!r}, 'w').close()\n"},
                       manifest=BASE_MANIFEST.replace('kind = "exact-match"',
                                                      'kind = "python"\nentry-point = "acme_code:score"'))
    assert validate_bundle(root, plugins=PLUGINS).ok
    assert not marker.exists()


# --- held-out tasks that public files give away --------------------------------------------------

_HELD = [{"id": "test-0", "prompt": "A train leaves Oslo at 7:40 and travels 310 km; when does it arrive?",
          "answer": "at twenty past eleven"},
         {"id": "test-1", "prompt": "How many litres fill a tank 2 m by 3 m by 1.5 m?", "answer": "9000"}]
_HELD_ROWS = "".join(json.dumps(r) + "\n" for r in _HELD)


def _leak_bundle(root: Path, files: dict[str, str | bytes] | None = None, manifest: str = BASE_MANIFEST) -> Path:
    return make_bundle(root, manifest, {"tasks/test.jsonl": _HELD_ROWS, **(files or {})})


def _leaks(root: Path) -> list[str]:
    return [p.render().replace(str(root), "{b}") for p in validate_bundle(root, plugins=PLUGINS).problems
            if p.code in ("heldout-leak", "regenerating-script")]


def test_a_clean_bundle_has_no_leak(tmp_path: Path) -> None:
    root = _leak_bundle(tmp_path / "b", {"README.md": "Trains and tanks; answers are numbers or times.\n"})
    assert validate_bundle(root, plugins=PLUGINS).problems == []


@pytest.mark.parametrize(("files", "expected"), [
    ({"README.md": "# Example\n\nA hard one: A train leaves Oslo at 7:40 and travels 310 km; when does it arrive?\n"},
     ["{b}/README.md:3: error: the held-out prompt of task 'test-0' (split 'test') is in this public file"]),
    ({"prompts/system.md": "Answer like this: at twenty past eleven\n"},
     ["{b}/prompts/system.md:1: error: the held-out answer of task 'test-0' (split 'test') is in this public file"]),
    ({"tasks/train.jsonl": _rows("train", 3) + _HELD_ROWS.splitlines()[1].replace("test-1", "train-9") + "\n"},
     ["{b}/tasks/train.jsonl:4: error: the held-out prompt of task 'test-1' (split 'test') is in this public file"]),
    ({"fewshot.py": 'EXAMPLES = ["A train leaves Oslo at 7:40 and travels 310 km; when does it arrive?"]\n'},
     ["{b}/fewshot.py:1: error: the held-out prompt of task 'test-0' (split 'test') is in this public file"]),
    ({"data/copy.jsonl": _HELD_ROWS},
     ["{b}/data/copy.jsonl:1: error: the held-out prompt of task 'test-0' (split 'test') is in this public file",
      "{b}/data/copy.jsonl:1: error: the held-out answer of task 'test-0' (split 'test') is in this public file",
      "{b}/data/copy.jsonl:1: error: the held-out row of task 'test-0' (split 'test') is in this public file",
      "{b}/data/copy.jsonl:2: error: the held-out prompt of task 'test-1' (split 'test') is in this public file",
      "{b}/data/copy.jsonl:2: error: the held-out row of task 'test-1' (split 'test') is in this public file"]),
], ids=["prompt-in-readme", "answer-in-prompt-file", "row-in-another-split", "prompt-in-code", "rows-copied"])
def test_held_out_text_in_a_public_file_is_an_error(tmp_path: Path, envhub_cli, files: dict[str, str],
                                                   expected: list[str]) -> None:
    root = _leak_bundle(tmp_path / "b", files)
    assert [leak.splitlines()[0] for leak in _leaks(root)] == expected
    result = envhub_cli("validate", str(root))
    assert result.code == 2
    assert ("  hint: remove it, or keep the file out of the public build (add it to .envhubignore)" in result.out)
    # Control: the same file left out of the public build is no leak.
    (root / ".envhubignore").write_text("\n".join(files) + "\n")
    if "tasks/train.jsonl" not in files:  # a split's own file cannot be left out
        assert _leaks(root) == []


def test_what_is_not_a_leak(tmp_path: Path) -> None:
    # A short or numeric answer is not distinctive; an answer is no leak in the agent's state
    # (finding it is the task); a prompt a public task shares gives nothing away.
    shared = "Reply with the final number only, please."
    train = _rows("train", 2) + json.dumps({"id": "train-9", "prompt": shared, "answer": "1"}) + "\n"
    held = _HELD_ROWS + json.dumps({"id": "test-9", "prompt": shared, "answer": "2"}) + "\n"
    manifest = BASE_MANIFEST + '\n[state]\nkind = "files"\nsnapshot = "state"\n'
    root = _leak_bundle(tmp_path / "b", {"tasks/train.jsonl": train, "tasks/test.jsonl": held,
                                         "README.md": f"Numbers: 9000 and {shared}\n",
                                         "state/schedule.txt": "The 7:40 from Oslo arrives at twenty past eleven.\n"},
                        manifest=manifest)
    assert _leaks(root) == []
    # Control: the prompt in the state is found (it is not the agent's to see).
    (root / "state/schedule.txt").write_text(_HELD[0]["prompt"])
    assert _leaks(root) == [
        "{b}/state/schedule.txt:1: error: the held-out prompt of task 'test-0' (split 'test') is in this public file\n"
        "  hint: remove it, or keep the file out of the public build (add it to .envhubignore)"]


def test_leaks_are_capped_per_file(tmp_path: Path) -> None:
    held = "".join(json.dumps({"id": f"test-{i}", "prompt": f"What is the capital of land number {i}?",
                               "answer": "9"}) + "\n" for i in range(15))
    root = _leak_bundle(tmp_path / "b", {"tasks/test.jsonl": held, "README.md": held.replace('"id"', '"n"')})
    leaks = [p for p in validate_bundle(root, plugins=PLUGINS).problems if p.code == "heldout-leak"]
    assert len(leaks) == 11 and leaks[-1].message == "... and 5 more like this (15 in all)"


def test_a_script_that_could_write_the_held_out_file_warns(tmp_path: Path, envhub_cli) -> None:
    script = "import random\n\nrng = random.Random(20240601)\nprint(rng.random())\n"
    writer = 'open("tasks/test.jsonl", "w").write("")\n'
    root = _leak_bundle(tmp_path / "b", {"generate.py": script, "tools/write.py": writer,
                                         "tools/fair.py": "import random\n\nrandom.shuffle([1, 2])\n"})
    hint = ("  hint: keep it out of the public build (add it to .envhubignore), or draw held-out tasks from a secret "
            "(a generator split with seed-space and secret)")
    assert _leaks(root) == [
        "{b}/generate.py: warning: a public script that could make held-out tasks again: it seeds a random "
        "generator (line 3)\n" + hint,
        "{b}/tools/write.py: warning: a public script that could make held-out tasks again: it names the held-out "
        "file tasks/test.jsonl (split 'test')\n" + hint]
    assert envhub_cli("validate", str(root)).code == 0 and envhub_cli("validate", "--strict", str(root)).code == 1
    (root / ".envhubignore").write_text("generate.py\ntools/write.py\n")
    assert _leaks(root) == []


# --- held-out generator splits: secrets and public seed ranges ----------------------------------

GENERATOR_MANIFEST = """\
[environment]
name = "acme/gen"
version = "1.0.0"
description = "Generated."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
format = "generator"
generator = "gen:make"
splits.train = { seeds = [0, 1000] }
splits.test = { held-out = true, rows = 10, seed-space = [1000, 1000000], secret = "secrets/test.key" }

[verifier]
kind = "exact-match"
"""


def test_a_missing_secret_is_an_error_with_the_command_that_writes_one(tmp_path: Path, envhub_cli) -> None:
    root = make_bundle(tmp_path / "b", GENERATOR_MANIFEST)
    before = _snapshot(tmp_path)
    result = envhub_cli("validate", str(root))
    assert result.code == 2
    assert result.out.splitlines()[:2] == [
        f"{root}/envhub.toml:11:75: error: tasks.splits.test.secret: secret file 'secrets/test.key' not found",
        f"  hint: create it with 'envhub secret {root}/secrets/test.key' (a random 256-bit key), and keep it out "
        "of version control if the bundle's source is private"]
    assert _snapshot(tmp_path) == before

    assert envhub_cli("secret", str(root / "secrets" / "test.key")).code == 0
    assert (root / "secrets" / "test.key").stat().st_mode & 0o777 == 0o600
    assert envhub_cli("validate", "--strict", str(root)).code == 0
    again = envhub_cli("secret", str(root / "secrets" / "test.key"))
    assert (again.code, again.err) == (2, f"envhub: error: {root}/secrets/test.key already exists; a new key would "
                                          "make other held-out tasks\n  hint: keep it, or delete it first if no "
                                          "published version uses it\n")


@pytest.mark.parametrize("content", [b"", b"0123\n", b"A" * 64 + b"\n", b"ab" * 32 + b"\n\n", b"\xff" * 64],
                         ids=["empty", "short", "uppercase", "two-lines", "not-text"])
def test_a_malformed_secret_is_an_error(tmp_path: Path, content: bytes) -> None:
    root = make_bundle(tmp_path / "b", GENERATOR_MANIFEST, {"secrets/test.key": content})
    problems = validate_bundle(root, plugins=PLUGINS).problems
    assert [(p.code, p.field, p.message) for p in problems] == [
        ("bad-secret", "tasks.splits.test.secret",
         "secret file 'secrets/test.key' does not hold one line of 64 lowercase hex digits (a 256-bit key)")]


def test_the_key_in_a_public_file_is_a_leak(tmp_path: Path) -> None:
    key = "ab" * 32
    root = make_bundle(tmp_path / "b", GENERATOR_MANIFEST, {"secrets/test.key": key + "\n",
                                                           "notes.md": f"key: {key}\n"})
    assert [p.render().replace(str(root), "{b}") for p in validate_bundle(root, plugins=PLUGINS).problems] == [
        "{b}/notes.md:1: error: the held-out key (split 'test') is in this public file\n"
        "  hint: remove it, or keep the file out of the public build (add it to .envhubignore)"]


def test_a_held_out_seed_range_warns(tmp_path: Path, envhub_cli) -> None:
    manifest = GENERATOR_MANIFEST.replace(
        'splits.test = { held-out = true, rows = 10, seed-space = [1000, 1000000], secret = "secrets/test.key" }',
        "splits.test = { held-out = true, seeds = [5000, 5010] }")
    root = make_bundle(tmp_path / "b", manifest)
    result = envhub_cli("validate", str(root))
    assert result.code == 0
    assert result.out.splitlines()[:2] == [
        f"{root}/envhub.toml:11:1: warning: tasks.splits.test: held-out split 'test' makes its tasks from the seed "
        "range [5000, 5010]: whoever guesses the range (the public digest of the built bundle confirms a guess) "
        "makes them again",
        '  hint: draw them from a secret: replace seeds with seed-space = [lo, hi), rows = N and secret = '
        "\"secrets/test.key\" (create it with 'envhub secret secrets/test.key')"]
    assert envhub_cli("validate", "--strict", str(root)).code == 1
