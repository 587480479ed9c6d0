"""The shell server: the guest a :class:`~envhub.sandbox.ShellWorkspace` runs (stdlib only).

Never imported by envhub: its source is the guest of a sandbox session, run as PID 1 of the
sandbox's PID namespace after the lock-in, with ``serve(CHANNEL, WORKSPACE, INPUT)``. It
answers one request at a time, each a JSON line on stdin, with one report:

- ``{"op": "run", "command", "timeout_s"}``: ``bash -c`` (``sh -c`` without bash) in a new
  process group, in the working directory and with the exported variables the previous
  command left; when it ends (or at its timeout, or when its output far exceeds the cap),
  every other process of the sandbox is killed, so nothing it started outlives it.
- ``read``, ``write``, ``edit``, ``list``: file operations beneath the workspace, made while no
  other process exists in the sandbox (so no link can be swapped under them).
- ``export``: the workspace's tree, as ``entry`` and ``data`` reports, then ``done``.

It keeps the host's descriptors to itself: it is not dumpable, so the sandbox's other
processes (the same user) cannot open ``/proc/1/fd/...`` to write on the report channel or on
the host-side stdout and stderr files, nor trace it; and its stdout and stderr point at
/dev/null once it has started.
"""

from __future__ import annotations

import base64
import contextlib
import os
import resource
import selectors
import signal
import stat
import subprocess
import time
from typing import Any

# Bash sources this (BASH_ENV, from a pipe: RC) before the command: after the command, the
# EXIT trap writes the working directory and the exported variables on descriptor STATE.
_BASH_RC = r"""exec RC<&-
unset BASH_ENV
__envhub_save() {
  builtin printf '%s\0' "$PWD"
  local __envhub_name
  for __envhub_name in $(compgen -e); do builtin printf '%s=%s\0' "$__envhub_name" "${!__envhub_name}"; done
}
trap '__envhub_save 2>/dev/null >&STATE' EXIT
"""
_SH_PREFIX = "trap '{ printf \"%s\\0\" \"$PWD\"; env -0; } 2>/dev/null >&STATE' EXIT\n"
_DROPPED = frozenset({"BASH_ENV", "SHLVL", "_", "BASHOPTS", "SHELLOPTS", "BASH_EXECUTION_STRING"})
_MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "xmalloc", "bad_alloc", "out of memory",
                 "Out of memory", "memory exhausted")
_PR_SET_DUMPABLE = 4


class _Failure(Exception):
    """A request that cannot be done: reported as ``{"event": "error", "message": ...}``."""


def serve(channel: Any, workspace: str, config: dict[str, Any]) -> None:
    """Answer requests until stdin ends; then end every process and return."""
    import ctypes

    if os.getpid() != 1:
        # Killing "every other process" is only safe as PID 1 of the sandbox's own PID namespace.
        channel.report(event="error", message="the shell server needs the sandbox's PID namespace")
        return
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    server = _Server(channel, workspace, config)
    channel.report(event="ready")
    while (request := channel.receive()) is not None:
        try:
            server.handle(request)
        except _Failure as e:
            channel.report(event="error", message=str(e))
    _end_others()


class _Server:
    def __init__(self, channel: Any, workspace: str, config: dict[str, Any]) -> None:
        self.channel = channel
        self.workspace = os.path.realpath(workspace)
        self.limits = config["limits"]
        self.cwd = self.workspace
        self.env = dict(os.environ)
        self.env.setdefault("TERM", "dumb")
        self.bash = next((p for p in ("/usr/bin/bash", "/bin/bash") if os.access(p, os.X_OK)), None)

    def handle(self, request: dict[str, Any]) -> None:
        op = request.get("op")
        if op == "run":
            self.channel.report(event="result", **self.run(str(request["command"]), float(request["timeout_s"])))
        elif op == "read":
            self.channel.report(event="text", text=self.read(request["path"], int(request["max_bytes"])))
        elif op == "write":
            self.write(request["path"], request["content"])
            self.channel.report(event="ok")
        elif op == "edit":
            self.edit(request["path"], request["old"], request["new"], int(request["max_bytes"]))
            self.channel.report(event="ok")
        elif op == "list":
            self.channel.report(event="entries", entries=self.list(request["path"], int(request["depth"]),
                                                                   int(request["max_entries"])))
        elif op == "export":
            self.export()
        else:
            raise _Failure(f"unknown request {op!r}")

    # --- commands ------------------------------------------------------------------------------

    def run(self, command: str, timeout_s: float) -> dict[str, Any]:
        limits = self.limits
        started = time.monotonic()
        out_r, out_w = os.pipe()
        state_r, state_w = os.pipe()
        env = dict(self.env)
        keep: tuple[int, ...]
        if self.bash:
            rc_r, rc_w = os.pipe()
            os.write(rc_w, _BASH_RC.replace("RC", str(rc_r)).replace("STATE", str(state_w)).encode())
            os.close(rc_w)
            argv, keep, env["BASH_ENV"] = [self.bash, "-c", command], (rc_r, state_w), f"/dev/fd/{rc_r}"
        else:
            rc_r = -1
            argv, keep = ["/bin/sh", "-c", _SH_PREFIX.replace("STATE", str(state_w)) + command], (state_w,)
        cwd = self.cwd if os.path.isdir(self.cwd) else self.workspace

        def child() -> None:  # in the child, before exec: the signals the server ignores, and the limits
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
                signal.signal(signum, signal.SIG_DFL)
            memory = limits["memory_mb"] * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))

        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=subprocess.STDOUT, cwd=cwd,
                                    env=env, start_new_session=True, preexec_fn=child, pass_fds=keep)
        except OSError as e:
            for fd in (out_r, out_w, state_r, state_w, rc_r):
                if fd >= 0:
                    os.close(fd)
            raise _Failure(f"could not start the shell: {e}") from e
        for fd in (out_w, state_w, rc_r):
            if fd >= 0:
                os.close(fd)
        output = _Output(limits["output_bytes"])
        state = bytearray()
        killed_by = None
        pidfd = os.pidfd_open(proc.pid)
        selector = selectors.DefaultSelector()
        selector.register(out_r, selectors.EVENT_READ, "out")
        selector.register(state_r, selectors.EVENT_READ, "state")
        selector.register(pidfd, selectors.EVENT_READ, "exit")
        deadline = started + timeout_s
        exited = False
        while not exited and killed_by is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                killed_by = "timeout"
                break
            for key, _ in selector.select(remaining):
                if key.data == "exit":
                    exited = True
                elif not self._read(key, selector, output, state):
                    continue
            if output.total > output.kill_at:
                killed_by = "output"
        if not exited:
            _kill_all()
        returncode = proc.wait()
        selector.unregister(pidfd)
        os.close(pidfd)
        ended = _end_others()
        # Every writer is gone: read what is left in the pipes, to their ends.
        while selector.get_map():
            for key, _ in selector.select(1.0):
                self._read(key, selector, output, state)
        selector.close()
        for fd in (out_r, state_r):
            os.close(fd)
        self._keep_state(bytes(state))
        text = output.text()
        if killed_by is None:
            killed_by = self._diagnose(returncode, text, ended)
        exit_code = None if killed_by in ("timeout", "output") else (
            128 - returncode if returncode < 0 else returncode)
        return {"exit_code": exit_code, "output": text, "truncated": output.total > output.cap,
                "timed_out": killed_by == "timeout", "killed_by": killed_by,
                "duration_s": round(time.monotonic() - started, 4), "ended": ended}

    @staticmethod
    def _read(key: Any, selector: selectors.BaseSelector, output: _Output, state: bytearray) -> bool:
        try:
            data = os.read(key.fd, 65536)
        except BlockingIOError:
            return True
        if not data:
            selector.unregister(key.fd)
            return False
        if key.data == "out":
            output.add(data)
        elif len(state) < 4 * 2**20:
            state += data
        return True

    def _keep_state(self, state: bytes) -> None:
        """Carry the working directory and exported variables the command left to the next."""
        if not state.endswith(b"\0"):
            return  # not recorded (the shell was killed, or the trap undone): keep the last state
        fields = state[:-1].split(b"\0")
        cwd = os.fsdecode(fields[0])
        env = {}
        for item in fields[1:]:
            name, sep, value = item.partition(b"=")
            if sep and name and os.fsdecode(name) not in _DROPPED:
                env[os.fsdecode(name)] = os.fsdecode(value)
        if os.path.isabs(cwd):
            self.cwd = cwd
        self.env = env

    def _diagnose(self, returncode: int, text: str, ended: int) -> str | None:
        """Why a command that ended by itself failed, when a limit explains it."""
        tail = text[-4096:]
        if ended >= max(4, self.limits["processes"] // 2) or "fork: retry" in tail or (
                "Resource temporarily unavailable" in tail and "fork" in tail):
            return "processes"
        if "No space left on device" in tail:
            return "disk-full"
        if returncode == 0:
            return None
        if returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or "CPU time limit exceeded" in tail:
            return "cpu"
        if any(sign in tail for sign in _MEMORY_SIGNS):
            return "memory"
        return None

    # --- files ---------------------------------------------------------------------------------

    def _resolve(self, path: str, *, must_exist: bool = True) -> str:
        """The real path of ``path`` (relative to the workspace), which must lie beneath it."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise _Failure("a path must be a non-empty string")
        full = os.path.realpath(os.path.join(self.workspace, path))
        if full != self.workspace and not full.startswith(self.workspace + "/"):
            raise _Failure(f"{path}: outside the workspace")
        if must_exist and not os.path.lexists(full):
            raise _Failure(f"{path}: no such file or directory")
        return full

    def _open_regular(self, path: str, full: str, flags: int) -> int:
        try:
            fd = os.open(full, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except IsADirectoryError:
            raise _Failure(f"{path}: is a directory") from None
        except OSError as e:
            raise _Failure(f"{path}: {e.strerror}") from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise _Failure(f"{path}: is a directory" if stat.S_ISDIR(mode) else f"{path}: not a regular file")
        return fd

    def read(self, path: str, max_bytes: int) -> str:
        full = self._resolve(path)
        fd = self._open_regular(path, full, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size > max_bytes:
                raise _Failure(f"{path}: too big to read whole ({size} bytes; the limit is {max_bytes}); "
                               f"read parts of it with a command (head, sed -n)")
            data = b""
            while chunk := os.read(fd, max_bytes + 1 - len(data)):
                data += chunk
                if len(data) > max_bytes:
                    raise _Failure(f"{path}: too big to read whole (the limit is {max_bytes} bytes)")
        finally:
            os.close(fd)
        if b"\0" in data:
            raise _Failure(f"{path}: a binary file, not text")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise _Failure(f"{path}: not UTF-8 text") from None

    def write(self, path: str, content: str) -> None:
        if not isinstance(content, str):
            raise _Failure("content must be a string")
        full = self._resolve(path, must_exist=False)
        parent = os.path.dirname(full)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise _Failure(f"{path}: {e.strerror}") from None
        self._resolve(os.path.relpath(parent, self.workspace))
        fd = self._open_regular(path, full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        data = content.encode("utf-8", "surrogateescape")
        try:
            while data:
                data = data[os.write(fd, data):]
        except OSError as e:
            raise _Failure(f"{path}: {e.strerror}") from None
        finally:
            os.close(fd)

    def edit(self, path: str, old: str, new: str, max_bytes: int) -> None:
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise _Failure("old must be a non-empty string and new a string")
        text = self.read(path, max_bytes)
        count = text.count(old)
        if count == 0:
            raise _Failure(f"{path}: the text to replace was not found (it must match exactly, whitespace included)")
        if count > 1:
            raise _Failure(f"{path}: the text to replace was found {count} times; include more of the "
                           f"surrounding text so that it matches once")
        self.write(path, text.replace(old, new, 1))

    def list(self, path: str, depth: int, max_entries: int) -> list[str]:
        full = self._resolve(path)
        if not os.path.isdir(full):
            raise _Failure(f"{path}: not a directory")
        entries: list[str] = []
        extra = 0

        def walk(directory: str, level: int) -> None:
            nonlocal extra
            try:
                with os.scandir(directory) as it:
                    items = sorted(it, key=lambda e: e.name)
            except OSError:
                return
            for item in items:
                rel = os.path.relpath(item.path, self.workspace)
                is_dir = item.is_dir(follow_symlinks=False)
                if len(entries) >= max_entries:
                    extra += 1
                else:
                    entries.append(rel + "/" if is_dir else rel)
                if is_dir and level < depth:
                    walk(item.path, level + 1)

        walk(full, 1)
        if extra:
            entries.append(f"... ({extra} more)")
        return entries

    def export(self) -> None:
        """The workspace's tree: an ``entry`` report per directory, link and file, each file's
        content in ``data`` reports after its entry; then ``done``."""
        for top, dirs, files in os.walk(self.workspace):
            dirs.sort()
            for name in [*dirs, *sorted(files)]:
                path = os.path.join(top, name)
                rel = os.path.relpath(path, self.workspace)
                try:
                    st = os.lstat(path)
                    if stat.S_ISLNK(st.st_mode):
                        self.channel.report(event="entry", p=rel, t="l", l=os.readlink(path))
                    elif stat.S_ISDIR(st.st_mode):
                        self.channel.report(event="entry", p=rel, t="d", m=stat.S_IMODE(st.st_mode))
                    elif stat.S_ISREG(st.st_mode):
                        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                        try:
                            self.channel.report(event="entry", p=rel, t="f", m=stat.S_IMODE(st.st_mode))
                            while chunk := os.read(fd, 1 << 20):
                                self.channel.report(event="data", b64=base64.b64encode(chunk).decode("ascii"))
                        finally:
                            os.close(fd)
                except OSError:
                    continue  # unreadable (the agent took its own permissions away): left out
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
        self.channel.report(event="done")


class _Output:
    """A command's output as it comes: the first and the last ``cap / 2`` bytes are kept."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kill_at = max(cap * 256, 4 * 2**20)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        half = self.cap // 2
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * half:
                del self.tail[:len(self.tail) - half]

    def text(self) -> str:
        half = self.cap // 2
        tail = bytes(self.tail[-half:]) if half else b""
        if self.total <= self.cap:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        elided = self.total - len(self.head) - len(tail)
        return (bytes(self.head).decode("utf-8", "replace") + f"\n[... {elided} bytes of output elided ...]\n"
                + tail.decode("utf-8", "replace"))


def _kill_all() -> None:
    """SIGKILL every process of the sandbox but this one (PID 1 is spared by ``kill(-1)``)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def _end_others() -> int:
    """Kill every process of the sandbox but this one, again until none is left (a fork bomb
    forks while it is being killed), and reap them; how many there were."""
    ended = 0
    while True:
        _kill_all()
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return ended
            if pid == 0:
                break
            ended += 1
        time.sleep(0.001)
