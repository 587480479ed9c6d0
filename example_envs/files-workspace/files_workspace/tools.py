"""The tools the model works with: list, read, write, move and delete files in its workspace.

Each is a plain function. envhub builds the JSON schema the model sees from its signature
and docstring; the parameter annotated ``State[Path]`` is hidden from the model and receives
the episode's workspace, a private copy of ``state/workspace/`` (``[state] kind = "files"``).

Paths are relative to the workspace. A path that would leave it (``../x``, ``/etc/passwd``,
a symbolic link pointing outside) is refused. Every mistake raises an exception with a
message written for the model: envhub sends it back as the tool's result,
``Error: FileNotFoundError: ...``, and the episode goes on.
"""

from __future__ import annotations

from pathlib import Path

from envhub.runtime import State

#: Longest file read_file returns whole; the workspace's files are far smaller.
MAX_READ_CHARS = 20_000


def _resolve(state: Path, path: str) -> Path:
    """``path`` inside the workspace ``state``; PermissionError if it would leave it."""
    if not path or not path.strip():
        raise ValueError("the path is empty; give a path relative to the workspace, e.g. notes/todo.txt")
    if Path(path).is_absolute():
        raise PermissionError(f"{path!r} is an absolute path; paths are relative to the workspace, e.g. notes/todo.txt")
    root = state.resolve()
    # resolve() follows symbolic links, so a link inside the workspace that points out of
    # it is caught here too.
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise PermissionError(f"{path!r} is outside the workspace; paths are relative to the workspace")
    return target


def _relative(state: Path, target: Path) -> str:
    return target.relative_to(state.resolve()).as_posix()


def _existing_file(state: Path, path: str) -> Path:
    target = _resolve(state, path)
    if target.is_dir():
        raise IsADirectoryError(f"{path!r} is a directory; list_files shows the files in it")
    if not target.is_file():
        raise FileNotFoundError(f"there is no file {path!r}; list_files shows the files there are")
    return target


def list_files(directory: str = ".", *, state: State[Path]) -> str:
    """List the files in a directory of the workspace and all its subdirectories, one path
    per line, relative to the workspace.

    Args:
        directory: the directory to list, relative to the workspace; "." (the default) is the whole workspace.
    """
    target = _resolve(state, directory)
    if not target.is_dir():
        raise NotADirectoryError(f"there is no directory {directory!r}; list_files() lists the whole workspace")
    files = sorted(_relative(state, p) for p in target.rglob("*") if p.is_file())
    return "\n".join(files) if files else f"(no files in {directory!r})"


def read_file(path: str, *, state: State[Path]) -> str:
    """Read a text file of the workspace and return its contents.

    Args:
        path: the file's path relative to the workspace, e.g. "notes/todo.txt".
    """
    text = _existing_file(state, path).read_text(encoding="utf-8")
    if len(text) > MAX_READ_CHARS:
        return text[:MAX_READ_CHARS] + f"\n[... cut: the file has {len(text)} characters]"
    return text


def write_file(path: str, content: str, *, state: State[Path]) -> str:
    """Write a text file, replacing it if it exists; missing directories are created.

    Args:
        path: the file's path relative to the workspace, e.g. "reports/summary.txt".
        content: the whole new content of the file.
    """
    target = _resolve(state, path)
    if target.is_dir():
        raise IsADirectoryError(f"{path!r} is a directory, not a file")
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    size = f"{len(content)} character{'' if len(content) == 1 else 's'}"
    return f"{'replaced' if existed else 'created'} {_relative(state, target)} ({size})"


def move_file(source: str, destination: str, *, state: State[Path]) -> str:
    """Move or rename a file; missing directories of the destination are created.

    Args:
        source: the file to move, relative to the workspace.
        destination: its new path, relative to the workspace; must not exist yet.
    """
    origin = _existing_file(state, source)
    target = _resolve(state, destination)
    if target.exists():
        raise FileExistsError(f"{destination!r} already exists; delete it first if it should be replaced")
    target.parent.mkdir(parents=True, exist_ok=True)
    origin.rename(target)
    return f"moved {_relative(state, origin)} to {_relative(state, target)}"


def delete_file(path: str, *, state: State[Path]) -> str:
    """Delete a file of the workspace.

    Args:
        path: the file to delete, relative to the workspace.
    """
    target = _existing_file(state, path)
    target.unlink()
    return f"deleted {_relative(state, target)}"
