import os
from pathlib import Path

import pytest


@pytest.fixture
def counts():
    return dict(line.split() for line in Path("/app/out/counts.txt").read_text().splitlines())


@pytest.mark.parametrize("name,expected", [("letters.txt", "3"), ("numbers.txt", "2")])
def test_count(counts, name, expected):
    assert counts[name] == expected


def test_sorted():
    lines = Path("/app/out/counts.txt").read_text().splitlines()
    assert lines == sorted(lines)
    assert len(lines) == int(os.environ["EXPECTED_FILES"])


def test_mode_kept():
    assert os.environ.get("MODE") == "strict"
