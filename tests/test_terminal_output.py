"""Text printed for a person never carries terminal control characters through.

A manifest, a registry entry or a client's request can hold escape sequences that set the
window title, write the clipboard (OSC 52), reorder text (bidi overrides) or print over a
line (carriage return). Each case runs through the installed ``envhub`` command and checks
the bytes printed: none of those characters, and the visible escape in their place.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx2
import pytest

from envhub.scaffold import create_bundle
from tests.conftest import run_envhub
from tests.serve_fixtures import start_server

#: (id, the sequence, what envhub prints instead)
SEQUENCES: list[tuple[str, str, str]] = [
    ("window-title", "\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
    ("clipboard-write", "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07", "\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07"),
    ("bidi-override", "\u202egnp.exe", "\\u202egnp.exe"),
    ("bidi-isolate", "\u2067evil\u2069", "\\u2067evil\\u2069"),
    ("carriage-return", "fine\rEVIL", "fine\\x0dEVIL"),
    ("clear-screen", "\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),
    ("c1-csi", "\x9b31m", "\\x9b31m"),
]
IDS = [case[0] for case in SEQUENCES]
#: What must never reach a terminal: C0 controls but newline and tab, DEL, C1, bidi controls.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string (json escapes are TOML escapes for these characters)."""
    return json.dumps(text, ensure_ascii=True)


def _bundle(root: Path, name: str, description: str) -> Path:
    path = create_bundle(name, root / name.split("/")[1])
    manifest = path / "envhub.toml"
    text = manifest.read_text()
    text = re.sub(r'^description = .*$', lambda _: f"description = {_toml_string(description)}", text, count=1,
                  flags=re.MULTILINE)
    manifest.write_text(text)
    return path


def _clean(text: str) -> None:
    found = _CONTROL.findall(text)
    assert not found, f"control characters printed: {found!r}"


@pytest.mark.parametrize(("sequence", "shown"), [case[1:] for case in SEQUENCES], ids=IDS)
def test_info_of_a_bundle_shows_escapes(tmp_path: Path, sequence: str, shown: str) -> None:
    path = _bundle(tmp_path, "acme/esc", f"Looks fine {sequence} really")
    result = run_envhub("info", str(path), cwd=tmp_path)
    assert result.code == 0, result.err
    _clean(result.out + result.err)
    assert f"  Looks fine {shown} really\n" in result.out


@pytest.mark.parametrize(("sequence", "shown"), [case[1:] for case in SEQUENCES], ids=IDS)
def test_registry_text_shows_escapes(tmp_path: Path, sequence: str, shown: str) -> None:
    registry = tmp_path / "registry"
    env = {"ENVHUB_REGISTRY": str(registry)}
    path = _bundle(tmp_path, "acme/esc", f"Desc {sequence} end")
    assert run_envhub("push", str(path), cwd=tmp_path, env=env).code == 0
    search = run_envhub("search", "esc", cwd=tmp_path, env=env)  # before the yank hides it
    # JSON output stays exact: JSON escapes control characters itself.
    as_json = run_envhub("search", "esc", "--json", cwd=tmp_path, env=env)
    _clean(as_json.out)
    assert json.loads(as_json.out)[0]["description"] == f"Desc {sequence} end"
    yank = run_envhub("yank", "acme/esc@0.1.0", "--reason", f"bad {sequence} reason", cwd=tmp_path, env=env)
    assert yank.code == 0, yank.err
    assert yank.err == f"Yanked acme/esc@0.1.0 in {registry}: bad {shown} reason\n"
    versions = run_envhub("versions", "acme/esc", cwd=tmp_path, env=env)
    info = run_envhub("info", "acme/esc@0.1.0", cwd=tmp_path, env=env)
    for result in (search, versions, info):
        assert result.code == 0, result.err
        _clean(result.out + result.err)
    assert f"Desc {shown} end" in search.out
    assert versions.out.endswith(f"  yanked: bad {shown} reason\n")
    assert f"  Desc {shown} end\n" in info.out and f"  yanked:    bad {shown} reason\n" in info.out


@pytest.mark.parametrize(("sequence", "shown"), [case[1:] for case in SEQUENCES], ids=IDS)
def test_validate_and_errors_quoting_a_manifest_value_show_escapes(tmp_path: Path, sequence: str,
                                                                     shown: str) -> None:
    path = _bundle(tmp_path, "acme/esc", "Fine.")
    manifest = path / "envhub.toml"
    bad = f"tasks/x{sequence}.jsonl"
    manifest.write_text(manifest.read_text().replace('path = "tasks/train.jsonl"', f"path = {_toml_string(bad)}"))
    validate = run_envhub("validate", str(path), cwd=tmp_path)
    assert validate.code == 2
    _clean(validate.out + validate.err)
    # A path with a C0 control character is refused as a path; any other is a missing file.
    hint = f"  hint: create tasks/x{shown}.jsonl, or fix the path (relative to envhub.toml)\n"
    refused = ": name a file without control characters\n"
    assert (refused if any(ord(c) < 32 for c in sequence) else hint) in validate.out
    info = run_envhub("info", str(path), cwd=tmp_path)  # the same problems, as an error on stderr
    assert info.code == 2
    _clean(info.out + info.err)
    assert (refused if any(ord(c) < 32 for c in sequence) else hint) in info.err


_ECHO = '''
    if guess.startswith("echo:"):  # a bug that quotes the model's text
        raise RuntimeError(guess)
'''


def test_serve_log_shows_escapes_from_a_client(tmp_path: Path) -> None:
    path = create_bundle("acme/guess", tmp_path / "guess", protocol="multi-turn")
    game = path / "guess" / "game.py"
    anchor = '    guess = messages[-1]["content"].strip()\n'
    assert anchor in game.read_text()
    game.write_text(game.read_text().replace(anchor, anchor + _ECHO))
    server = start_server([str(path), "--trust"], tmp_path / "serve")
    try:
        sent = "echo:" + "".join(case[1] for case in SEQUENCES)
        episode = httpx2.post(f"{server.base_url}/v1/environments/acme/guess/episodes",
                              json={"split": "train", "index": 0}).json()
        step = httpx2.post(f"{server.base_url}/v1/episodes/{episode['episode_id']}/step", json={"action": sent})
        assert step.json()["info"]["error"].endswith(f"RuntimeError: {sent}; the episode is closed")
    finally:
        server.stop()
    log = server.stderr()
    _clean(log)
    assert "RuntimeError: echo:" + "".join(case[2] for case in SEQUENCES) in log
