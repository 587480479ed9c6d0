"""The manifest, ``envhub.toml``: models, reading, writing and the JSON Schema."""

from __future__ import annotations

from typing import Any

from envhub.manifest._load import (
    MANIFEST_FILENAME,
    dump_manifest,
    load_manifest,
    parse_manifest,
    validate_manifest_data,
)
from envhub.manifest._models import (
    MANIFEST_VERSION,
    VERIFIER_KINDS,
    ConfigSection,
    EnvironmentSection,
    HarnessSection,
    Manifest,
    Split,
    StateSection,
    TasksSection,
)
from envhub.manifest._plugins import OptionsModel

__all__ = [
    "MANIFEST_FILENAME",
    "MANIFEST_VERSION",
    "VERIFIER_KINDS",
    "ConfigSection",
    "EnvironmentSection",
    "HarnessSection",
    "Manifest",
    "OptionsModel",
    "Split",
    "StateSection",
    "TasksSection",
    "dump_manifest",
    "load_manifest",
    "manifest_json_schema",
    "parse_manifest",
    "validate_manifest_data",
]


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of manifest v1, as checked in at spec/schema/manifest-v1.schema.json."""
    schema = Manifest.model_json_schema(by_alias=True, mode="validation")
    _close_pattern_objects(schema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://envhub.dev/spec/schema/manifest-v1.schema.json",
        **schema,
    }


def _close_pattern_objects(node: Any) -> None:
    # pydantic renders dict[ConstrainedKey, V] as patternProperties but leaves other keys
    # open; the models refuse them, so the schema should too.
    if isinstance(node, dict):
        if "patternProperties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_pattern_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_pattern_objects(value)
