"""The manifest conformance vectors in ``spec/conformance`` and the checked-in JSON Schema.

``valid/*.toml`` must parse with no problem and survive a dump and reparse unchanged.
``invalid/NAME.toml`` must produce exactly the problems listed in ``invalid/NAME.json``
(field, line and message, in order): those messages are part of the interface.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from envhub.manifest import dump_manifest, manifest_json_schema, parse_manifest

SPEC = Path(__file__).resolve().parent.parent / "spec"
CONFORMANCE = SPEC / "conformance"
SCHEMA_FILE = SPEC / "schema" / "manifest-v1.schema.json"

VALID = sorted((CONFORMANCE / "valid").glob("*.toml"))
INVALID = sorted((CONFORMANCE / "invalid").glob("*.toml"))


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_there_are_enough_vectors() -> None:
    assert len(VALID) >= 12, f"{len(VALID)} valid vectors in {CONFORMANCE / 'valid'}"
    assert len(INVALID) >= 25, f"{len(INVALID)} invalid vectors in {CONFORMANCE / 'invalid'}"


def test_every_invalid_vector_has_exactly_one_sidecar() -> None:
    invalid = CONFORMANCE / "invalid"
    tomls = {p.stem for p in invalid.glob("*.toml")}
    sidecars = {p.stem for p in invalid.glob("*.json")}
    assert tomls - sidecars == set(), "invalid vectors without a NAME.json"
    assert sidecars - tomls == set(), "NAME.json files without a NAME.toml"


@pytest.mark.parametrize("path", VALID, ids=_ids(VALID))
def test_valid_vector(path: Path) -> None:
    manifest, problems = parse_manifest(path.read_bytes(), file=path.name)
    assert [p.render() for p in problems] == []
    assert manifest is not None

    dumped = dump_manifest(manifest)
    again, problems = parse_manifest(dumped)
    assert [p.render() for p in problems] == [], dumped
    assert again == manifest, dumped


@pytest.mark.parametrize("path", INVALID, ids=_ids(INVALID))
def test_invalid_vector(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    assert expected["description"], "say what the vector shows"
    assert expected["problems"], "an invalid vector lists at least one problem"

    manifest, problems = parse_manifest(path.read_bytes(), file=path.name)

    assert manifest is None
    got = [{"field": p.field, "line": p.line, "message": p.message} for p in problems]
    assert got == expected["problems"]
    assert all(p.severity == "error" and p.file == path.name for p in problems)


def test_schema_file_is_up_to_date() -> None:
    generated = json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n"
    checked_in = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    assert checked_in == generated, (
        f"{SCHEMA_FILE.relative_to(SPEC.parent)} is out of date with the manifest models; "
        "regenerate it with: envhub schema > spec/schema/manifest-v1.schema.json"
    )


def test_complete_example_in_the_spec_is_valid() -> None:
    text = (SPEC / "manifest.md").read_text(encoding="utf-8")
    section = text.split("## 20. A complete example", 1)[1]
    example = section.split("```toml\n", 1)[1].split("\n```", 1)[0]
    manifest, problems = parse_manifest(example)
    assert [p.render() for p in problems] == []
    assert manifest is not None


@pytest.fixture(scope="module")
def schema_validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)


@pytest.mark.parametrize("path", VALID, ids=_ids(VALID))
def test_valid_vector_matches_json_schema(path: Path, schema_validator: Any) -> None:
    data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    errors = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
              for e in schema_validator.iter_errors(data)]
    assert errors == []
