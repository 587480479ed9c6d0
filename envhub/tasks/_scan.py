"""Scan task files: count rows, digest bytes, check fields and ids. No task is kept.

Scanning is the hot path of ``envhub validate`` on large splits, so the JSONL scanner
reads big blocks, hashes each block once, and parses lines with orjson; the per-row work
is a handful of dictionary lookups.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from envhub.problems import Problem

__all__ = ["DEFAULT_MAX_LINE_BYTES", "SplitScan", "scan_jsonl", "scan_parquet"]

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
_BLOCK = 16 * 1024 * 1024
_MAX_PER_KIND = 10  # problems reported per kind and file; the rest are counted


@dataclass
class SplitScan:
    """What a scan learned about one task file."""

    rows: int = 0
    sha256: str = ""
    #: task id -> 1-based line (JSONL) or row (Parquet) where it first appears
    ids: dict[object, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


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
) -> SplitScan:
    """Scan a JSONL task file: one JSON object per line; blank lines are ignored.

    ``fields`` must be present in every row, ``numeric_fields`` must hold numbers, and
    ``id_field`` must hold a unique non-empty string or integer.
    """
    problems = _Problems(display)
    digest = hashlib.sha256()
    ids: dict[object, int] = {}
    required = tuple(dict.fromkeys((id_field, *fields)))
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    lineno = 0
    rows = 0
    pending = b""
    skipping = False  # inside a line already reported as too long

    def check_row(line: bytes, lineno: int) -> None:
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
            if name in row and (isinstance(value, bool) or not isinstance(value, (int, float))):
                problems.error("not-a-number", f"{name!r} must be a number, got {_json_kind(value)}", line=lineno)
        task_id = row.get(id_field)
        if id_field in row:
            if not _valid_id(task_id):
                problems.error("bad-id", f"{id_field!r} must be a non-empty string or an integer, got {_json_kind(task_id)}", line=lineno)
            elif task_id in ids:
                problems.error("duplicate-id", f"duplicate task id {task_id!r} (first on line {ids[task_id]})", line=lineno,
                               hint="task ids must be unique across all splits")
            else:
                ids[task_id] = lineno

    numeric = tuple(numeric_fields)
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
            for line in lines:
                lineno += 1
                if skipping:
                    skipping = False
                    continue
                if len(line) > max_line_bytes:
                    _report_long_line(problems, lineno, max_line_bytes)
                    rows += 1
                    continue
                if not line:
                    continue
                # The fast path: a well-formed row costs one parse and a few C-level checks.
                # Anything unusual goes to check_row, which parses again and explains.
                try:
                    row = loads(line)
                except decode_error:
                    if not line.isspace():
                        rows += 1
                        check_row(line, lineno)
                    continue
                rows += 1
                if type(row) is dict:
                    for name in required:
                        if name not in row:
                            break
                    else:
                        task_id = row[id_field]
                        # One hash lookup: setdefault returns an earlier line for a duplicate.
                        if ((type(task_id) is str and task_id) or type(task_id) is int) and ids.setdefault(task_id, lineno) == lineno:
                            for name in numeric:
                                value = row[name]
                                if type(value) is not int and type(value) is not float:
                                    del ids[task_id]
                                    break
                            else:
                                continue
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
    return SplitScan(rows=rows, sha256=digest.hexdigest(), ids=ids, problems=problems.finish())


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
    ids: dict[object, int] = {}
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
                if not _valid_id(task_id):
                    problems.error("bad-id", f"row {i}: {id_field!r} must be a non-empty string or an integer")
                elif task_id in ids:
                    problems.error("duplicate-id", f"row {i}: duplicate task id {task_id!r} (first in row {ids[task_id]})",
                                   hint="task ids must be unique across all splits")
                else:
                    ids[task_id] = i
    return SplitScan(rows=rows, sha256=sha, ids=ids, problems=problems.finish())
