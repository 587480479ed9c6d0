"""The sandbox's launcher: ``python -I -S -B _launcher.py zygote FD`` (stdlib only).

It must not import envhub: it runs in an isolated interpreter (``-I -S``: no site-packages,
no environment variables, no script directory on ``sys.path``). It takes a job (how to lock
in, and the *guest* program, Python source), locks itself in, reads the guest's input (one
JSON line on stdin) and runs the guest in the locked-in process. Runs are forked from a
zygote (:class:`_Zygote`) that receives jobs, never inputs: what one run was given is never
in the memory a later run inherits. The rest of stdin belongs to the guest; the guest reports
JSON lines on the inherited descriptor ``job["report_fd"]``, never on stdout, which the code
under test owns. One file, zygote included: run with ``-I -S`` it can import no sibling.

Lock-in, in this order (:mod:`envhub.sandbox` documents each guarantee):

1. ``unshare`` into new user, mount, PID, network, IPC and UTS namespaces; the sandbox's user
   is uid/gid 1000 inside, mapped to the caller's own ids outside (no privilege needed).
2. ``fork``: the child is PID 1 of the new PID namespace, so when it dies the kernel kills
   every process left in the namespace (a ``setsid`` child cannot outlive the run), and it
   dies with the launcher (``PR_SET_PDEATHSIG``), which the caller kills on timeout.
3. A private filesystem view: a new root (tmpfs) holding read-only binds of only what the run
   needs (``/usr`` and the interpreter's own files, with site-packages hidden), a fresh
   ``/proc``, a ``/dev`` of null/zero/full/random/urandom, a size-limited ``/tmp`` and the
   workspace, the only writable path; ``pivot_root`` into it and the old root detached, so
   ``$HOME``, envhub's data, cache and held-out directories and the caller's files do not exist.
4. Every capability dropped (bounding set, ambient, effective, permitted; ``no_new_privs``;
   securebits locked), so nothing can remount, unshare again or regain privileges by exec.
5. Landlock (Linux 5.13+): writes only beneath the workspace and ``/tmp``; no TCP; no signals
   or abstract Unix sockets outside (by ABI version). Without namespaces, Landlock also limits
   reads to the paths the run needs.
6. Resource limits: address space, CPU time, file size, open files, processes, no core dumps.

Each layer is reported (``{"event": "isolation", "layers": [...], "missing": [...]}``) before
the guest runs; a layer the kernel refuses is listed in ``missing``, never silently skipped.
A failure after entering the namespaces exits with :data:`EXIT_SETUP` and a message on
stderr, so the caller can run the job again without namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

#: Exit status when the namespaces were entered but the filesystem view could not be built.
EXIT_SETUP = 87
#: Exit status after a MemoryError: the caller reports ``killed_by = "memory"``.
EXIT_MEMORY = 86
#: Exit status when a tree could not be copied into the sandbox (the workspace's seed, a mount).
EXIT_TREE = 88
#: The sandbox's uid and gid inside its user namespace.
INNER_ID = 1000
#: The first line of a tree archive (see :func:`_extract_tree`).
TREE_MAGIC = b"envhub-tree 1\n"

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND, _MS_REC = 32, 1024, 2048, 4096, 16384
_MS_PRIVATE, _MS_RELATIME = 1 << 18, 1 << 21
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 1, 24, 28
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
# NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and NO_CAP_AMBIENT_RAISE, each with its lock bit.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
# System call numbers that differ by architecture; Landlock's are the same everywhere.
_SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126}, "aarch64": {"pivot_root": 41, "capset": 91}}
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_DEVICES = ("null", "zero", "full", "random", "urandom")
# Top-level paths that merged-/usr systems make symlinks into /usr.
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Where the interpreter's standard library is inside a sandbox on a base filesystem.
BASE_STDLIB = "/.envhub/stdlib"
# A base filesystem's top-level entries the sandbox makes its own.
_BASE_SKIPPED = frozenset({"proc", "dev", "tmp", ".envhub"})


class SetupError(Exception):
    """A step of the lock-in failed after the namespaces were entered."""


def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes

        errno = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(errno)}")


def _bytes(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


class _Namespaces:
    """The namespace steps, through libc (``os.unshare`` is Python 3.12+)."""

    def __init__(self) -> None:
        self.libc = _libc()
        self.calls = _SYSCALLS.get(os.uname().machine, {})

    def unshare(self, network: bool) -> bool:
        flags = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWUTS
        if not network:
            flags |= _CLONE_NEWNET
        return bool(self.libc.unshare(flags) == 0)


    def mount(self, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        _check(self.libc.mount(_bytes(source), _bytes(target), _bytes(fstype), flags, _bytes(data)),
               f"mount {source or fstype} on {target}")

    def bind_readonly(self, source: str, target: str) -> None:
        self.mount(source, target, None, _MS_BIND | _MS_REC)
        # A bind made in a user namespace keeps the original's locked flags: repeat them.
        st = os.statvfs(source)
        kept = 0
        for st_flag, ms_flag in ((os.ST_NOEXEC, _MS_NOEXEC), (os.ST_NOATIME, _MS_NOATIME),
                                 (os.ST_NODIRATIME, _MS_NODIRATIME), (getattr(os, "ST_RELATIME", 4096), _MS_RELATIME)):
            if st.f_flag & st_flag:
                kept |= ms_flag
        self.mount(None, target, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | kept)

    def pivot_root(self, new_root: str) -> None:
        number = self.calls.get("pivot_root")
        if number is None:
            raise SetupError(f"pivot_root: unknown system call number on {os.uname().machine}")
        os.chdir(new_root)
        _check(self.libc.syscall(number, b".", b"."), "pivot_root")
        _check(self.libc.umount2(b".", _MNT_DETACH), "detaching the old root")
        os.chdir("/")

    def drop_capabilities(self) -> None:
        import ctypes

        libc = self.libc
        _check(libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), "locking securebits")
        last = 63
        try:
            with open("/proc/sys/kernel/cap_last_cap") as f:
                last = int(f.read())
        except (OSError, ValueError):
            pass
        for cap in range(last + 1):
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails only for caps the kernel lacks
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3: zeroes
        number = self.calls.get("capset")
        if number is None:
            raise SetupError(f"capset: unknown system call number on {os.uname().machine}")
        _check(libc.syscall(number, ctypes.byref(header), ctypes.byref(data)), "dropping capabilities")
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "setting no_new_privs")


def _map_ids(pid: int) -> None:
    """Map the sandbox's uid and gid (:data:`INNER_ID`) in the user namespace of ``pid``: to
    the caller's own ids, or to nobody (65534) when the caller is root, so that code which
    gets out of every other layer still holds no one's files. Written from the parent
    namespace: a process cannot map root for itself (Linux 5.12+ asks for CAP_SETFCAP there)."""
    uid, gid = os.geteuid(), os.getegid()
    outer_uid, outer_gid = (65534, 65534) if uid == 0 else (uid, gid)
    try:
        if uid != 0:  # an unprivileged map needs it; root keeps setgroups to drop its own groups
            with open(f"/proc/{pid}/setgroups", "w") as f:
                f.write("deny")
        with open(f"/proc/{pid}/uid_map", "w") as f:
            f.write(f"{INNER_ID} {outer_uid} 1")
        with open(f"/proc/{pid}/gid_map", "w") as f:
            f.write(f"{INNER_ID} {outer_gid} 1")
    except OSError as e:
        raise SetupError(f"writing the user namespace's id maps: {e}") from e


def _touch(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def _place(path: str, is_dir: bool) -> str:
    """Create the mount point of ``path`` (absolute) beneath the current directory; return it."""
    target = "." + path
    os.makedirs(target if is_dir else os.path.dirname(target), exist_ok=True)
    if not is_dir and not os.path.exists(target):
        _touch(target)
    return target


def _open_paths(paths: list[str]) -> dict[str, int]:
    """``O_PATH`` descriptors of the paths that exist, opened while the process still owns
    the caller's files: once it is the sandbox's user it may not even look them up (they can
    live under a 0700 home), but it can mount them through ``/proc/self/fd``."""
    fds = {}
    for path in paths:
        try:
            fds[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path this system does not have
    return fds


def _build_root(ns: _Namespaces, job: dict[str, Any]) -> None:
    """Become the sandbox's user, make the private filesystem view (see the module's
    docstring) and enter it."""
    import stat

    ns.mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    devices = [f"/dev/{name}" for name in _DEVICES]
    base = job.get("base")
    # A base filesystem: its top-level entries, not the host's system, and the interpreter's
    # standard library at a private path (the guest already runs; it only imports from there).
    entries: dict[str, str] = {}
    if base:
        for name in sorted(os.listdir(base)):
            if name not in _BASE_SKIPPED and "/" + name != job["workspace"]:
                path = os.path.join(base, name)
                mode = os.lstat(path).st_mode
                # A link's target read now: the sandbox's user may not reach the cache later.
                entries[name] = "link:" + os.readlink(path) if stat.S_ISLNK(mode) else \
                    "dir" if stat.S_ISDIR(mode) else "file"
    readable = [os.path.join(base, n) for n, kind in entries.items() if not kind.startswith("link:")] \
        + [job["stdlib"]] if base else job["readable"]
    fds = _open_paths([*readable, job["workdir"], *devices])
    # Readable now, as the caller: after setresuid the sandbox's user may not read them.
    job["_tree_fds"] = [os.open(tree["archive"], os.O_RDONLY | os.O_CLOEXEC) for tree in job.get("trees", ())]
    ns.mount("tmpfs", job["root_dir"], "tmpfs", _MS_NOSUID | _MS_NODEV,
             f"size=16m,mode=0755,uid={INNER_ID},gid={INNER_ID}")
    os.chdir(job["root_dir"])  # the new tmpfs: every target below is relative to it
    with contextlib.suppress(OSError):  # denied in an unprivileged user namespace: the groups are unmapped
        os.setgroups([])
    os.setresgid(INNER_ID, INNER_ID, INNER_ID)
    os.setresuid(INNER_ID, INNER_ID, INNER_ID)
    if base:
        for name, kind in entries.items():
            path = os.path.join(base, name)
            if kind.startswith("link:"):
                os.symlink(kind[len("link:"):], "./" + name)
            elif path in fds:
                ns.bind_readonly(f"/proc/self/fd/{fds[path]}", _place("/" + name, kind == "dir"))
        if job["stdlib"] in fds:
            ns.bind_readonly(f"/proc/self/fd/{fds[job['stdlib']]}", _place(BASE_STDLIB, True))
    else:
        for link in _ROOT_LINKS:
            if os.path.islink(link):
                os.symlink(os.readlink(link), "." + link)
        for path in job["readable"]:
            if path in fds:
                is_dir = stat.S_ISDIR(os.fstat(fds[path]).st_mode)
                ns.bind_readonly(f"/proc/self/fd/{fds[path]}", _place(path, is_dir))
        for path in job["hidden"]:
            if os.path.isdir("." + path):
                ns.mount("tmpfs", "." + path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                         "size=4k,mode=0555")
    dev = _place("/dev", True)
    ns.mount("tmpfs", dev, "tmpfs", _MS_NOSUID | _MS_NOEXEC, "size=64k,mode=0755")
    for path in devices:
        if path in fds:
            _touch("." + path)
            ns.mount(f"/proc/self/fd/{fds[path]}", "." + path, None, _MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    ns.mount("proc", _place("/proc", True), "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    # No user namespaces below this one: inside one, code would be "root" again for whatever
    # it could mount or unshare there (the limit is the sandbox's user namespace's own).
    with open("./proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    ns.mount("tmpfs", _place("/tmp", True), "tmpfs", _MS_NOSUID | _MS_NODEV,
             f"size={job['limits']['tmp_bytes']},mode=1777")
    workspace = _place(job["workspace"], True)
    if job.get("workspace_bytes"):
        # The workspace lives in the sandbox alone, a tmpfs of its own size: filling it fills
        # nothing of the host's, and nothing the sandbox does is visible outside but by export.
        size = job["workspace_bytes"]
        inodes = max(4096, size // 2048)
        ns.mount("tmpfs", workspace, "tmpfs", _MS_NOSUID | _MS_NODEV,
                 f"size={size},nr_inodes={inodes},mode=0755,uid={INNER_ID},gid={INNER_ID}")
    else:
        ns.mount(f"/proc/self/fd/{fds[job['workdir']]}", workspace, None, _MS_BIND | _MS_REC)
        ns.mount(None, workspace, None, _MS_BIND | _MS_REMOUNT | _MS_NOSUID | _MS_NODEV)
    for tree in job.get("trees", ()):
        if tree["readonly"]:  # its own tmpfs, made read-only once the tree is in (_extract_trees)
            ns.mount("tmpfs", _place(tree["target"], True), "tmpfs", _MS_NOSUID | _MS_NODEV,
                     f"size={tree['bytes']},mode=0755,uid={INNER_ID},gid={INNER_ID}")
    for fd in fds.values():
        os.close(fd)
    ns.pivot_root(".")
    ns.mount(None, "/", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _extract_trees(ns: _Namespaces, job: dict[str, Any]) -> None:
    """Copy each tree of the job in (inside the private view, before the capabilities go) and
    make the read-only ones read-only."""
    for tree, fd in zip(job.get("trees", ()), job.pop("_tree_fds", ()), strict=True):
        with open(fd, "rb") as archive:
            _extract_tree(archive, tree["target"])
        if tree["readonly"]:
            ns.mount(None, tree["target"], None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _extract_tree(archive: Any, target: str) -> None:
    """Write the tree in ``archive`` beneath ``target``. The format: :data:`TREE_MAGIC`, then
    per entry a JSON line ``{"p": relative path, "t": "d" | "f" | "l", "m": mode, "s": size,
    "l": link target}`` and, for a file, its ``s`` bytes; parents come before their contents.
    Paths that leave ``target`` (absolute, ``..``, through a link) are refused; set-id bits dropped."""
    if archive.readline() != TREE_MAGIC:
        raise ValueError("not a tree archive")
    root = os.path.realpath(target)
    dirs: list[tuple[str, int]] = []
    while line := archive.readline():
        entry = json.loads(line)
        rel = entry["p"]
        parts = rel.split("/")
        if not rel or rel.startswith("/") or "\0" in rel or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"a path outside the tree: {rel!r}")
        path = os.path.join(root, rel)
        if os.path.realpath(os.path.dirname(path)) != os.path.dirname(path):
            raise ValueError(f"a path through a link: {rel!r}")
        mode = int(entry.get("m", 0o644)) & 0o777
        if entry["t"] == "d":
            os.mkdir(path, 0o700)
            dirs.append((path, mode))
        elif entry["t"] == "l":
            os.symlink(entry["l"], path)
        elif entry["t"] == "f":
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                remaining = int(entry["s"])
                while remaining > 0:
                    data = archive.read(min(remaining, 1 << 20))
                    if not data:
                        raise ValueError(f"the archive ends inside {rel!r}")
                    remaining -= len(data)
                    while data:
                        data = data[os.write(fd, data):]
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        else:
            raise ValueError(f"an entry of unknown type: {rel!r}")
    for path, mode in reversed(dirs):  # deepest first: a read-only directory is filled already
        os.chmod(path, mode)


def _landlock(writable: list[str], readable: list[str] | None, tcp: bool = False) -> str | None:
    """Restrict writes to ``writable`` (and /dev/null), TCP (unless ``tcp``: the run shares the
    host's network), signals and abstract sockets; and, when ``readable`` is given, reads and
    execution to those paths too. Irreversible, for this
    process and its children. The layer's name with its ABI, or None when unavailable."""
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
    # EXECUTE, READ_FILE, READ_DIR (bits 0, 2, 3) are handled only when reads are limited.
    write = (1 << 1) | (1 << 4) | (1 << 5) | sum(1 << bit for bit in range(6, 13))
    if abi >= 2:
        write |= 1 << 13  # REFER: no linking or renaming a file out of the workspace
    if abi >= 3:
        write |= 1 << 14  # TRUNCATE
    read = (1 << 0) | (1 << 2) | (1 << 3)
    handled = write | (read if readable is not None else 0)
    net = (1 << 0) | (1 << 1) if abi >= 4 and not tcp else 0  # BIND_TCP, CONNECT_TCP
    scoped = (1 << 0) | (1 << 1) if abi >= 6 else 0  # abstract unix sockets, signals

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    size = 8 if abi < 4 else 16 if abi < 6 else 24
    attr = RulesetAttr(handled, net, scoped)
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return None
    file_only = (1 << 0) | (1 << 1) | (1 << 2) | ((1 << 14) if abi >= 3 else 0)
    rules = [(path, handled) for path in writable] + [(os.devnull, file_only & handled)]
    rules += [(path, read) for path in readable or ()]
    try:
        for path, allowed in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path this system does not have
            try:
                if not os.path.isdir(path):
                    allowed &= file_only
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


def _limit_resources(limits: dict[str, int]) -> tuple[str | None, list[str]]:
    """Apply the resource limits; the layer's name and the limits the OS refused."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None, ["rlimits"]
    wanted = [
        ("core", resource.RLIMIT_CORE, 0, 0),
        ("cpu", resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),  # soft: SIGXCPU; hard: SIGKILL
        ("file-size", resource.RLIMIT_FSIZE, limits["file_size_bytes"], limits["file_size_bytes"]),
        ("open-files", resource.RLIMIT_NOFILE, limits["open_files"], limits["open_files"]),
        ("memory", getattr(resource, "RLIMIT_AS", None), limits["memory_bytes"], limits["memory_bytes"]),
        ("processes", getattr(resource, "RLIMIT_NPROC", None), limits["processes"], limits["processes"]),
    ]
    refused = []
    for name, which, soft, hard in wanted:
        if which is None:
            refused.append(f"rlimit-{name}")
            continue
        try:
            current_hard = resource.getrlimit(which)[1]
            if current_hard != resource.RLIM_INFINITY:
                # Only a privileged process may raise a hard limit: never ask for more.
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            refused.append(f"rlimit-{name}")  # one the OS refuses must not cost the others
    return ("rlimits" if len(refused) < len(wanted) else None), refused


class _Channel:
    """What the guest gets: its input, and JSON lines out (``report``) and in (``receive``)."""

    def __init__(self, fd: int, stdin: Any) -> None:
        self.fd = fd
        self._stdin = stdin
        # Built now: after a MemoryError there may be no memory left to build it.
        self._memory_line = b'{"event": "memory"}\n'

    def report(self, **fields: Any) -> None:
        line = json.dumps(fields, allow_nan=False) + "\n"
        data = line.encode("utf-8", "surrogatepass")
        while data:
            data = data[os.write(self.fd, data):]

    def receive(self) -> Any:
        """The next JSON line on stdin, or None at its end."""
        line = self._stdin.readline()
        return json.loads(line) if line else None

    def out_of_memory(self) -> None:
        os.write(self.fd, self._memory_line)
        os._exit(EXIT_MEMORY)


def _wait_and_mirror(pid: int) -> None:
    """The launcher's part after the fork: wait for PID 1 of the sandbox, end the same way."""
    import signal

    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default action is not to end the process
    os._exit(os.waitstatus_to_exitcode(status))


def _fork_watched(libc: Any) -> int:
    """``fork``, the child dying with its parent (``PR_SET_PDEATHSIG``), even if the parent is
    killed between the fork and the ``prctl``."""
    import select
    import signal

    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(alive_r)
        os.set_inheritable(alive_w, False)
        return pid
    os.close(alive_w)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([alive_r], [], [], 0)[0]:
        os._exit(1)  # the parent is gone: its end of the pipe closed
    os.close(alive_r)
    return 0


def _enter_namespaces(ns: _Namespaces, job: dict[str, Any]) -> bool:
    """Steps 1 and 2 of the module's docstring, in three processes: the launcher, which maps
    the ids of its child from the parent user namespace and then only waits; the child, which
    unshares and forks; and the grandchild, PID 1 of the new PID namespace, which returns True
    to go on locking in. Returns False (in the launcher's process) when unsharing is refused."""
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    child = _fork_watched(ns.libc)
    if child:
        os.close(ready_w)
        os.close(mapped_r)
        unshared = os.read(ready_r, 1) == b"1"
        os.close(ready_r)
        if not unshared:
            os.close(mapped_w)
            os.waitpid(child, 0)
            return False
        try:
            _map_ids(child)
        except SetupError as e:
            print(f"envhub sandbox: {e}", file=sys.stderr, flush=True)
            os._exit(EXIT_SETUP)
        os.write(mapped_w, b"1")
        os.close(mapped_w)
        os.close(job["report_fd"])  # EOF reaches the caller when the sandbox's last process ends
        _wait_and_mirror(child)
    os.close(ready_r)
    os.close(mapped_w)
    unshared = ns.unshare(job["network"])
    os.write(ready_w, b"1" if unshared else b"0")
    os.close(ready_w)
    if not unshared:
        os._exit(0)
    if os.read(mapped_r, 1) != b"1":
        os._exit(EXIT_SETUP)
    os.close(mapped_r)
    pid1 = _fork_watched(ns.libc)
    if pid1:
        os.close(job["report_fd"])
        _wait_and_mirror(pid1)
    return True


def _lock_in(job: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Steps 1-6 of the module's docstring. Returns the layers applied and those missing."""
    layers: list[str] = []
    missing: list[str] = []
    entered = False
    if job["namespaces"] and sys.platform.startswith("linux"):
        try:
            ns = _Namespaces()
        except (OSError, AttributeError):
            ns = None
        if ns is not None:
            entered = _enter_namespaces(ns, job)
    if entered:
        assert ns is not None
        try:
            _build_root(ns, job)
            if hasattr(os, "sethostname"):
                os.sethostname("sandbox")
        except (SetupError, OSError) as e:
            print(f"envhub sandbox: {e}", file=sys.stderr, flush=True)
            os._exit(EXIT_SETUP)
        try:
            _extract_trees(ns, job)
        except (SetupError, OSError, ValueError) as e:
            print(f"envhub sandbox: copying a tree in: {e}", file=sys.stderr, flush=True)
            os._exit(EXIT_TREE)
        try:
            ns.drop_capabilities()
        except (SetupError, OSError) as e:
            print(f"envhub sandbox: {e}", file=sys.stderr, flush=True)
            os._exit(EXIT_SETUP)
        layers += ["user-namespace", "pid-namespace", "mount-namespace", "private-filesystem", "ipc-namespace",
                   "no-capabilities"]
        layers.append("network-namespace" if not job["network"] else "network-shared")
        landlock = _landlock([job["workspace"], "/tmp"], None, tcp=job["network"])
    else:
        missing += ["user-namespace", "pid-namespace", "mount-namespace", "private-filesystem", "ipc-namespace"]
        if not job["network"]:
            missing.append("network-namespace")
        if job.get("workspace_bytes") or job.get("trees") or job.get("base"):
            print("envhub sandbox: a tmpfs workspace or a tree needs the namespaces", file=sys.stderr, flush=True)
            os._exit(EXIT_TREE)
        landlock = _landlock([job["workdir"]], job["readable"], tcp=job["network"])
        if landlock:
            layers.append("landlock-read-limits")
    if landlock:
        layers.append(landlock)
    else:
        missing.append("landlock")
    rlimits, refused = _limit_resources(job["limits"])
    if rlimits:
        layers.append(rlimits)
    missing += refused
    return layers, missing


def run(job: dict[str, Any], stdin: Any, code: list[Any] | None = None) -> None:
    """Lock in and run the job's guest: its modules, in order, in one namespace (a helper
    module, then the program). ``code`` holds them compiled already (by the zygote)."""
    layers, missing = _lock_in(job)
    if job.get("base") and "private-filesystem" in layers:
        stdlib = job["stdlib"]
        sys.path[:] = [BASE_STDLIB + p[len(stdlib):] if p == stdlib or p.startswith(stdlib + "/") else p
                       for p in sys.path]
    os.environ.clear()
    os.environ.update(job["env"])
    os.chdir(job["workspace"] if "private-filesystem" in layers else job["workdir"])
    channel = _Channel(job["report_fd"], stdin)
    channel.report(event="isolation", layers=layers, missing=missing)
    # The guest's input (the code under test, a task's tests) comes on stdin, to this locked-in
    # process only: never through the zygote, whose memory every later run inherits.
    guest_input = channel.receive()
    namespace = {"__name__": "__sandbox_guest__", "INPUT": guest_input, "CHANNEL": channel,
                 "WORKSPACE": os.getcwd()}
    for module in code or [compile(source, name, "exec") for name, source in job["guest"]]:
        exec(module, namespace)


def _finish() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        # Skip interpreter teardown: the code under test's __del__ and atexit handlers must
        # not get a last word after the guest has reported.
        os._exit(0)


class _Zygote:
    """A process that forks launchers, so that a run costs a fork rather than an interpreter
    start and its imports. The caller sends, on a SOCK_SEQPACKET socket, one message per
    run: the job as JSON with four descriptors (stdin, stdout, stderr, report); the zygote
    answers ``{"id": ..., "pid": ...}`` once it forked the launcher, and
    ``{"pid": ..., "status": ...}`` when that launcher ended (its exit code, or minus the
    signal that ended it). It compiles each guest once and keeps it for the runs after."""

    _MAX_MESSAGE = 64 * 1024 * 1024

    def __init__(self, sock_fd: int) -> None:
        import socket

        self.sock = socket.socket(fileno=sock_fd)
        self.code: dict[str, list[Any]] = {}
        self.children: set[int] = set()

    def serve(self) -> None:
        """Answer requests until the caller's end of the socket closes (it exited, however),
        then kill the runs still going and exit."""
        import selectors
        import signal

        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.wake = (wake_r, wake_w)
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ, "request")
        selector.register(wake_r, selectors.EVENT_READ, "child")
        while True:
            for key, _ in selector.select():
                if key.data == "child":
                    os.read(wake_r, 4096)
                    self._reap()
                elif not self._request():
                    for pid in self.children:  # the caller is gone: so are its runs
                        with contextlib.suppress(OSError):
                            os.killpg(pid, signal.SIGKILL)
                    os._exit(0)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self._send({"pid": pid, "status": os.waitstatus_to_exitcode(status)})

    def _send(self, message: dict[str, Any]) -> None:
        self.sock.send(json.dumps(message).encode())

    def _request(self) -> bool:
        import socket

        try:
            data, fds, _, _ = socket.recv_fds(self.sock, self._MAX_MESSAGE, 4)
        except OSError:
            return False
        if not data:
            return False
        request = json.loads(data)
        job = request["job"]
        key = json.dumps(job["guest"])
        code = self.code.get(key)
        if code is None:
            code = self.code[key] = [compile(source, name, "exec") for name, source in job["guest"]]
        pid = os.fork()
        if pid == 0:
            self._child(job, fds, code)
        for fd in fds:
            os.close(fd)
        self.children.add(pid)
        self._send({"id": request["id"], "pid": pid})
        return True

    def _child(self, job: dict[str, Any], fds: list[int], code: list[Any]) -> None:
        """In the forked launcher: become the process the caller expects, then run the job."""
        import signal

        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.sock.close()
            for fd in self.wake:
                os.close(fd)
            os.setsid()
            stdin, stdout, stderr, report = fds
            for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2), (report, 3)):
                os.dup2(fd, target)
            for fd in fds:
                if fd > 3:
                    os.close(fd)
            job["report_fd"] = 3
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own descriptors
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            run(job, sys.stdin.buffer, code)
        except MemoryError:
            os._exit(EXIT_MEMORY)
        except BaseException:  # noqa: BLE001 - the guest's failure, as a plain run shows it
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        _finish()


if __name__ == "__main__":
    if sys.argv[1:2] != ["zygote"] or len(sys.argv) != 3:
        sys.exit("usage: python -I -S -B _launcher.py zygote FD (envhub.sandbox starts it)")
    # Imported now, once: every run forked from here has them (the guests use them too).
    import base64  # noqa: F401
    import contextlib  # noqa: F401
    import ctypes  # noqa: F401
    import io  # noqa: F401
    import math  # noqa: F401
    import resource  # noqa: F401
    import select  # noqa: F401
    import selectors  # noqa: F401
    import socket  # noqa: F401
    import stat  # noqa: F401
    import subprocess  # noqa: F401
    import time  # noqa: F401
    import types  # noqa: F401
    import typing  # noqa: F401

    _Zygote(int(sys.argv[2])).serve()
