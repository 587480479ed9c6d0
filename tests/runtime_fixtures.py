"""Bundles for runtime tests, made with the real scaffold (``envhub init``) and edited."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from envhub.scaffold import create_bundle


def scaffold(tmp: Path, name: str = "acme/demo", *, protocol: str = "single-turn", state: str = "none",
             directory: str | None = None) -> Path:
    return create_bundle(name, tmp / (directory or name.replace("/", "-")), protocol=protocol,  # type: ignore[arg-type]
                         state=state)  # type: ignore[arg-type]


def set_table(root: Path, table: str, body: str) -> None:
    """Replace the body of ``[table]`` in the bundle's manifest."""
    manifest = root / "envhub.toml"
    text = manifest.read_text(encoding="utf-8")
    pattern = re.compile(rf"^\[{re.escape(table)}\]\n(?:(?!\[).*\n)*", re.M)
    assert pattern.search(text), f"no [{table}] in {manifest}"
    manifest.write_text(pattern.sub(lambda _: f"[{table}]\n{body.strip()}\n\n", text, count=1), encoding="utf-8")


def write_rows(root: Path, split: str, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(row) + "\n" for row in rows)
    (root / "tasks" / f"{split}.jsonl").write_text(text, encoding="utf-8")


def boxed_answer(task: Any) -> str:
    return f"The answer is \\boxed{{{task['answer']}}}"
