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

import orjson

from envhub.problems import Problem

__all__ = ["DEFAULT_MAX_LINE_BYTES", "IdSource", "SplitScan", "TaskIds", "duplicate_id_problems",
           "scan_jsonl", "scan_parquet", "scan_rows"]

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
# 1 MiB blocks: big enough that hashing a block releases the GIL for long, small enough
# that the blocks (and the lines split from them) reuse memory instead of faulting in more.
_BLOCK = 1024 * 1024
_MAX_PER_KIND = 10  # problems reported per kind and file; the rest are counted
_ID_TYPES = frozenset({str, int})  # by type(): a bool is not an id
_NUMBER_TYPES = frozenset({int, float})


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

    def error(self, code: str, message: str, *, line: int | None = None, hint: str | None = None) -> None:
        n = self.counts.get(code, 0) + 1
        self.counts[code] = n
        if n <= _MAX_PER_KIND:
            self.kept.append(Problem("error", code, message, file=self.file, line=line, hint=hint))

    def finish(self) -> list[Problem]:
        out = list(self.kept)
        for code, n in self.counts.items():
            if n > _MAX_PER_KIND:
                out.append(Problem("error", code, f"... and {n - _MAX_PER_KIND} more like this ({n} in all)", file=self.file))
        return out


def _valid_id(value: object) -> bool:
    return (isinstance(value, str) and value != "") or (isinstance(value, int) and not isinstance(value, bool))


def scan_jsonl(
    path: Path,
    *,
    display: str,
    id_field: str,
    fields: Sequence[str] = (),
    numeric_fields: Sequence[str] = (),
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    task_ids: TaskIds | None = None,
) -> SplitScan:
    """Scan a JSONL task file: one JSON object per line; blank lines are ignored.

    ``fields`` and ``numeric_fields`` must be present in every row, ``numeric_fields``
    must hold numbers, and ``id_field`` a non-empty string or an integer, recorded in
    ``task_ids`` (which notes repeats).
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
            if not set(map(type, map(getter, values))) <= _NUMBER_TYPES:
                return False
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
        if id_field in row:
            task_id = row[id_field]
            if _valid_id(task_id):
                task_ids.add(task_id)
            else:
                problems.error("bad-id", f"{id_field!r} must be a non-empty string or an integer, got {_json_kind(task_id)}", line=lineno)

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
    reason = str(e).split(":", 1)[0]
    problems.error("invalid-json", f"not valid JSON: {reason}", line=lineno,
                   hint="each line must be one complete JSON object")


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
    task_ids: TaskIds | None = None,
) -> SplitScan:
    """Scan a Parquet task file: its columns must include ``fields``, without nulls."""
    problems = _Problems(display)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        head = f.read(4)
        digest.update(head)
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
        size = f.tell()
        f.seek(max(size - 4, 0))
        tail = f.read(4)
    sha = digest.hexdigest()
    if head != b"PAR1" or tail != b"PAR1" or size < 12:
        problems.error("not-parquet", "not a Parquet file (it does not start and end with 'PAR1')",
                       hint="write the split with pyarrow or pandas .to_parquet(), or set format = 'jsonl'")
        return SplitScan(sha256=sha, problems=problems.finish())
    try:
        import pyarrow.parquet as pq
    except ImportError:
        problems.error("missing-dependency", "reading Parquet needs pyarrow, which is not installed",
                       hint="pip install 'envhub-rl[parquet]'")
        return SplitScan(sha256=sha, problems=problems.finish())
    try:
        pf = pq.ParquetFile(path)
        names = set(pf.schema_arrow.names)
        required = list(dict.fromkeys((id_field, *fields)))
        missing = [n for n in required if n not in names]
        for n in missing:
            problems.error("missing-field", f"no column {n!r}", hint=f"columns: {', '.join(sorted(names))}")
        present = [n for n in required if n in names]
        table = pf.read(columns=present) if present else None
    except Exception as e:  # pyarrow raises ArrowInvalid, OSError and others for bad files
        problems.error("invalid-parquet", f"cannot read the Parquet file: {e}")
        return SplitScan(sha256=sha, problems=problems.finish())
    rows = pf.metadata.num_rows
    task_ids = task_ids if task_ids is not None else TaskIds()
    if table is not None:
        for n in present:
            column = table.column(n)
            if column.null_count:
                problems.error("missing-field", f"column {n!r} has {column.null_count} null values")
        for n in numeric_fields:
            if n in present:
                import pyarrow.types as pat

                t = table.column(n).type
                if not (pat.is_integer(t) or pat.is_floating(t)):
                    problems.error("not-a-number", f"column {n!r} must be numeric, got {t}")
        if id_field in present:
            for i, task_id in enumerate(table.column(id_field).to_pylist(), start=1):
                if task_id is None:
                    continue
                if _valid_id(task_id):
                    task_ids.add(task_id)
                else:
                    problems.error("bad-id", f"row {i}: {id_field!r} must be a non-empty string or an integer")
    return SplitScan(rows=rows, sha256=sha, problems=problems.finish())


def scan_rows(
    path: Path,
    rows: Callable[[Path], Iterable[Mapping[str, object]]],
    *,
    display: str,
    id_field: str,
    fields: Sequence[str] = (),
    numeric_fields: Sequence[str] = (),
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
            where = f"first on {what} {seen[1]}" if seen[0] == source.split else f"also in split {seen[0]!r} ({what} {seen[1]})"
            message = f"duplicate task id {task_id!r} ({where})" if seen[0] == source.split else f"task id {task_id!r} is {where}"
            problems.error("duplicate-id", message if what == "line" else f"row {position}: {message}",
                           line=position if what == "line" else None, hint="task ids must be unique across all splits")
        out.extend(problems.finish())
    return out
