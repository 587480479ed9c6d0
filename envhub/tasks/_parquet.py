"""Opening Parquet task files, and what their columns may hold.

A task is a JSON object wherever it goes (served over HTTP, written into records), so a
column's type must have a JSON form: strings, integers, floating-point numbers, booleans,
nulls, and lists, structs and maps of those. Binary, decimal, duration and interval columns
have none and are refused; timestamps, dates and times are read as Python date-time
values, which verifiers compare as their text (``2020-01-01 00:00:00``), and are warned
about. Nothing here reads more than the footer until asked for rows.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.errors import BundleError

if TYPE_CHECKING:
    import pyarrow
    import pyarrow.parquet

    from envhub.problems import Severity

__all__ = ["ParquetUnreadable", "column_type_problem", "open_parquet", "read_parquet", "read_table", "type_hint"]

_REWRITE = "write the split again with pyarrow or pandas .to_parquet()"


class ParquetUnreadable(Exception):
    """A Parquet task file that cannot be read: ``message`` says why, ``hint`` what to do."""

    def __init__(self, code: str, message: str, hint: str) -> None:
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint


def open_parquet(path: Path) -> pyarrow.parquet.ParquetFile:
    """The Parquet file at ``path``, its footer read and its column names checked.

    Raises :class:`ParquetUnreadable` if it is not Parquet, is truncated or damaged, or
    names a column twice (rows are tables of fields: a name can hold one value)."""
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(size - 4, 0))
        tail = f.read(4)
    if head != b"PAR1" or tail != b"PAR1" or size < 12:
        raise ParquetUnreadable("not-parquet", "not a Parquet file (it does not start and end with 'PAR1')",
                                "write the split with pyarrow or pandas .to_parquet(), or set format = 'jsonl'")
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ParquetUnreadable("missing-dependency", "reading Parquet needs pyarrow, which is not installed",
                                "pip install 'envhub-rl[parquet]'") from None
    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
    except Exception as e:  # pyarrow raises ArrowInvalid, OSError and others for a damaged footer
        raise ParquetUnreadable("invalid-parquet", f"the Parquet file is truncated or damaged ({_reason(e)})",
                                _REWRITE) from e
    repeated = [name for name, n in Counter(names).items() if n > 1]
    if repeated:
        listed = ", ".join(f"{name!r} ({Counter(names)[name]} times)" for name in repeated)
        raise ParquetUnreadable("duplicate-column", f"columns named more than once: {listed}",
                                "rename or drop the extra columns: each task field needs one column")
    return pf


def read_table(pf: pyarrow.parquet.ParquetFile, columns: list[str] | None = None) -> pyarrow.Table:
    """The rows of ``pf`` (only ``columns`` if given); :class:`ParquetUnreadable` if a
    page is damaged."""
    try:
        return pf.read(columns=columns)
    except Exception as e:  # a damaged page: ArrowInvalid, OSError, ...
        raise ParquetUnreadable("invalid-parquet", f"the Parquet file is truncated or damaged ({_reason(e)})",
                                _REWRITE) from e


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    # pyarrow prefixes the reason with the path; the problem names the file already.
    return text.split("': ", 1)[1] if text.startswith("Could not open Parquet input source '") else text


def column_type_problem(t: pyarrow.DataType) -> tuple[Severity, str] | None:
    """``("error" | "warning", what)`` if values of Arrow type ``t`` have no JSON form,
    or None when they do. Nested types are checked all the way down."""
    import pyarrow.types as pat

    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_fixed_size_binary(t) or str(t) == "binary_view":
        return "error", "binary"
    if pat.is_decimal(t):
        return "error", "decimal"
    if pat.is_duration(t) or pat.is_interval(t):
        return "error", "duration"
    if pat.is_dictionary(t):
        return column_type_problem(t.value_type)
    if pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t):
        return column_type_problem(t.value_type)
    if pat.is_map(t):
        return column_type_problem(t.key_type) or column_type_problem(t.item_type)
    if pat.is_struct(t):
        found = [column_type_problem(t.field(i).type) for i in range(t.num_fields)]
        return next((f for f in found if f and f[0] == "error"), None) or next((f for f in found if f), None)
    if pat.is_temporal(t):
        return "warning", "date-time"
    return None


def read_parquet(path: Path) -> list[dict[str, Any]]:
    """The rows of a Parquet task file, each a dict of its columns.

    Raises :class:`~envhub.errors.BundleError` naming the file (and the column) when it
    cannot be read, names a column twice, or has a column without a JSON form."""
    try:
        pf = open_parquet(path)
        for column in pf.schema_arrow:
            found = column_type_problem(column.type)
            if found is not None and found[0] == "error":
                raise ParquetUnreadable("unsupported-type", f"column {column.name!r} holds {found[1]} values "
                                        f"({column.type}), which a task (a JSON object) cannot hold",
                                        _type_hint(found[1]))
        rows: list[dict[str, Any]] = read_table(pf).to_pylist()
    except ParquetUnreadable as e:
        raise BundleError(f"{path}: {e.message}", [], hint=e.hint) from None
    return rows


def _type_hint(kind: str) -> str:
    return {
        "binary": "store text as a string column (decode it as UTF-8, or base64-encode bytes)",
        "decimal": "store it as a float column, or as a string to keep every digit",
        "duration": "store it as a number of seconds (an integer or float column)",
    }.get(kind, "store it as a string or number column")


def type_hint(kind: str) -> str:
    """The fix for a column holding ``kind`` values (see :func:`column_type_problem`)."""
    if kind == "date-time":
        return "store it as a string column (e.g. ISO 8601) so the answer is the same text everywhere"
    return _type_hint(kind)
