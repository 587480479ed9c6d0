"""Tasks (T): reading and checking task files."""

from envhub.tasks._scan import (
    DEFAULT_MAX_LINE_BYTES,
    IdSource,
    SplitScan,
    TaskIds,
    duplicate_id_problems,
    scan_jsonl,
    scan_parquet,
    scan_rows,
)

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "IdSource",
    "SplitScan",
    "TaskIds",
    "duplicate_id_problems",
    "scan_jsonl",
    "scan_parquet",
    "scan_rows",
]
