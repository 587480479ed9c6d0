"""Scan task files: count rows, digest bytes, check fields and ids. No task is kept.

Scanning is the hot path of ``envhub validate`` on large splits, so the JSONL scanner
reads blocks, hashes each on a second thread, parses lines with orjson, and checks a
whole block of rows at once with C-level passes; only a block with a problem is walked
line by line, to say exactly what is wrong and where. Ids go into one set for the whole
bundle; where a repeated id first appeared is worked out only if there is one
(:func:`duplicate_id_problems`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from envhub.problems import Problem, Severity
from envhub.tasks._parquet import ParquetUnreadable, column_type_problem, open_parquet, read_table, type_hint

__all__ = ["DEFAULT_MAX_LINE_BYTES", "MAX_DIFFICULTY", "IdSource", "SplitScan", "TaskIds", "duplicate_id_problems",
           "json_hint", "json_reason",
           "scan_jsonl", "scan_parquet", "scan_rows"]

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
# 1 MiB blocks: big enough that hashing a block releases the GIL for long, small enough
# that the blocks (and the lines split from them) reuse memory instead of faulting in more.
_BLOCK = 1024 * 1024
_MAX_PER_KIND = 10  # problems reported per kind and file; the rest are counted
_ID_TYPES = frozenset({str, int})  # by type(): a bool is not an id
_NUMBER_TYPES = frozenset({int, float})
#: The largest magnitude of a difficulty: every integer up to it is exact as a JSON number
#: read into a double, so difficulties order the same in every language.
MAX_DIFFICULTY = 2**53
_PROMPT_HINT = ("a prompt is the text shown to the model, or a chat: a list of messages such as "
                '{"role": "user", "content": "..."}')


@dataclass
class SplitScan:
    """What a scan learned about one task file."""

    rows: int = 0
    sha256: str = ""
    problems: list[Problem] = field(default_factory=list)


class TaskIds:
    """Every task id of one bundle so far, across its splits: one set, so uniqueness
    within and across splits costs one hash insert per row and no second pass."""

    def __init__(self) -> None:
        self.seen: set[object] = set()
        #: Some id was seen twice; :func:`duplicate_id_problems` says which and where.
        self.repeated = False

    def add(self, task_id: object) -> None:
        if task_id in self.seen:
            self.repeated = True
        else:
            self.seen.add(task_id)

    def add_all(self, task_ids: list[object]) -> None:
        before = len(self.seen)
        self.seen.update(task_ids)
        if len(self.seen) - before != len(task_ids):
            self.repeated = True


class _Problems:
    """Collects row problems, keeping the first few of each kind and counting the rest."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.kept: list[Problem] = []
        self.counts: dict[str, int] = {}

        self.severities: dict[str, Severity] = {}

    def error(self, code: str, message: str, *, line: int | None = None, hint: str | None = None) -> None:
        self.add("error", code, message, line=line, hint=hint)

    def add(self, severity: Severity, code: str, message: str, *, line: int | None = None,
            hint: str | None = None) -> None:
        n = self.counts.get(code, 0) + 1
        self.counts[code] = n
        self.severities[code] = severity
        if n <= _MAX_PER_KIND:
            self.kept.append(Problem(severity, code, message, file=self.file, line=line, hint=hint))

    def finish(self) -> list[Problem]:
        out = list(self.kept)
        for code, n in self.counts.items():
            if n > _MAX_PER_KIND:
                out.append(Problem(self.severities[code], code,
                                   f"... and {n - _MAX_PER_KIND} more like this ({n} in all)",
                                   file=self.file))
        return out


def _valid_id(value: object) -> bool:
    return (isinstance(value, str) and value != "") or (isinstance(value, int) and not isinstance(value, bool))


def _valid_prompt(value: object) -> bool:
    """Text, or a chat: a list of objects each with a string ``role``."""
    if isinstance(value, str):
        return True
    return isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value)


def _difficulty_in_range(value: object) -> bool:
    # NaN fails both comparisons; a bool is not a difficulty but is caught as not-a-number.
    return isinstance(value, (int, float)) and -MAX_DIFFICULTY <= value <= MAX_DIFFICULTY


def _report_difficulty(problems: _Problems, name: str, value: object, *, line: int | None = None,
                       row: int | None = None) -> None:
    where = f"row {row}: " if row is not None else ""
    problems.error("bad-difficulty", f"{where}{name!r} is {value!r}, outside the range of difficulties "
                                     "(-2**53 to 2**53, not NaN or infinite)", line=line,
                   hint="use a small number: a curriculum orders tasks by it")


def scan_jsonl(
    path: Path,
    *,
    display: str,
    id_field: str,
    fields: Sequence[str] = (),
    numeric_fields: Sequence[str] = (),
    prompt_field: str | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    task_ids: TaskIds | None = None,
) -> SplitScan:
    """Scan a JSONL task file: one JSON object per line; blank lines are ignored.

    ``fields`` and ``numeric_fields`` must be present in every row, ``numeric_fields``
    must hold numbers within :data:`MAX_DIFFICULTY`, ``prompt_field`` (if given) text or a
    chat, and ``id_field`` a non-empty string or an integer, recorded in ``task_ids``
    (which notes repeats).
    """
    problems = _Problems(display)
    digest = hashlib.sha256()
    task_ids = task_ids if task_ids is not None else TaskIds()
    required = tuple(dict.fromkeys((id_field, *fields, *numeric_fields)))
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    # One itemgetter for every required field: KeyError means a row lacks one. (With a
    # single name itemgetter returns the value, not a tuple: repeat the id to get a tuple.)
    get_required = itemgetter(*required) if len(required) > 1 else itemgetter(id_field, id_field)
    get_id = itemgetter(0)  # the id is required[0]
    numeric_getters = [itemgetter(required.index(name)) for name in numeric_fields]
    prompt_getter = itemgetter(required.index(prompt_field)) if prompt_field in required else None

    def clean_block(lines: list[bytes]) -> bool:
        """Check a whole block of well-formed rows with C-level passes (map, itemgetter,
        set operations) instead of a Python loop per row, about half the cost. Returns
        False, having recorded nothing, if any line needs a closer look."""
        if not lines:
            return True
        if max(map(len, lines)) > max_line_bytes:
            return False
        try:
            parsed = list(map(loads, lines))  # a blank or bad line raises
            if set(map(type, parsed)) != {dict}:
                return False
            values = list(map(get_required, parsed))  # a missing field raises
        except (decode_error, KeyError):
            return False
        block_ids = list(map(get_id, values))
        if not set(map(type, block_ids)) <= _ID_TYPES or "" in block_ids:
            return False
        for getter in numeric_getters:
            numbers = list(map(getter, values))
            if not set(map(type, numbers)) <= _NUMBER_TYPES:
                return False
            # JSON has no NaN or infinity, so min and max see every out-of-range value.
            if min(numbers) < -MAX_DIFFICULTY or max(numbers) > MAX_DIFFICULTY:
                return False
        if prompt_getter is not None and set(map(type, map(prompt_getter, values))) != {str}:
            return False  # a chat prompt (or a bad one) is looked at row by row
        task_ids.add_all(block_ids)
        return True

    def check_row(line: bytes, lineno: int) -> None:
        """The line-by-line pass: record the row's id, or say what is wrong with it."""
        try:
            row = loads(line)
        except decode_error as e:
            _report_bad_json(problems, line, lineno, e)
            return
        if type(row) is not dict:
            problems.error("not-an-object", f"expected a JSON object, got {_json_kind(row)}", line=lineno)
            return
        for name in required:
            if name not in row:
                problems.error("missing-field", f"row has no {name!r} field", line=lineno,
                               hint=f"every task needs {', '.join(map(repr, required))}")
        for name in numeric_fields:
            value = row.get(name)
            if name in row and type(value) not in _NUMBER_TYPES:
                problems.error("not-a-number", f"{name!r} must be a number, got {_json_kind(value)}", line=lineno)
            elif name in row and not _difficulty_in_range(value):
                _report_difficulty(problems, name, value, line=lineno)
        if prompt_field is not None and prompt_field in row and not _valid_prompt(row[prompt_field]):
            problems.error("bad-prompt", f"{prompt_field!r} must be a string or a list of chat messages, "
                                         f"got {_json_kind(row[prompt_field])}", line=lineno, hint=_PROMPT_HINT)
        if id_field in row:
            task_id = row[id_field]
            if _valid_id(task_id):
                task_ids.add(task_id)
            else:
                problems.error("bad-id",
                               f"{id_field!r} must be a non-empty string or an integer, got {_json_kind(task_id)}",
                               line=lineno)

    lineno = 0
    rows = 0
    pending = b""
    skipping = False  # inside a line already reported as too long
    # hashlib releases the GIL on large updates: hash each block on a second thread while
    # this one parses it. Waiting for the previous block's hash keeps the order.
    with open(path, "rb") as f, ThreadPoolExecutor(max_workers=1) as hasher:
        hashed: Future[None] | None = None
        while True:
            block = f.read(_BLOCK)
            if not block:
                break
            if hashed is not None:
                hashed.result()
            hashed = hasher.submit(digest.update, block)
            lines = (pending + block).split(b"\n") if pending else block.split(b"\n")
            pending = lines.pop()
            if not skipping and clean_block(lines):
                lineno += len(lines)
                rows += len(lines)
                continue
            for line in lines:
                lineno += 1
                if skipping:
                    skipping = False
                elif len(line) > max_line_bytes:
                    _report_long_line(problems, lineno, max_line_bytes)
                    rows += 1
                elif line and not line.isspace():
                    rows += 1
                    check_row(line, lineno)
            if len(pending) > max_line_bytes and not skipping:
                _report_long_line(problems, lineno + 1, max_line_bytes)
                rows += 1
                skipping = True
            if skipping:
                pending = b""
        if hashed is not None:
            hashed.result()
    if pending and not skipping:
        lineno += 1
        if len(pending) > max_line_bytes:
            _report_long_line(problems, lineno, max_line_bytes)
            rows += 1
        elif not pending.isspace():
            rows += 1
            check_row(pending, lineno)
    return SplitScan(rows=rows, sha256=digest.hexdigest(), problems=problems.finish())


def _report_long_line(problems: _Problems, lineno: int, limit: int) -> None:
    problems.error("line-too-long", f"line is longer than the limit of {limit} bytes", line=lineno,
                   hint="split the task into smaller fields, or raise the limit with --max-line-bytes")


def _report_bad_json(problems: _Problems, line: bytes, lineno: int, e: Exception) -> None:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as u:
        problems.error("not-utf8", f"byte {u.start + 1} of the line is not valid UTF-8", line=lineno,
                       hint="save the file as UTF-8")
        return
    problems.error("invalid-json", f"not valid JSON: {json_reason(e)}", line=lineno, hint=json_hint(e))


def json_reason(e: Exception) -> str:
    """What a JSON parse error says, without its position (the line is named apart)."""
    return str(e).split(":", 1)[0]


def json_hint(e: Exception) -> str:
    """How to fix the line that failed to parse with ``e``."""
    if json_reason(e) == "unexpected control character in string":
        return "escape control characters inside strings (a NUL byte is \\u0000, a tab \\t)"
    return "each line must be one complete JSON object"


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def scan_parquet(
    path: Path,
    *,
    display: str,
    id_field: str,
    fields: Sequence[str] = (),
    numeric_fields: Sequence[str] = (),
    prompt_field: str | None = None,
    task_ids: TaskIds | None = None,
) -> SplitScan:
    """Scan a Parquet task file: it must be readable, name each column once, hold only
    values with a JSON form (:func:`~envhub.tasks._parquet.column_type_problem`), and
    have ``fields`` as columns without nulls."""
    problems = _Problems(display)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    sha = digest.hexdigest()
    try:
        pf = open_parquet(path)
    except ParquetUnreadable as e:
        problems.error(e.code, e.message, hint=e.hint)
        return SplitScan(sha256=sha, problems=problems.finish())
    schema = pf.schema_arrow
    names = set(schema.names)
    refused: set[str] = set()  # columns already reported for their type
    for column in schema:
        found = column_type_problem(column.type)
        if found is not None:
            severity, kind = found
            if severity == "error":
                refused.add(column.name)
            text = (f"column {column.name!r} holds {kind} values ({column.type}), which a task (a JSON object) "
                    "cannot hold" if severity == "error" else
                    f"column {column.name!r} holds {kind} values ({column.type}): tasks hold them as Python "
                    "date-time values, which verifiers compare as text such as '2020-01-01 00:00:00'")
            problems.add(severity, "unsupported-type" if severity == "error" else "date-time-column", text,
                         hint=type_hint(kind))
    required = list(dict.fromkeys((id_field, *fields)))
    for n in required:
        if n not in names:
            problems.error("missing-field", f"no column {n!r}", hint=f"columns: {', '.join(sorted(names))}")
    present = [n for n in required if n in names]
    try:
        table = read_table(pf, present) if present else None
    except ParquetUnreadable as e:
        problems.error(e.code, e.message, hint=e.hint)
        return SplitScan(sha256=sha, problems=problems.finish())
    rows = pf.metadata.num_rows
    task_ids = task_ids if task_ids is not None else TaskIds()
    if table is not None:
        import pyarrow.types as pat

        for n in present:
            column = table.column(n)
            if column.null_count:
                problems.error("missing-field", f"column {n!r} has {column.null_count} null values")
        for n in numeric_fields:
            if n not in present:
                continue
            t = table.column(n).type
            if not (pat.is_integer(t) or pat.is_floating(t)):
                problems.error("not-a-number", f"column {n!r} must be numeric, got {t}")
                continue
            for i, value in enumerate(table.column(n).to_pylist(), start=1):
                if value is not None and not _difficulty_in_range(value):
                    _report_difficulty(problems, n, value, row=i)
        if prompt_field is not None and prompt_field in present and prompt_field not in refused:
            t = table.column(prompt_field).type
            if not _prompt_type(t):
                problems.error("bad-prompt", f"column {prompt_field!r} must hold strings or chat messages "
                                             f"(a list of structs with a string 'role'), got {t}",
                               hint=_PROMPT_HINT)
        if id_field in present:
            for i, task_id in enumerate(table.column(id_field).to_pylist(), start=1):
                if task_id is None:
                    continue
                if _valid_id(task_id):
                    task_ids.add(task_id)
                else:
                    problems.error("bad-id", f"row {i}: {id_field!r} must be a non-empty string or an integer")
    return SplitScan(rows=rows, sha256=sha, problems=problems.finish())


def _prompt_type(t: Any) -> bool:
    """An Arrow type a prompt column may have: text, or a list of messages with a text role."""
    import pyarrow.types as pat

    if pat.is_dictionary(t):
        t = t.value_type
    if pat.is_string(t) or pat.is_large_string(t) or str(t) == "string_view":
        return True
    if pat.is_list(t) or pat.is_large_list(t):
        item = t.value_type
        if pat.is_struct(item) and item.get_field_index("role") >= 0:
            role = item.field("role").type
            return bool(pat.is_string(role) or pat.is_large_string(role))
    return False


def scan_rows(
    path: Path,
    rows: Callable[[Path], Iterable[Mapping[str, object]]],
    *,
    display: str,
    id_field: str,
    fields: Sequence[str] = (),
    numeric_fields: Sequence[str] = (),
    prompt_field: str | None = None,
    task_ids: TaskIds | None = None,
) -> SplitScan:
    """Scan a task file of a plugin's format, through its reader ``rows(path)``: the same
    checks as for JSONL, with problems located by row number (1-based)."""
    problems = _Problems(display)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    task_ids = task_ids if task_ids is not None else TaskIds()
    required = list(dict.fromkeys(fields))
    count = 0
    try:
        for count, row in enumerate(rows(path), start=1):
            if not isinstance(row, Mapping):
                problems.error("not-an-object", f"row {count}: expected a mapping of fields, got {type(row).__name__}")
                continue
            for name in required:
                if row.get(name) is None:
                    problems.error("missing-field", f"row {count} has no {name!r} field",
                                   hint=f"every task needs {', '.join(map(repr, required))}")
            for name in numeric_fields:
                value = row.get(name)
                if value is not None and type(value) not in _NUMBER_TYPES:
                    problems.error("not-a-number", f"row {count}: {name!r} must be a number, got {_json_kind(value)}")
                elif value is not None and not _difficulty_in_range(value):
                    _report_difficulty(problems, name, value, row=count)
            prompt = row.get(prompt_field) if prompt_field is not None else None
            if prompt is not None and not _valid_prompt(prompt):
                problems.error("bad-prompt", f"row {count}: {prompt_field!r} must be a string or a list of chat "
                                             f"messages, got {_json_kind(prompt)}", hint=_PROMPT_HINT)
            if row.get(id_field) is not None:
                if _valid_id(row[id_field]):
                    task_ids.add(row[id_field])
                else:
                    problems.error("bad-id", f"row {count}: {id_field!r} must be a non-empty string or an integer, "
                                             f"got {_json_kind(row[id_field])}")
    except Exception as e:  # the plugin's reader: report what it raised, as the file's problem
        problems.error("unreadable", f"cannot read the file: {type(e).__name__}: {e}")
    return SplitScan(rows=count, sha256=digest.hexdigest(), problems=problems.finish())


@dataclass(frozen=True)
class IdSource:
    """One split's task file, for :func:`duplicate_id_problems`."""

    split: str
    path: Path
    display: str
    format: str  # "jsonl", "parquet", or a plugin's format (read by ``read``)
    read: Callable[[Path], Iterable[Mapping[str, object]]] | None = None


def _ids_with_positions(source: IdSource, id_field: str) -> Iterator[tuple[object, int]]:
    if source.read is not None:
        for i, row in enumerate(source.read(source.path), start=1):
            if isinstance(row, Mapping) and _valid_id(row.get(id_field)):
                yield row[id_field], i
        return
    if source.format == "parquet":
        import pyarrow.parquet as pq

        column = pq.read_table(source.path, columns=[id_field]).column(id_field).to_pylist()
        yield from ((task_id, i) for i, task_id in enumerate(column, start=1) if _valid_id(task_id))
        return
    with open(source.path, "rb") as f:
        for lineno, line in enumerate(f, start=1):
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # reported by the scan
            if type(row) is dict and _valid_id(row.get(id_field)):
                yield row[id_field], lineno


def duplicate_id_problems(sources: Sequence[IdSource], id_field: str) -> list[Problem]:
    """Where each repeated id first appeared. A second pass, run only when
    :attr:`TaskIds.repeated` says there is something to explain."""
    first: dict[object, tuple[str, int]] = {}
    out: list[Problem] = []
    for source in sources:
        what = "line" if source.format == "jsonl" else "row"
        problems = _Problems(source.display)
        for task_id, position in _ids_with_positions(source, id_field):
            seen = first.setdefault(task_id, (source.split, position))
            if seen == (source.split, position):
                continue
            if seen[0] == source.split:
                message = f"duplicate task id {task_id!r} (first on {what} {seen[1]})"
            else:
                message = f"task id {task_id!r} is also in split {seen[0]!r} ({what} {seen[1]})"
            problems.error("duplicate-id", message if what == "line" else f"row {position}: {message}",
                           line=position if what == "line" else None, hint="task ids must be unique across all splits")
        out.extend(problems.finish())
    return out
