"""Bad task files: each is refused by ``validate``, ``build`` and ``eval`` with a message
naming the file (and the column or line) and the fix, exit 2, no traceback."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_envhub

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

MANIFEST = """\
[environment]
name = "acme/tasks"
version = "1.0.0"
description = "Task files."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
format = "{format}"
difficulty-field = "difficulty"
splits.train = {{ path = "tasks/train.{format}" }}

[verifier]
kind = "exact-match"
"""

GOOD = {"id": ["a", "b"], "prompt": ["1+1?", "2+2?"], "answer": ["2", "4"], "difficulty": [1, 2]}


def _table(**columns: object) -> Callable[[Path], None]:
    """Write GOOD with ``columns`` replaced (each an Arrow array or a Python list)."""
    def write(path: Path) -> None:
        data = {**GOOD, **columns}
        pq.write_table(pa.table({k: v if isinstance(v, pa.Array) else pa.array(v) for k, v in data.items()}), path)
    return write


def _garbage(path: Path) -> None:
    path.write_bytes(b"PAR1" + b"\x00garbage" * 20 + b"PAR1")


def _truncated(path: Path) -> None:
    _table()(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] + b"PAR1")  # the footer is gone; the magic is kept


def _cut(path: Path) -> None:
    _table()(path)
    path.write_bytes(path.read_bytes()[:-30])


def _duplicate_column(path: Path) -> None:
    arrays = [pa.array(v) for v in GOOD.values()] + [pa.array(["x", "y"])]
    pq.write_table(pa.Table.from_arrays(arrays, names=[*GOOD, "answer"]), path)


_REWRITE = "  hint: write the split again with pyarrow or pandas .to_parquet()"
_RANGE = "outside the range of difficulties (-2**53 to 2**53, not NaN or infinite)"
_PROMPT = ('  hint: a prompt is the text shown to the model, or a chat: a list of messages such as '
           '{"role": "user", "content": "..."}')
_F = "{b}/tasks/train.parquet"

# (id, writer, the problem lines validate prints (the bundle directory as '{b}'))
PARQUET: list[tuple[str, Callable[[Path], None], list[str]]] = [
    ("garbage", _garbage,
     [f"{_F}: error: the Parquet file is truncated or damaged (Parquet file size is 168 bytes, smaller than the "
      "size reported by footer's (1701273954bytes))", _REWRITE]),
    ("truncated", _truncated, None),  # the sizes depend on pyarrow's writer: checked by prefix below
    ("cut-without-magic", _cut,
     [f"{_F}: error: not a Parquet file (it does not start and end with 'PAR1')",
      "  hint: write the split with pyarrow or pandas .to_parquet(), or set format = 'jsonl'"]),
    ("duplicate-column", _duplicate_column,
     [f"{_F}: error: columns named more than once: 'answer' (2 times)",
      "  hint: rename or drop the extra columns: each task field needs one column"]),
    ("binary-prompt", _table(prompt=[b"\x00\xff", b"x"]),
     [f"{_F}: error: column 'prompt' holds binary values (binary), which a task (a JSON object) cannot hold",
      "  hint: store text as a string column (decode it as UTF-8, or base64-encode bytes)"]),
    ("binary-answer", _table(answer=[b"2", b"4"]),
     [f"{_F}: error: column 'answer' holds binary values (binary), which a task (a JSON object) cannot hold",
      "  hint: store text as a string column (decode it as UTF-8, or base64-encode bytes)"]),
    ("decimal-column", _table(extra=pa.array([1, 2], pa.decimal128(5, 2))),
     [f"{_F}: error: column 'extra' holds decimal values (decimal128(5, 2)), which a task (a JSON object) cannot hold",
      "  hint: store it as a float column, or as a string to keep every digit"]),
    ("nested-binary", _table(extra=pa.array([[b"x"], []], pa.list_(pa.binary()))),
     [f"{_F}: error: column 'extra' holds binary values (list<element: binary>), "
      "which a task (a JSON object) cannot hold",
      "  hint: store text as a string column (decode it as UTF-8, or base64-encode bytes)"]),
    ("difficulty-2**64", _table(difficulty=pa.array([1, 2**64 - 1], pa.uint64())),
     [f"{_F}: error: row 2: 'difficulty' is 18446744073709551615, {_RANGE}",
      "  hint: use a small number: a curriculum orders tasks by it"]),
    ("difficulty-nan", _table(difficulty=[1.0, float("nan")]),
     [f"{_F}: error: row 2: 'difficulty' is nan, {_RANGE}",
      "  hint: use a small number: a curriculum orders tasks by it"]),
    ("struct-prompt", _table(prompt=[{"x": 1}, {"x": 2}]),
     [f"{_F}: error: column 'prompt' must hold strings or chat messages (a list of structs with a string 'role'), "
      "got struct<x: int64>", _PROMPT]),
    ("list-of-strings-prompt", _table(prompt=[["a"], ["b"]]),
     [f"{_F}: error: column 'prompt' must hold strings or chat messages (a list of structs with a string 'role'), "
      "got list<element: string>", _PROMPT]),
]


def _bundle(root: Path, format: str, write: Callable[[Path], None]) -> Path:
    (root / "tasks").mkdir(parents=True)
    (root / "envhub.toml").write_text(MANIFEST.format(format=format))
    write(root / "tasks" / f"train.{format}")
    return root


def _refused(result, line: str) -> None:  # type: ignore[no-untyped-def]
    assert result.code == 2, (result.out, result.err)
    assert "internal error" not in result.err and "Traceback" not in result.err
    assert line in result.err.splitlines(), result.err


@pytest.mark.parametrize(("writer", "lines"), [case[1:] for case in PARQUET], ids=[case[0] for case in PARQUET])
def test_bad_parquet_is_refused_by_validate_build_and_eval(tmp_path: Path, writer: Callable[[Path], None],
                                                           lines: list[str] | None) -> None:
    _bundle(tmp_path / "b", "parquet", writer)
    result = run_envhub("validate", "b", cwd=tmp_path)
    assert result.code == 2, result.out + result.err
    printed = result.out.splitlines()
    if lines is None:
        assert printed[0].startswith("b/tasks/train.parquet: error: the Parquet file is truncated or damaged (")
        assert printed[1] == _REWRITE
    else:
        assert printed[:-1] == [line.replace("{b}", "b") for line in lines]
    assert printed[-1].startswith("invalid: acme/tasks 1.0.0 (b): ")
    _refused(run_envhub("build", "b", "-o", "dist", cwd=tmp_path), "envhub: error: b: cannot build an invalid bundle")
    assert not (tmp_path / "dist").exists() or not any((tmp_path / "dist").iterdir())
    eval_result = run_envhub("eval", "b", "-s", "train", "-o", "out.jsonl", cwd=tmp_path)
    assert eval_result.code == 2, eval_result.err
    assert "internal error" not in eval_result.err and "Traceback" not in eval_result.err
    assert f"{tmp_path}/b/tasks/train.parquet" in eval_result.err
    assert not (tmp_path / "out.jsonl").exists()


def test_parquet_dates_are_a_warning_and_play_as_their_text(tmp_path: Path) -> None:
    _bundle(tmp_path / "b", "parquet", _table(answer=[datetime.datetime(2020, 1, 1), datetime.datetime(2021, 5, 6)]))
    result = run_envhub("validate", "b", cwd=tmp_path)
    assert result.code == 0, result.out
    assert result.out.splitlines() == [
        "b/tasks/train.parquet: warning: column 'answer' holds date-time values (timestamp[us]): tasks hold them as "
        "Python date-time values, which verifiers compare as text such as '2020-01-01 00:00:00'",
        "  hint: store it as a string column (e.g. ISO 8601) so the answer is the same text everywhere",
        "valid: acme/tasks 1.0.0 (b): 1 split(s), 2 task(s), 1 warning(s)"]
    assert run_envhub("validate", "--strict", "b", cwd=tmp_path).code == 1
    played = run_envhub("eval", "b", "-s", "train", "-o", "out.jsonl", cwd=tmp_path)
    assert played.code == 0, played.err
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["messages"][-1]["content"], r["reward"]) for r in records] == [
        ("2020-01-01 00:00:00", 1.0), ("2021-05-06 00:00:00", 1.0)]


def test_parquet_chat_prompts_are_valid(tmp_path: Path) -> None:
    chats = [[{"role": "user", "content": "1+1?"}], [{"role": "user", "content": "2+2?"}]]
    _bundle(tmp_path / "b", "parquet", _table(prompt=chats))
    result = run_envhub("validate", "b", cwd=tmp_path)
    assert (result.code, result.out) == (0, "valid: acme/tasks 1.0.0 (b): 1 split(s), 2 task(s)\n")


_GOOD_LINE = b'{"id": "a", "prompt": "1+1?", "answer": "2", "difficulty": 1}\n'
_J = "{b}/tasks/train.jsonl"

# (id, the file's second line, validate's problem lines, the line of eval's stderr naming the problem)
JSONL: list[tuple[str, bytes, list[str], str]] = [
    ("invalid-utf8", b'{"id": "b", "prompt": "caf\xe9", "answer": "1", "difficulty": 1}\n',
     [f"{_J}:2: error: byte 27 of the line is not valid UTF-8", "  hint: save the file as UTF-8"],
     f"envhub: error: {_J}: line 2: byte 27 of the line is not valid UTF-8"),
    ("not-an-object", b"[1, 2]\n",
     [f"{_J}:2: error: expected a JSON object, got an array"],
     f"envhub: error: {_J}: line 2 is not a JSON object"),
    ("nul-in-string", b'{"id": "b", "prompt": "a\x00b", "answer": "1", "difficulty": 1}\n',
     [f"{_J}:2: error: not valid JSON: unexpected control character in string",
      "  hint: escape control characters inside strings (a NUL byte is \\u0000, a tab \\t)"],
     f"envhub: error: {_J}: line 2 is not valid JSON: unexpected control character in string"),
    ("nul-bytes", b"\x00\x00\x00\n",
     [f"{_J}:2: error: not valid JSON: unexpected character, expected a JSON value",
      "  hint: each line must be one complete JSON object"],
     f"envhub: error: {_J}: line 2 is not valid JSON: unexpected character, expected a JSON value"),
    ("huge-line", b'{"id": "b", "prompt": "' + b"x" * (9 * 1024 * 1024) + b'", "answer": "1", "difficulty": 1}\n',
     [f"{_J}:2: error: line is longer than the limit of 8388608 bytes",
      "  hint: split the task into smaller fields, or raise the limit with --max-line-bytes"],
     f"{_J}:2: error: line is longer than the limit of 8388608 bytes"),
    ("difficulty-2**64", b'{"id": "b", "prompt": "p", "answer": "1", "difficulty": 18446744073709551616}\n',
     [f"{_J}:2: error: 'difficulty' is 1.8446744073709552e+19, {_RANGE}",
      "  hint: use a small number: a curriculum orders tasks by it"],
     f"{_J}:2: error: 'difficulty' is 1.8446744073709552e+19, {_RANGE}"),
    ("number-prompt", b'{"id": "b", "prompt": 5, "answer": "1", "difficulty": 1}\n',
     [f"{_J}:2: error: 'prompt' must be a string or a list of chat messages, got a number", _PROMPT],
     f"{_J}:2: error: 'prompt' must be a string or a list of chat messages, got a number"),
    ("list-of-strings-prompt", b'{"id": "b", "prompt": ["a"], "answer": "1", "difficulty": 1}\n',
     [f"{_J}:2: error: 'prompt' must be a string or a list of chat messages, got an array", _PROMPT],
     f"{_J}:2: error: 'prompt' must be a string or a list of chat messages, got an array"),
]


@pytest.mark.parametrize(("line", "lines", "eval_line"), [case[1:] for case in JSONL], ids=[case[0] for case in JSONL])
def test_bad_jsonl_is_refused_by_validate_and_eval(tmp_path: Path, line: bytes, lines: list[str],
                                                   eval_line: str) -> None:
    _bundle(tmp_path / "b", "jsonl", lambda path: path.write_bytes(_GOOD_LINE + line))
    result = run_envhub("validate", "b", cwd=tmp_path)
    assert result.code == 2, result.out + result.err
    assert result.out.splitlines()[:-1] == [text.replace("{b}", "b") for text in lines]
    played = run_envhub("eval", "b", "-s", "train", "-o", "out.jsonl", cwd=tmp_path)
    _refused(played, eval_line.replace("{b}", f"{tmp_path}/b"))
    assert not (tmp_path / "out.jsonl").exists()


def test_jsonl_chat_prompts_and_small_difficulties_are_valid(tmp_path: Path) -> None:
    chat = (b'{"id": "b", "prompt": [{"role": "user", "content": "2+2?"}], "answer": "4", '
            b'"difficulty": -9007199254740992}\n')
    _bundle(tmp_path / "b", "jsonl", lambda path: path.write_bytes(_GOOD_LINE + chat))
    result = run_envhub("validate", "b", cwd=tmp_path)
    assert (result.code, result.out) == (0, "valid: acme/tasks 1.0.0 (b): 1 split(s), 2 task(s)\n")
