"""Importing this package is a bug of envhub: listing and loading an environment package
must read its files, never run its code. Leave a mark, then fail loudly."""

import os
from pathlib import Path

marker = os.environ.get("ENVHUB_TEST_IMPORT_MARKER")
if marker:
    Path(marker).write_text("envhub_test_greet was imported\n", encoding="utf-8")
raise RuntimeError("envhub_test_greet must never be imported")
