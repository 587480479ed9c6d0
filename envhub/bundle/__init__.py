"""Bundles: a manifest plus the files it names; validating, building and extracting them.

Names are imported on first use, so reading an archive (a pull) does not import the
manifest models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envhub.bundle._archive import RECORD, ArchiveInfo, extract_archive, parse_record, path_problem, write_archive
    from envhub.bundle._build import IGNORE_FILE, BuiltBundle, archive_stem, build_bundle, bundle_files, public_manifest
    from envhub.bundle._golden import GoldenLine, golden_problems, read_golden
    from envhub.bundle._validate import BundleCheck, SplitFacts, validate_bundle

_WHERE = {
    "RECORD": "_archive", "ArchiveInfo": "_archive", "extract_archive": "_archive",
    "parse_record": "_archive", "path_problem": "_archive", "write_archive": "_archive",
    "GoldenLine": "_golden", "golden_problems": "_golden", "read_golden": "_golden",
    "IGNORE_FILE": "_build", "BuiltBundle": "_build", "archive_stem": "_build",
    "build_bundle": "_build", "bundle_files": "_build", "public_manifest": "_build",
    "BundleCheck": "_validate", "SplitFacts": "_validate", "validate_bundle": "_validate",
}
# Written out (not computed from _WHERE) so type checkers see the re-exports;
# tests/test_architecture.py checks that the two agree.
__all__ = [
    "ArchiveInfo", "BuiltBundle", "BundleCheck", "GoldenLine", "IGNORE_FILE", "RECORD", "SplitFacts",
    "archive_stem", "build_bundle", "bundle_files", "extract_archive", "golden_problems", "parse_record",
    "path_problem", "public_manifest", "read_golden", "validate_bundle", "write_archive"
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'envhub.bundle' has no attribute {name!r}")
    return getattr(importlib.import_module(f"envhub.bundle.{_WHERE[name]}"), name)
