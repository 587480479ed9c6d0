"""The built-in tools of state kind ``sandbox``: a shell and file tools on the episode's workspace.

``[harness] builtin-tools`` names which of them an environment offers. Each is an ordinary
tool of the tool-use protocol (its JSON schema comes from its signature and docstring) that
receives the episode's :class:`envhub.sandbox.ShellWorkspace` as ``state`` (``State[...]``). Whatever goes
wrong comes back as the tool's output, starting with ``Error:``; nothing raises into the
episode. Every command and file operation happens inside the sandbox.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from envhub.runtime._tools import State, Tool, make_tool

__all__ = ["BUILTIN_TOOL_FUNCTIONS", "builtin_tools"]


def _error(e: Exception) -> str:
    message = getattr(e, "message", None) or str(e) or type(e).__name__
    return f"Error: {message}"


async def bash(command: str, state: State[Any]) -> str:
    """Run a shell command in the workspace and return its output and exit code.

    The working directory and exported variables carry over to the next command; background
    processes end with the command that started them.

    Args:
        command: The command, run with bash in the current directory (at first /workspace).
    """
    try:
        result = await state.run(command)
    except Exception as e:
        return _error(e)
    return str(result.observation())


async def read_file(path: str, state: State[Any]) -> str:
    """Read a text file of the workspace.

    Args:
        path: The file, relative to /workspace.
    """
    try:
        return str(await state.read_file(path))
    except Exception as e:
        return _error(e)


async def write_file(path: str, content: str, state: State[Any]) -> str:
    """Write a text file in the workspace, replacing it if it exists (parent directories are made).

    Args:
        path: The file, relative to /workspace.
        content: The whole new content of the file.
    """
    try:
        await state.write_file(path, content)
    except Exception as e:
        return _error(e)
    return f"Wrote {len(content.encode('utf-8'))} bytes to {path}"


async def edit_file(path: str, old: str, new: str, state: State[Any]) -> str:
    """Replace one exact piece of text in a file of the workspace.

    Args:
        path: The file, relative to /workspace.
        old: The text to replace; it must occur exactly once in the file.
        new: The text to put in its place.
    """
    try:
        await state.edit_file(path, old=old, new=new)
    except Exception as e:
        return _error(e)
    return f"Edited {path}"


async def list_files(state: State[Any], path: str = ".") -> str:
    """List the files under a directory of the workspace, two levels deep (directories end with '/').

    Args:
        path: The directory, relative to /workspace.
    """
    try:
        entries = await state.list_files(path, depth=2)
    except Exception as e:
        return _error(e)
    return "\n".join(entries) if entries else f"{path} is empty"


#: The functions, by tool name, in the order of ``envhub.manifest.BUILTIN_TOOLS``.
BUILTIN_TOOL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "bash": bash, "read_file": read_file, "write_file": write_file, "edit_file": edit_file, "list_files": list_files,
}


def builtin_tools(names: Sequence[str]) -> list[Tool]:
    """The built-in tools ``names`` lists, as :class:`Tool` objects, in that order.

    >>> [t.name for t in builtin_tools(["bash", "read_file"])]
    ['bash', 'read_file']
    >>> builtin_tools(["bash"])[0].spec["function"]["parameters"]["required"]
    ['command']
    """
    return [make_tool(BUILTIN_TOOL_FUNCTIONS[name], source=f"envhub:{name}") for name in names]
