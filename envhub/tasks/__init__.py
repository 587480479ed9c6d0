"""Tasks (T): reading and checking task files."""

from envhub.tasks._scan import DEFAULT_MAX_LINE_BYTES, SplitScan, scan_jsonl, scan_parquet

__all__ = ["DEFAULT_MAX_LINE_BYTES", "SplitScan", "scan_jsonl", "scan_parquet"]
