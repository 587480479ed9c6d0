"""ShellWorkspace: its API, each behaviour against the real sandbox (envhub.sandbox._shell).

Containment (fork bombs, disk fills, timeouts, network, writes outside) is in
test_shell_containment.py; here, what an agent and a verifier rely on: the seed, persistent
cwd and exported variables, output capture, the file tools and their errors, mounts, export.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from envhub.sandbox import CommandResult, ShellLimits, ShellWorkspace, WorkspaceError, probe

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or "pid-namespace" not in probe().layers,
                                reason="shell workspaces need Linux namespaces")

LIMITS = ShellLimits(command_timeout_s=10, disk_mb=32)


def run(seed: Path | None, body: Callable[[ShellWorkspace], Awaitable[Any]], *, limits: ShellLimits = LIMITS,
        **kwargs: Any) -> Any:
    """Start a workspace, run ``body`` with it, close it; what ``body`` returned."""

    async def main() -> Any:
        async with await ShellWorkspace.start(seed=seed, limits=limits, **kwargs) as workspace:
            return await body(workspace)

    return asyncio.run(main())


def digest(root: Path) -> dict[str, str]:
    """Every entry under ``root`` with its kind, mode and content (or link target)."""
    result = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            value = "link " + os.readlink(path)
        elif path.is_dir():
            value = "dir"
        else:
            value = hashlib.sha256(path.read_bytes()).hexdigest()
        result[str(path.relative_to(root))] = f"{oct(stat.S_IMODE(st.st_mode))} {value}"
    return result


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    root = tmp_path / "seed"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "main.py").write_text("x = 1\nprint(x)\n")
    (root / "src" / "pkg" / "deep.txt").write_text("deep\n")
    (root / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (root / "run.sh").chmod(0o755)
    (root / "readonly.txt").write_text("ro\n")
    (root / "readonly.txt").chmod(0o444)
    (root / "link").symlink_to("src/main.py")
    return root


def test_the_seed_is_copied_in_with_modes_and_links_and_never_written(seed: Path) -> None:
    before = digest(seed)

    async def body(ws: ShellWorkspace) -> list[CommandResult]:
        return [await ws.run("./run.sh"), await ws.run("stat -c '%a %n' readonly.txt; readlink link; cat link"),
                await ws.run("echo changed > src/main.py; rm -rf src/pkg; chmod 777 run.sh; echo new > new.txt")]

    ran, listed, changed = run(seed, body)
    assert (ran.exit_code, ran.output) == (0, "ran\n")
    assert listed.output == "444 readonly.txt\nsrc/main.py\nx = 1\nprint(x)\n"
    assert changed.exit_code == 0  # the agent changed its copy...
    assert digest(seed) == before  # ...never the seed


def test_cwd_and_exported_variables_carry_over_and_nothing_else_does(tmp_path: Path, seed: Path) -> None:
    async def body(ws: ShellWorkspace) -> list[str]:
        commands = ["cd src && export FOO=bar && LOCAL=1 && alias ll=ls", "pwd; echo ${FOO}-${LOCAL:-unset}",
                    "unset FOO; cd pkg", "pwd; echo ${FOO:-gone}; type ll 2>&1 | head -1",
                    "mkdir /workspace/tmpdir && cd /workspace/tmpdir && rmdir /workspace/tmpdir", "pwd",
                    "exit 3", "pwd"]
        return [(await ws.run(c)).output for c in commands]

    outputs = run(seed, body)
    assert outputs[1] == "/workspace/src\nbar-unset\n"
    assert outputs[3].startswith("/workspace/src/pkg\ngone\n") and "not found" in outputs[3]
    assert outputs[5] == "/workspace\n"  # the directory it left is gone: back to the workspace
    assert outputs[7] == "/workspace\n"  # `exit` still records the state


def test_output_interleaves_stdout_and_stderr_and_keeps_head_and_tail() -> None:
    limits = ShellLimits(command_timeout_s=10, disk_mb=8, output_bytes=200)

    async def body(ws: ShellWorkspace) -> list[CommandResult]:
        return [await ws.run("echo one; echo two >&2; echo three; exit 2"),
                await ws.run("echo START; seq 1 5000; echo END")]

    mixed, long = run(None, body, limits=limits)
    assert (mixed.exit_code, mixed.output, mixed.truncated) == (2, "one\ntwo\nthree\n", False)
    assert mixed.observation() == "one\ntwo\nthree\n[exit code 2]"
    assert long.truncated and long.exit_code == 0 and long.killed_by is None
    assert long.output.startswith("START\n1\n2\n") and long.output.endswith("4999\n5000\nEND\n")
    assert "bytes of output elided ...]" in long.output and len(long.output) < 300


def test_file_tools(seed: Path) -> None:
    async def body(ws: ShellWorkspace) -> dict[str, Any]:
        await ws.write_file("notes/a/b.txt", "hello\n")
        await ws.edit_file("src/main.py", old="x = 1", new="x = 2")
        return {"read": await ws.read_file("src/main.py"), "notes": await ws.read_file("notes/a/b.txt"),
                "via link": await ws.read_file("link"), "cat": (await ws.run("cat notes/a/b.txt")).output,
                "list": await ws.list_files("."), "list1": await ws.list_files("src", depth=1),
                "capped": await ws.list_files(".", depth=5, max_entries=3)}

    got = run(seed, body)
    assert got["read"] == "x = 2\nprint(x)\n" == got["via link"]
    assert got["notes"] == "hello\n" == got["cat"]
    assert got["list"] == ["link", "notes/", "notes/a/", "readonly.txt", "run.sh", "src/", "src/main.py", "src/pkg/"]
    assert got["list1"] == ["src/main.py", "src/pkg/"]
    assert got["capped"] == ["link", "notes/", "notes/a/", "... (7 more)"]


@pytest.mark.parametrize(("call", "message"), [
    (lambda ws: ws.read_file("missing.txt"), "missing.txt: no such file or directory"),
    (lambda ws: ws.read_file("src"), "src: is a directory"),
    (lambda ws: ws.read_file("bin.dat"), "bin.dat: a binary file, not text"),
    (lambda ws: ws.read_file("big.txt", max_bytes=100),
     "big.txt: too big to read whole (1000 bytes; the limit is 100)"),
    (lambda ws: ws.read_file("../etc/passwd"), "../etc/passwd: outside the workspace"),
    (lambda ws: ws.read_file("/usr/lib/os-release"), "/usr/lib/os-release: outside the workspace"),
    (lambda ws: ws.read_file("escape"), "escape: outside the workspace"),
    (lambda ws: ws.read_file("fifo"), "fifo: not a regular file"),
    (lambda ws: ws.write_file("escape/x.txt", "x"), "escape/x.txt: outside the workspace"),
    (lambda ws: ws.write_file("/tmp/x.txt", "x"), "/tmp/x.txt: outside the workspace"),
    (lambda ws: ws.edit_file("src/main.py", old="nope", new="y"), "the text to replace was not found"),
    (lambda ws: ws.edit_file("twice.txt", old="a", new="b"), "the text to replace was found 2 times"),
    (lambda ws: ws.edit_file("src/main.py", old="", new="b"), "old must be a non-empty string"),
    (lambda ws: ws.list_files("run.sh"), "run.sh: not a directory"),
], ids=["missing", "directory", "binary", "too-big", "dotdot", "absolute", "link-out", "fifo", "write-through-link",
        "write-absolute", "edit-not-found", "edit-twice", "edit-empty", "list-a-file"])
def test_file_tool_errors(seed: Path, call: Callable[[ShellWorkspace], Awaitable[Any]], message: str) -> None:
    async def body(ws: ShellWorkspace) -> str:
        setup = await ws.run("printf 'a\\0b' > bin.dat; head -c 1000 /dev/zero | tr '\\0' x > big.txt; "
                             "ln -s /etc escape; mkfifo fifo; echo 'a a' > twice.txt")
        assert setup.exit_code == 0, setup.output
        with pytest.raises(WorkspaceError) as info:
            await call(ws)
        # the workspace goes on after an error
        assert (await ws.run("echo alive")).output == "alive\n"
        return str(info.value)

    assert message in run(seed, body)


def test_export_copies_the_final_tree_out_and_nothing_else(tmp_path: Path, seed: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    async def body(ws: ShellWorkspace) -> None:
        result = await ws.run(f"echo new > new.txt; chmod 700 new.txt; ln -s {outside} out; ln -s /etc/passwd pw; "
                              "mkdir -p empty/dir; chmod 4755 run.sh")
        assert result.exit_code == 0, result.output
        await ws.export(tmp_path / "final")
        with pytest.raises(WorkspaceError, match="not a new or empty directory"):
            await ws.export(tmp_path / "final")

    run(seed, body)
    final = tmp_path / "final"
    got = digest(final)
    assert got["new.txt"].startswith("0o700 ") and got["run.sh"].startswith("0o755 ")  # set-id bits dropped
    assert got["out"] == f"0o777 link {outside}" and got["pw"] == "0o777 link /etc/passwd"  # links stay links
    assert got["empty/dir"] == "0o755 dir" and (final / "src" / "main.py").read_text() == "x = 1\nprint(x)\n"
    assert list(outside.iterdir()) == []


def test_mounts_are_read_only_copies(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.sh").write_text("echo PASS a\n")

    async def body(ws: ShellWorkspace) -> list[CommandResult]:
        return [await ws.run("bash /tests/test_a.sh"),
                await ws.run("echo hacked > /tests/test_a.sh; touch /tests/new; chmod 777 /tests/test_a.sh; "
                             "cat /tests/test_a.sh")]

    ran, attacked = run(None, body, mounts={"/tests": tests})
    assert ran.output == "PASS a\n"
    assert attacked.output.count("Read-only file system") == 3 and attacked.output.endswith("echo PASS a\n")
    assert [p.name for p in tests.iterdir()] == ["test_a.sh"] and (tests / "test_a.sh").read_text() == "echo PASS a\n"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"mounts": {"tests": "."}}, "mounts['tests']: a mount's path inside must be absolute and normal"),
    ({"mounts": {"/workspace/tests": "."}}, "mounts['/workspace/tests']: /workspace/tests is taken by the sandbox"),
    ({"mounts": {"/proc": "."}}, "/proc is taken by the sandbox itself"),
    ({"mounts": {"/tests": "/nonexistent-dir"}}, "mounts['/tests']: /nonexistent-dir is not a directory"),
    ({"base": Path("rootfs.tar")}, "base rootfs.tar: no such file"),
    ({"seed": Path("/nonexistent-seed")}, "seed /nonexistent-seed: not a directory"),
], ids=["relative-mount", "mount-in-workspace", "mount-on-proc", "mount-missing", "base", "seed-missing"])
def test_start_refuses_bad_input(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkspaceError) as info:
        asyncio.run(ShellWorkspace.start(**kwargs))
    assert message in str(info.value)


def test_a_seed_bigger_than_the_disk_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * (2 * 2**20 + 1))
    with pytest.raises(WorkspaceError, match=r"do not fit in the workspace's 2 MB \(disk_mb\)"):
        asyncio.run(ShellWorkspace.start(seed=tmp_path, limits=ShellLimits(disk_mb=2)))


def test_limits_are_checked() -> None:
    with pytest.raises(WorkspaceError, match="invalid shell limits: disk_mb must be positive, not 0; "
                                             "output_bytes must be positive, not -1"):
        ShellLimits(disk_mb=0, output_bytes=-1)


def test_close_is_idempotent_and_ends_the_workspace(tmp_path: Path) -> None:
    async def main() -> None:
        ws = await ShellWorkspace.start(limits=LIMITS, temp_dir=tmp_path)
        [own] = list(tmp_path.iterdir())  # this process's directory...
        assert len(list(own.iterdir())) == 1  # ...with the workspace's host-side files
        await ws.close()
        await ws.close()
        assert list(own.iterdir()) == []
        with pytest.raises(WorkspaceError, match="the workspace is closed"):
            await ws.run("true")

    asyncio.run(main())


def test_observation_says_what_happened() -> None:
    def result(**kwargs: Any) -> CommandResult:
        fields: dict[str, Any] = {"exit_code": None, "output": "", "truncated": False, "timed_out": False,
                                  "killed_by": None, "duration_s": 0.1}
        return CommandResult(**(fields | kwargs))

    assert result(exit_code=0, output="hi\n").observation() == "hi\n[exit code 0]"
    assert result(timed_out=True, killed_by="timeout", limit="30 s", output="partial").observation() == (
        "partial\n[killed: took longer than 30 s]")
    assert result(exit_code=0, ended_processes=2).observation() == (
        "[2 background process(es) ended with the command]\n[exit code 0]")
    assert result(exit_code=1, killed_by="disk-full", limit="256 MB").observation() == (
        "[the disk is full: the workspace and /tmp hold 256 MB each]\n[exit code 1]")


def test_concurrent_workspaces_are_separate() -> None:
    async def one(i: int) -> str:
        async with await ShellWorkspace.start(limits=LIMITS) as ws:
            await ws.write_file("mine.txt", f"{i}\n")
            return (await ws.run("sleep 0.2; cat mine.txt; ls")).output

    async def main() -> list[str]:
        return list(await asyncio.gather(*(one(i) for i in range(8))))

    assert asyncio.run(main()) == [f"{i}\nmine.txt\n" for i in range(8)]


def test_a_workspace_closed_from_another_loop_is_ended_and_removed(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    try:
        ws = loop.run_until_complete(ShellWorkspace.start(limits=LIMITS, temp_dir=tmp_path))
        assert loop.run_until_complete(ws.run("echo hi")).output == "hi\n"
        [own] = list(tmp_path.iterdir())
        assert len(list(own.iterdir())) == 1
        with pytest.raises(WorkspaceError, match="used from another event loop than the one that started it"):
            asyncio.run(ws.run("echo hi"))
        asyncio.run(ws.close())  # another loop
        assert list(own.iterdir()) == []
    finally:
        loop.close()


# --- base filesystems: a root filesystem shipped as a tar archive --------------------------------

def _rootfs(tmp_path: Path) -> Path:
    """A small root filesystem made of this machine's bash, cat, ls and their libraries, with a
    marker file; as a tar.gz archive."""
    import shutil
    import subprocess
    import tarfile

    root = tmp_path / "rootfs"
    binaries = [shutil.which(name) for name in ("bash", "cat", "ls")]
    files = {os.path.realpath(b) for b in binaries if b}
    for binary in list(files):
        ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        files |= {word for word in ldd.split() if word.startswith("/")}
    for name in files:
        target = root / "usr" / "bin" / Path(name).name if name in {os.path.realpath(b) for b in binaries if b} \
            else root / name.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(name), target)
    for link in ("bin", "lib", "lib64"):
        if not (root / link).exists() and (root / "usr" / link).exists():
            (root / link).symlink_to(f"usr/{link}")
    (root / "etc").mkdir()
    (root / "etc" / "marker").write_text("the bundle's root filesystem\n")
    (root / "usr" / "bin" / "cat").chmod(0o4755)  # set-uid: dropped on extraction
    archive = tmp_path / "rootfs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname=".")
    return archive


@pytest.mark.skipif(sys.platform != "linux" or not os.path.exists("/usr/bin/ldd"), reason="needs ldd")
def test_a_base_filesystem_is_the_sandbox_root(tmp_path: Path, seed: Path) -> None:
    archive = _rootfs(tmp_path)
    cache = tmp_path / "cache"

    async def body(ws: ShellWorkspace) -> list[str]:
        outputs = [(await ws.run(c)).output for c in (
            "cat /etc/marker; ls /usr/bin; stat -c %a /usr/bin/cat 2>/dev/null || ls -l /usr/bin/cat",
            "python3 -V; ls /usr/share", "cd src && export FOO=bar", "pwd; echo $FOO; cat main.py",
            "echo x > /usr/bin/new; echo x > /etc/new")]
        await ws.edit_file("src/main.py", "x = 1", "x = 3")
        return [*outputs, await ws.read_file("src/main.py")]

    first = run(seed, body, base=archive, base_cache=cache)
    assert first[0].startswith("the bundle's root filesystem\nbash\ncat\nls\n"), first[0]
    assert "-rwxr-xr-x" in first[0] or first[0].endswith("755\n")  # no set-uid bit
    assert "python3: command not found" in first[1] and "cannot access '/usr/share'" in first[1]  # not the host's
    assert first[3] == "/workspace/src\nbar\nx = 1\nprint(x)\n"
    assert first[4].count("Read-only file system") == 2
    assert first[5] == "x = 3\nprint(x)\n"
    [extracted] = [p for p in cache.iterdir()]
    stamp = (extracted / "root" / "etc" / "marker").stat().st_mtime_ns
    run(seed, lambda ws: ws.run("true"), base=archive, base_cache=cache)  # extracted once per digest
    assert list(cache.iterdir()) == [extracted] and (extracted / "root" / "etc" / "marker").stat().st_mtime_ns == stamp


def _archive(tmp_path: Path, members: list[tuple[str, str, str]]) -> Path:
    """A tar archive of (name, kind, link target or content) members."""
    import io
    import tarfile

    archive = tmp_path / "bad.tar"
    with tarfile.open(archive, "w") as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = value.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "chr": tarfile.CHRTYPE}[kind]
            info.linkname = value
            tar.addfile(info)
    return archive


@pytest.mark.parametrize(("members", "message"), [
    ([("/etc/passwd", "file", "x")], "member '/etc/passwd' has an absolute path"),
    ([("../../escape", "file", "x")], "member '../../escape' climbs out of the archive with '..'"),
    ([("esc", "sym", "/tmp"), ("esc/x", "file", "x")], "member 'esc/x' goes through a symbolic link"),
    ([("h", "hard", "/etc/passwd")], "hard link 'h' to '/etc/passwd', not a file of the archive"),
    ([("a", "file", "x"), ("h", "hard", "../a")], "hard link 'h' to '../a', not a file of the archive"),
], ids=["absolute", "dotdot", "through-link", "hard-link-out", "hard-link-dotdot"])
def test_an_unsafe_base_archive_is_refused(tmp_path: Path, members: list[tuple[str, str, str]],
                                           message: str) -> None:
    archive = _archive(tmp_path, members)
    with pytest.raises(WorkspaceError) as info:
        asyncio.run(ShellWorkspace.start(base=archive, base_cache=tmp_path / "cache"))
    assert message in str(info.value)
    assert not (tmp_path / "escape").exists() and [p.name for p in (tmp_path / "cache").iterdir()] == []


def test_a_base_archive_leaves_device_files_out(tmp_path: Path) -> None:
    from envhub.sandbox._rootfs import prepare_base

    archive = _archive(tmp_path, [("dev", "dir", ""), ("dev/sda", "chr", ""), ("etc", "dir", ""),
                                  ("etc/f", "file", "f"), ("etc/g", "hard", "etc/f")])
    root = prepare_base(archive, tmp_path / "cache")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["dev", "etc", "etc/f", "etc/g"]
    assert (root / "etc" / "g").read_text() == "f"
    assert prepare_base(archive, tmp_path / "cache") == root
