"""Read ``envhub.toml`` into a :class:`Manifest`, gathering every problem; write it back."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w
from pydantic import ValidationError

from envhub import _toml
from envhub.errors import ManifestError
from envhub.manifest._limits import limit_problems, size_problem
from envhub.manifest._locate import locate
from envhub.manifest._models import MANIFEST_VERSION, Manifest
from envhub.manifest._plugins import plugin_problems
from envhub.manifest._problems import problems_from_validation
from envhub.manifest._semantic import semantic_problems
from envhub.problems import Problem

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup

MANIFEST_FILENAME = "envhub.toml"
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def _error(file: str, code: str, message: str, *, hint: str | None = None,
           line: int | None = None, column: int | None = None, field: str | None = None) -> Problem:
    return Problem("error", code, message, file=file, line=line, column=column, field=field, hint=hint)


def parse_manifest(source: str | bytes, *, file: str = MANIFEST_FILENAME,
                   plugins: PluginLookup | None = None) -> tuple[Manifest | None, list[Problem]]:
    """Parse and validate manifest text. Returns the manifest (``None`` if invalid) and
    every problem found; never raises for bad input.

    Names that are not built in (a plugin's verifier kind, ...) are checked against
    ``plugins``, which is only consulted then; with none (the default) only the built-in
    names are known, and any other is reported as unknown.

    A manifest past a size limit (spec section 2.1) is refused at once, with only that problem."""
    size = len(source) if isinstance(source, bytes) else len(source.encode("utf-8", "surrogatepass"))
    too_large = size_problem(size, file=file)
    if too_large:
        return None, [too_large]
    if isinstance(source, bytes):
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as e:
            bad_line = source.count(b"\n", 0, e.start) + 1
            return None, [_error(file, "not-utf8", f"byte {e.start + 1} is not valid UTF-8", line=bad_line,
                                 hint="save the file as UTF-8")]
    else:
        text = source
    # Editors on Windows often save UTF-8 with a byte-order mark, which TOML does not allow;
    # it carries no meaning, so drop it rather than fail with "Invalid statement".
    text = text.removeprefix("\ufeff")
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as e:
        message = str(e)
        line = getattr(e, "lineno", None)
        column = getattr(e, "colno", None)
        position = _TOML_POSITION.search(message)
        if position:
            line, column = int(position.group(1)), int(position.group(2))
            message = message[: position.start()]
        message = getattr(e, "msg", message)
        return None, [_error(file, "invalid-toml", f"invalid TOML: {message}", line=line, column=column,
                             hint="fix the TOML syntax at this position")]
    return validate_manifest_data(data, file=file, text=text, plugins=plugins)


def validate_manifest_data(data: dict[str, Any], *, file: str = MANIFEST_FILENAME, text: str = "",
                           plugins: PluginLookup | None = None) -> tuple[Manifest | None, list[Problem]]:
    """Validate already-parsed manifest data (see :func:`parse_manifest`)."""
    over = limit_problems(data, file=file, text=text)
    if over:
        return None, over
    declared = data.get("manifest-version", MANIFEST_VERSION)
    if type(declared) is int and declared > MANIFEST_VERSION:
        position = locate(text, ["manifest-version"])
        return None, [_error(
            file, "unsupported-manifest-version",
            f"manifest-version {declared} is newer than this envhub understands ({MANIFEST_VERSION})",
            hint="upgrade envhub (pip install -U envhub-rl)", field="manifest-version",
            line=position[0] if position else None, column=position[1] if position else None,
        )]
    # Names left to plugins are checked with the fields: like the models' own errors, their
    # problems come together, and cross-field rules wait until both are clean.
    named = plugin_problems(data, file=file, text=text, plugins=plugins)
    try:
        manifest = Manifest.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as e:
        errors = e.errors()
        if _needs_verifier(data) and "verifier" not in data:
            # [verifier] is optional only for mixtures, so the model leaves it optional; say
            # it is missing here too, with the other errors, as for any required table.
            errors.append({"type": "missing", "loc": ("verifier",), "msg": "Field required", "input": data})
        problems = [*problems_from_validation(errors, data, file=file, text=text), *named]
        problems.sort(key=lambda p: (p.line or 0, p.column or 0))
        return None, problems
    if named:
        return None, named
    problems = []
    for p in semantic_problems(manifest):
        position = locate(text, _field_loc(p.field)) if p.field else None
        problems.append(Problem(p.severity, p.code, p.message, file=file,
                                line=position[0] if position else None,
                                column=position[1] if position else None, field=p.field, hint=p.hint))
    problems.sort(key=lambda p: (p.line or 0, p.column or 0))
    return (None if problems else manifest), problems


def _needs_verifier(data: dict[str, Any]) -> bool:
    tasks = data.get("tasks")
    return not (isinstance(tasks, dict) and tasks.get("format") == "mixture")


def _field_loc(field: str) -> list[str | int]:
    # 'verifier.criteria[1].name' -> ['verifier', 'criteria', 1, 'name']; quoted keys unquoted.
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_-]+)|\[(\d+)\]', field)
    return [int(index) if index else (quoted or plain) for quoted, plain, index in parts]


def load_manifest(path: str | Path, *, plugins: PluginLookup | None = None) -> Manifest:
    """Read ``envhub.toml`` (or the one inside a directory).

    Raises :class:`ManifestError` with every problem found. ``plugins`` as for
    :func:`parse_manifest`.
    """
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_FILENAME
    try:
        source = path.read_bytes()
    except FileNotFoundError:
        raise ManifestError(
            f"{path}: no manifest here",
            [],
            hint="run 'envhub init NAME DIR' to create one, or pass the bundle directory",
        ) from None
    except OSError as e:
        raise ManifestError(f"{path}: cannot read the manifest: {e.strerror}", []) from e
    manifest, problems = parse_manifest(source, file=str(path), plugins=plugins)
    if manifest is None:
        raise ManifestError(f"{path}: invalid manifest", problems)
    return manifest


def dump_manifest(manifest: Manifest) -> str:
    """The manifest as TOML. Keys left at their defaults when loaded stay unwritten, so
    ``dump_manifest(load_manifest(p))`` loads back to an equal manifest."""
    # mode="python" keeps TOML's own types (dates, inf, nan) that JSON mode would mangle.
    data = manifest.model_dump(mode="python", by_alias=True, exclude_unset=True)
    return tomli_w.dumps(data)
