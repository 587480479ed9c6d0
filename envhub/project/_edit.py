"""``envhub add`` and ``envhub remove``: edit ``[tool.envhub] environments`` in place.

tomlkit keeps the rest of ``pyproject.toml`` (comments, order, layout) byte for byte;
tomli-w would rewrite the whole file.
"""

from __future__ import annotations

from pathlib import Path

from envhub.errors import UsageError

__all__ = ["with_environment", "without_environment", "write_environments"]


def with_environment(current: list[str], requirement: str, name: str) -> list[str]:
    """``current`` with ``requirement`` added, or replacing the entry for ``name``."""
    from envhub.project._resolver import parse_requirement

    out, replaced = [], False
    for text in current:
        if parse_requirement(text).name == name:
            if not replaced:
                out.append(requirement)
            replaced = True
        else:
            out.append(text)
    if not replaced:
        out.append(requirement)
    return out


def without_environment(current: list[str], name: str, pyproject: Path) -> list[str]:
    from envhub.project._resolver import parse_requirement

    out = [text for text in current if parse_requirement(text).name != name]
    if len(out) == len(current):
        listed = ", ".join(parse_requirement(t).name for t in current) or "none"
        raise UsageError(f"{name} is not in [tool.envhub] environments of {pyproject} (listed: {listed})",
                         hint="name an environment as 'envhub tree' shows it")
    return out


def write_environments(pyproject: Path, environments: list[str]) -> None:
    """Set ``[tool.envhub] environments`` in ``pyproject``, keeping everything else as it
    is; written to a temporary file and renamed into place."""
    import tomlkit

    text = pyproject.read_text(encoding="utf-8")
    doc = tomlkit.parse(text)
    tool = doc.get("tool")
    if tool is None:
        tool = tomlkit.table(is_super_table=True)
        doc.append("tool", tool)
    envhub = tool.get("envhub")
    if envhub is None:
        envhub = tomlkit.table()
        tool.append("envhub", envhub)
    array = tomlkit.array()
    array.extend(environments)
    if len(environments) > 1:
        array.multiline(True)
    envhub["environments"] = array
    from envhub._atomic import write_text_atomic

    write_text_atomic(pyproject, tomlkit.dumps(doc))
