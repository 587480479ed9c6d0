"""The program the code-tests sandbox runs: ``python -I -B _sandbox_runner.py`` (stdlib only).

It must not import envhub: it runs in an isolated interpreter whose ``sys.path`` need not
contain it. It reads its job as JSON from stdin (so neither the tests nor the result channel's
token ever lie on disk where the candidate could read them), locks itself down, runs the
candidate and then the tests, and reports one JSON line per event on an inherited file
descriptor, never on stdout, which the candidate owns.

Lock-down, in this order, each layer best effort and reported:
1. ``unshare(CLONE_NEWUSER | CLONE_NEWNET)``: a network namespace with no interfaces but a
   loopback that is down, so no connection leaves the process (Linux only);
2. Landlock: writes only beneath the work directory (and to /dev/null), no TCP bind or
   connect, no signals to processes outside the sandbox (Linux 5.13+, by ABI version);
3. resource limits: address space, CPU time, file size, open files, no core dumps;
4. an audit hook (PEP 578) refusing network calls, writes outside the work directory,
   starting processes, ctypes, raising its own limits and signals to other processes.
The first two hold for anything the process does; the audit hook is CPython-level only and,
as its PEP says, not a security boundary against code that sets out to defeat it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

#: Exit status after a MemoryError: the parent reports ``killed_by = "memory"``.
EXIT_MEMORY = 86

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_NO_NEW_PRIVS = 38
# Landlock system calls share one number on every architecture.
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446


def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _unshare_network() -> str | None:
    """Enter new user and network namespaces; the layer's name, or None when refused."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = _libc()
    except OSError:
        return None
    # A new user namespace lets an unprivileged user create the network namespace; root (or a
    # kernel with user namespaces off) may still get the network namespace alone.
    for flags in (_CLONE_NEWUSER | _CLONE_NEWNET, _CLONE_NEWNET):
        if libc.unshare(flags) == 0:
            return "network-namespace"
    return None


def _landlock(workdir: str) -> str | None:
    """Restrict writes to ``workdir`` (and /dev/null), TCP and signals, for this process and
    its children, irreversibly. The layer's name with its ABI, or None when unavailable."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = _libc()
    except OSError:
        return None
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return None
    # WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_CHAR/DIR/REG/SOCK/FIFO/BLOCK/SYM; reads and
    # execution stay unrestricted (the interpreter and its libraries live elsewhere).
    fs = (1 << 1) | (1 << 4) | (1 << 5) | sum(1 << bit for bit in range(6, 13))
    if abi >= 2:
        fs |= 1 << 13  # REFER: no linking or renaming a file out of the work directory
    if abi >= 3:
        fs |= 1 << 14  # TRUNCATE
    net = (1 << 0) | (1 << 1) if abi >= 4 else 0  # BIND_TCP, CONNECT_TCP
    scoped = (1 << 0) | (1 << 1) if abi >= 6 else 0  # abstract unix sockets, signals

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    size = 8 if abi < 4 else 16 if abi < 6 else 24
    attr = RulesetAttr(fs, net, scoped)
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return None
    try:
        file_rights = (1 << 1) | ((1 << 14) if abi >= 3 else 0)
        for path, allowed in ((workdir, fs), (os.devnull, file_rights)):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneath(allowed, fd)
                if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) != 0:
                    return None
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return None
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return None
    finally:
        os.close(ruleset)
    return f"landlock-abi-{abi}"


def _limit_resources(job: dict[str, Any]) -> str | None:
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    limits = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_CPU, job["cpu_s"], job["cpu_s"] + 1),  # soft: SIGXCPU; hard: SIGKILL
        (resource.RLIMIT_FSIZE, job["file_size_bytes"], job["file_size_bytes"]),
        (resource.RLIMIT_NOFILE, job["open_files"], job["open_files"]),
    ]
    if hasattr(resource, "RLIMIT_AS"):
        limits.append((resource.RLIMIT_AS, job["memory_bytes"], job["memory_bytes"]))
    refused = []
    for which, soft, hard in limits:
        try:
            current_hard = resource.getrlimit(which)[1]
            if current_hard != resource.RLIM_INFINITY:
                # Only a privileged process may raise a hard limit: never ask for more.
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            # One limit the OS refuses (macOS and RLIMIT_AS) must not cost the others.
            refused.append(which)
    if len(refused) == len(limits):
        return None
    return "rlimits" if not refused else "rlimits-partial"


_PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
     "os.startfile", "pty.spawn"}
)
_NETWORK_EVENTS = frozenset(
    {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
     "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr", "socket.getnameinfo"}
)
# Building code objects (code.__new__, marshal) is not refused, though crafted bytecode can
# corrupt memory: the standard library does both on import (asyncio, .pyc files), and the
# OS layers, not this hook, are what hold against code that sets out to break the sandbox.
_REFUSED_EVENTS = frozenset({"resource.setrlimit", "resource.prlimit"})
# For each event that writes, removes or changes a path: the positions of its path arguments
# and of the dir_fd arguments those paths are relative to.
_PATH_EVENTS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "os.remove": ((0,), (1,)), "os.rmdir": ((0,), (1,)), "os.mkdir": ((0,), (2,)),
    "os.chmod": ((0,), (2,)), "os.chown": ((0,), (3,)), "os.utime": ((0,), (3,)),
    "os.mkfifo": ((0,), (2,)), "os.mknod": ((0,), (3,)), "shutil.rmtree": ((0,), (1,)),
    "os.truncate": ((0,), ()), "os.chflags": ((0,), ()), "os.lchflags": ((0,), ()),
    "os.lchmod": ((0,), ()), "os.setxattr": ((0,), ()), "os.removexattr": ((0,), ()),
    "os.rename": ((0, 1), (2, 3)), "os.link": ((0, 1), (2, 3)), "os.symlink": ((1,), (2,)),
}


def _install_audit_hook(workdir: str) -> None:
    """Refuse, with PermissionError, what the sandbox does not allow (see the module doc).

    The hook keeps no mutable state, so there is nothing for the candidate to switch off.
    """
    realpath, join, getcwd, isdir, fspath, fsdecode, readlink = (
        os.path.realpath, os.path.join, os.getcwd, os.path.isdir, os.fspath, os.fsdecode, os.readlink
    )
    root = realpath(workdir)
    prefix = root + os.sep
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    own_pid = os.getpid()
    on_linux = sys.platform.startswith("linux")

    def resolve(path: Any, dir_fd: Any = None) -> str:
        path = fspath(path)
        path = fsdecode(path) if isinstance(path, bytes) else path
        base = getcwd()
        # CPython passes dir_fd=-1 to audit hooks when there is none.
        if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(path):
            if not on_linux:
                raise PermissionError("sandbox: paths relative to a dir_fd are not allowed")
            base = readlink(f"/proc/self/fd/{dir_fd}")
        return realpath(join(base, path))

    def inside(path: Any, dir_fd: Any = None) -> bool:
        if isinstance(path, int):
            return True  # a descriptor: it was checked when it was opened
        resolved = resolve(path, dir_fd)
        return resolved == root or resolved.startswith(prefix) or resolved == os.devnull

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, _mode, flags = args
            if isinstance(path, int) or path is None:
                return
            if isinstance(flags, int) and flags & write_flags:
                if not inside(path):
                    raise PermissionError(f"sandbox: writing {path!r} outside the work directory is not allowed")
            elif not inside(path) and isdir(resolve(path)):
                # The open event does not carry dir_fd, so a directory descriptor from outside
                # would let os.open(name, O_WRONLY, dir_fd=fd) escape: refuse it up front.
                raise PermissionError(f"sandbox: opening directory {path!r} is not allowed")
            return
        positions = _PATH_EVENTS.get(event)
        if positions is not None:
            paths, dir_fds = positions
            for i, path_at in enumerate(paths):
                dir_fd_at = dir_fds[i] if i < len(dir_fds) else (dir_fds[-1] if dir_fds else None)
                dir_fd = args[dir_fd_at] if dir_fd_at is not None and dir_fd_at < len(args) else None
                if path_at < len(args) and not inside(args[path_at], dir_fd):
                    raise PermissionError(f"sandbox: {event} on {args[path_at]!r} outside the work directory is not allowed")
            return
        if event in _NETWORK_EVENTS:
            raise PermissionError(f"sandbox: network access ({event}) is not allowed")
        if event in _PROCESS_EVENTS:
            raise PermissionError(f"sandbox: starting processes ({event}) is not allowed")
        if event.startswith("ctypes.") or event in _REFUSED_EVENTS:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event in ("os.kill", "os.killpg", "signal.pthread_kill") and args[0] not in (own_pid, 0):
            raise PermissionError(f"sandbox: signalling other processes ({event}) is not allowed")

    sys.addaudithook(hook)


class _Reporter:
    """Writes one JSON line per event to the result descriptor, each carrying the job's token,
    so that stray writes of the candidate to the descriptor are not taken for results."""

    def __init__(self, fd: int, token: str) -> None:
        self.fd = fd
        self.token = token
        # Built now: after a MemoryError there may be no memory left to build it.
        self.memory_line = (json.dumps({"token": token, "event": "memory"}) + "\n").encode()

    def send(self, event: str, **fields: Any) -> None:
        line = json.dumps({"token": self.token, "event": event, **fields}, default=repr) + "\n"
        os.write(self.fd, line.encode("utf-8", "replace"))

    def out_of_memory(self) -> None:
        os.write(self.fd, self.memory_line)
        os._exit(EXIT_MEMORY)


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text if len(text) <= 500 else text[:497] + "..."


def _run_tests(job: dict[str, Any], namespace: dict[str, Any], report: _Reporter) -> None:
    """Run the parent's plan of the tests (``_sandbox.plan_tests``): ``["setup", source]``
    steps, ``["test", name, source]`` steps and ``["call", name, function]`` steps, in order.
    The parent parsed the file, so this interpreter need not import ast (tens of ms)."""
    import types

    setup_error: str | None = None
    for step in job["plan"]:
        if step[0] == "setup":
            if setup_error is None:
                try:
                    exec(compile(step[1], "tests.py", "exec"), namespace)
                except MemoryError:
                    report.out_of_memory()
                except BaseException as e:  # noqa: BLE001 - any failure of setup fails what follows
                    setup_error = f"setup failed: {_describe(e)}"
            continue
        name = step[1]
        if setup_error is not None:
            report.send("test", name=name, passed=False, error=setup_error)
            continue
        try:
            if step[0] == "call":
                result = namespace[step[2]]()
                if isinstance(result, types.CoroutineType):
                    import asyncio

                    asyncio.run(result)
            else:
                exec(compile(step[2], "tests.py", "exec"), namespace)
        except MemoryError:
            report.out_of_memory()
        except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt fail the test too
            report.send("test", name=name, passed=False, error=_describe(e))
        else:
            report.send("test", name=name, passed=True)


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    # The candidate gets an empty stdin, not the job.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    report = _Reporter(job["result_fd"], job.pop("token"))
    layers = []
    if job["isolate"]:
        layers += [layer for layer in (_unshare_network(), _landlock(job["workdir"])) if layer]
    rlimits = _limit_resources(job)
    if rlimits:
        layers.append(rlimits)
    _install_audit_hook(job["workdir"])
    layers.append("audit-hook")
    report.send("isolation", layers=layers)

    namespace: dict[str, Any] = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        candidate = compile(job.pop("candidate"), "solution.py", "exec")
    except MemoryError:
        report.out_of_memory()
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes in the source
        report.send("candidate_error", error=f"the candidate code does not compile: {_describe(e)}")
        return
    # Tests may import the candidate as a module (``from solution import f``) as well as use
    # its names directly; its ``if __name__ == "__main__":`` block does not run.
    import types

    module = types.ModuleType("solution")
    module.__dict__.update(namespace)
    sys.modules["solution"] = module
    try:
        exec(candidate, module.__dict__)
    except MemoryError:
        report.out_of_memory()
    except BaseException as e:  # noqa: BLE001 - the candidate's failure is reported, not raised
        import traceback  # only on this path: it costs start-up time

        tail = "".join(traceback.format_exception(e)[-3:])
        report.send("candidate_error", error=f"the candidate code raised {_describe(e)}", traceback=tail[-2000:])
        return
    namespace = dict(module.__dict__)
    namespace["__name__"] = "__main__"
    try:
        _run_tests(job, namespace, report)
    except MemoryError:
        report.out_of_memory()
    report.send("done")


if __name__ == "__main__":
    try:
        main()
    except MemoryError:
        os._exit(EXIT_MEMORY)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: candidate objects' __del__ and atexit handlers have had
    # their chance during the tests, and must not be able to rewrite the report now.
    os._exit(0)
