"""Tasks (T): reading and checking task files, and the seeds of held-out generator splits."""

from envhub.tasks._heldout import (
    SecretError,
    heldout_seeds,
    new_secret,
    parse_sealed_seeds,
    read_secret,
    sealed_seeds_bytes,
    sealed_seeds_path,
    write_secret,
)
from envhub.tasks._leaks import DISTINCTIVE_CHARS, Needle, PublicFile, distinctive, find_leaks, regenerating_scripts
from envhub.tasks._parquet import read_parquet
from envhub.tasks._scan import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_DIFFICULTY,
    IdSource,
    SplitScan,
    TaskIds,
    duplicate_id_problems,
    json_hint,
    json_reason,
    scan_jsonl,
    scan_parquet,
    scan_rows,
)

__all__ = [
    "DISTINCTIVE_CHARS",
    "Needle",
    "PublicFile",
    "distinctive",
    "find_leaks",
    "regenerating_scripts",
    "DEFAULT_MAX_LINE_BYTES",
    "MAX_DIFFICULTY",
    "IdSource",
    "SecretError",
    "SplitScan",
    "TaskIds",
    "duplicate_id_problems",
    "heldout_seeds",
    "json_hint",
    "json_reason",
    "new_secret",
    "parse_sealed_seeds",
    "read_parquet",
    "read_secret",
    "scan_jsonl",
    "scan_parquet",
    "scan_rows",
    "sealed_seeds_bytes",
    "sealed_seeds_path",
    "write_secret",
]
