"""Workspace backends and the envhub-containers plugin (plugins/envhub-containers).

What needs no container engine is tested for real here: the manifest's rules for ``base``
(an ``oci:`` image by digest, with its registry; a scheme no plugin provides), the hook
``envhub_workspace_backends`` and how state kind ``sandbox`` picks a backend by the scheme
of its base (through a backend registered by a test plugin, which delegates to envhub's own
ShellWorkspace: a real backend, real sandboxed commands), images recorded in envhub.lock and
a lock that misses one called stale, the engine command lines the plugin runs (pure
functions), and the distribution itself (its pinned range, pip-installed into a venv and
listed by that venv's ``envhub plugins``).

The container backend itself runs only where ``podman info`` or ``docker info`` succeeds;
elsewhere those tests skip and say so.
"""

# mypy: disable-error-code="import-not-found, import-untyped"
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from envhub.context import make_plugin_manager
from envhub.errors import PluginError
from envhub.hookspecs import WorkspaceBackend, hookimpl
from envhub.manifest import parse_manifest
from envhub.plugins import PluginManager
from envhub.project import ImagePull, LockedEnv, Lockfile, dumps, loads
from envhub.sandbox import ShellLimits, ShellWorkspace

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugins" / "envhub-containers"
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"docker.io/library/python@{DIGEST}"
NO_ENGINE = "no container engine: neither podman info nor docker info succeeds here"

MANIFEST = """\
[environment]
name = "acme/shell"
version = "1.0.0"
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
splits.train = {{ path = "tasks/train.jsonl" }}

[harness]
protocol = "tool-use"
builtin-tools = ["bash"]

[state]
kind = "sandbox"
base = {base}

[verifier]
kind = "exact-match"
"""


@pytest.fixture
def containers(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The plugin's package, imported from plugins/envhub-containers."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    for name in [m for m in sys.modules if m.startswith("envhub_containers")]:
        monkeypatch.delitem(sys.modules, name)
    import envhub_containers

    return envhub_containers


def problems(base: str, plugins: Any = None) -> list[tuple[str | None, str, str | None]]:
    _, found = parse_manifest(MANIFEST.format(base=json.dumps(base)), plugins=plugins)
    return [(p.field, p.message, p.hint) for p in found]


class _Recorder:
    """A workspace backend of scheme ``testbox``: envhub's ShellWorkspace, with each call recorded."""

    def __init__(self, scheme: str = "testbox") -> None:
        self.scheme = scheme
        self.calls: list[dict[str, Any]] = []

    async def start(self, *, seed: Path, limits: ShellLimits, mounts: dict[str, Path], base: str) -> ShellWorkspace:
        self.calls.append({"seed": sorted(p.name for p in seed.iterdir()), "limits": limits, "mounts": mounts,
                           "base": base})
        return await ShellWorkspace.start(seed=seed, limits=limits, mounts=mounts)

    def pull(self, image: str) -> None:
        self.calls.append({"pull": image})
        if "unpullable" in image:
            from envhub.errors import EnvhubError

            raise EnvhubError(f"{NO_ENGINE} (test)")

    @hookimpl
    def envhub_workspace_backends(self) -> list[WorkspaceBackend]:
        return [WorkspaceBackend(self.scheme, self.start, pull=self.pull, description="test")]


def manager(*plugins: Any) -> PluginManager:
    pm = make_plugin_manager(autoload=False)
    for plugin in plugins:
        pm.register(plugin)
    return pm


# --- the manifest: base ------------------------------------------------------------------------


@pytest.mark.parametrize(("base", "message", "hint"), [
    ("oci:docker.io/library/python:3.12",
     "image 'docker.io/library/python:3.12' has no digest: an image is referenced by its digest only (@sha256:...), "
     "so every run gets the same bytes", "skopeo inspect --format '{{.Digest}}' docker://IMAGE:TAG"),
    ("oci:docker.io/library/python@sha256:abc",
     "image 'docker.io/library/python@sha256:abc': the digest 'sha256:abc' is not 'sha256:' and 64 lowercase hex "
     "digits", "docker buildx imagetools inspect"),
    (f"oci:python@{DIGEST}", f"image 'python@{DIGEST}' does not name its registry, so engines could resolve it "
                             "differently", f"'oci:docker.io/library/python@{DIGEST}'"),
    (f"oci:docker.io/library/Python@{DIGEST}", f"image 'docker.io/library/Python@{DIGEST}' is not an image "
                                               "reference", "oci:docker.io/library/python@sha256:"),
    ("oci:", "base 'oci:' names no image", "podman image inspect"),
    ("host:x", "base 'host:x': the host's system takes no reference", "write base = 'host'"),
], ids=["tag-without-digest", "short-digest", "no-registry", "uppercase-repository", "empty", "host-reference"])
def test_a_base_that_is_not_an_image_by_digest_is_an_error_with_the_fix(base: str, message: str, hint: str) -> None:
    found = [p for p in problems(base) if p[0] == "state.base" and "no installed plugin" not in p[1]]
    assert len(found) == 1, problems(base)
    field, got, got_hint = found[0]
    assert got.startswith(message) and hint in (got_hint or "")


def test_an_image_by_digest_needs_only_the_plugin_of_its_scheme() -> None:
    # control: with a plugin that runs oci: workspaces, a digest reference has no problem at all
    assert problems(f"oci:{IMAGE}", manager(_Recorder("oci"))) == []
    assert problems(f"oci:docker.io/library/python:3.12@{DIGEST}", manager(_Recorder("oci"))) == []
    # without it: the problem names the field, the scheme and the plugin to install
    assert problems(f"oci:{IMAGE}", manager()) == [
        ("state.base", "no installed plugin runs workspaces of base scheme 'oci'",
         "install envhub-containers (pip install envhub-containers), which runs them with podman or docker")]
    assert problems(f"oci:{IMAGE}") == problems(f"oci:{IMAGE}", manager())  # no plugins given: the same


def test_an_unknown_scheme_names_the_installed_ones_and_the_bundle_archive_stays_a_path() -> None:
    assert problems("firecracker:vm-1", manager(_Recorder())) == [
        ("state.base", "no installed plugin runs workspaces of base scheme 'firecracker'",
         "install the plugin that runs them; installed plugins run 'testbox:'")]
    assert problems("testbox:anything", manager(_Recorder())) == []  # control: the installed one
    assert problems("rootfs/busybox.tar.gz", manager()) == []  # no scheme: a bundle path, as before
    assert problems("host", manager()) == []


def test_two_plugins_running_one_scheme_is_a_conflict_naming_both() -> None:
    pm = manager(_Recorder(), _Recorder())
    [(field, message, hint)] = problems("testbox:x", pm)
    assert field == "state.base" and message.startswith("workspace base scheme 'testbox' is provided by 2 plugins")


def test_a_plugin_cannot_replace_the_host_backend() -> None:
    from envhub._builtins import WORKSPACE_BACKENDS

    pm = manager(_Recorder("host"))
    assert pm.lookup("workspace_backends", "host") is WORKSPACE_BACKENDS[0]
    [conflict] = pm.conflicts()
    assert conflict.builtin_wins
    assert conflict.message().startswith("workspace base scheme 'host' is built into envhub; ")


# --- the hook: state kind sandbox on a plugin's backend -----------------------------------------


def make_state_factory(spec: Any, root: Path, pm: PluginManager) -> Any:
    """State kind sandbox's factory, as an environment gets it: through the built-in plugin."""
    kind: Any = pm.lookup("state_kinds", "sandbox")
    return kind.factory(spec, root, lambda ref: None)


def _bundle(tmp_path: Path, base: str) -> tuple[Any, Path]:
    root = tmp_path / "bundle"
    (root / "tasks").mkdir(parents=True)
    (root / "workspace").mkdir()
    (root / "workspace" / "hello.txt").write_text("hello\n")
    text = MANIFEST.format(base=json.dumps(base)).replace('kind = "sandbox"',
                                                          'kind = "sandbox"\nsnapshot = "workspace"')
    manifest, found = parse_manifest(text, plugins=manager(_Recorder(), _Recorder("oci")))
    assert manifest is not None, found
    return manifest, root


def test_state_kind_sandbox_runs_on_the_backend_of_its_base_scheme(tmp_path: Path) -> None:
    from envhub.runtime import Task

    recorder = _Recorder()
    manifest, root = _bundle(tmp_path, "testbox:some/reference")
    factory = make_state_factory(manifest.state, root, manager(recorder))

    async def episode() -> str:
        handle = await factory.anew(Task(id="t1", split="train", data={"id": "t1"}))
        try:
            first = await handle.value.run("cd /workspace && export GREETING=hi && cat hello.txt")
            second = await handle.value.run('echo "$GREETING from $(pwd)"')
            return str(first.output + second.output)
        finally:
            await handle.arelease()

    assert asyncio.run(episode()) == "hello\nhi from /workspace\n"
    [call] = recorder.calls
    assert call["base"] == "some/reference" and call["seed"] == ["hello.txt"] and call["mounts"] == {}
    assert call["limits"] == ShellLimits(command_timeout_s=30.0, cpu_s=60, memory_mb=1024, processes=128, disk_mb=256,
                                         output_bytes=16384, network=False)


def test_the_host_base_goes_through_the_builtin_backend_and_a_missing_scheme_is_a_plugin_error(tmp_path: Path) -> None:
    manifest, root = _bundle(tmp_path, "host")
    pm = manager()
    factory: Any = make_state_factory(manifest.state, root, pm)
    assert factory.backend is pm.lookup("workspace_backends", "host")
    manifest, root = _bundle(tmp_path / "2", f"oci:{IMAGE}")
    with pytest.raises(PluginError) as e:
        make_state_factory(manifest.state, root, manager())
    assert e.value.message == f"no installed plugin runs workspaces of base scheme 'oci' (state base 'oci:{IMAGE}')"
    assert "envhub-containers" in (e.value.hint or "")


def test_a_plugin_base_validates_and_runs_the_episode_and_the_tests_on_its_backend(tmp_path: Path) -> None:
    """A bundle whose base is a plugin's scheme: validate does not take the base for a bundle
    file, the episode's workspace and the verifier's fresh ones all start on that backend, and
    the reference solution scores 1.0 through it."""
    import envhub
    from envhub.bundle import validate_bundle
    from envhub.context import Context
    from tests.test_sandbox_state import make_bundle, play

    recorder = _Recorder()
    pm = manager(recorder)
    root = make_bundle(tmp_path / "b", state_extra='base = "testbox:some/reference"\n')
    check = validate_bundle(root, plugins=pm)
    assert [p.message for p in check.problems if p.severity == "error"] == []
    with envhub.load(root, context=Context.create(plugins=pm), trust_code=True) as env:
        task = env.task("train", "greeting")
        score, _ = play(env, "greeting", env.reference_actions(task)[:1])
    assert score.reward == 1.0, score
    starts = [c for c in recorder.calls if "seed" in c]
    # The episode's workspace, the verifier's run on the starting workspace (which tests exist)
    # and its run on the final one: every one on the plugin's backend, with its reference.
    assert len(starts) >= 3 and {c["base"] for c in starts} == {"some/reference"}
    assert any("/tests" in c["mounts"] for c in starts)


def test_a_backend_with_a_bad_scheme_is_a_broken_plugin_and_the_others_still_work() -> None:
    class Bad:
        @hookimpl
        def envhub_workspace_backends(self) -> list[WorkspaceBackend]:
            return [WorkspaceBackend("Not A Scheme", ShellWorkspace.start)]

    pm = manager(Bad(), _Recorder())
    assert pm.lookup("workspace_backends", "testbox") is not None
    [broken] = pm.broken
    assert "invalid workspace base scheme name 'Not A Scheme'" in broken.error


# --- envhub.lock: images --------------------------------------------------------------------------


def _locked(**extra: Any) -> LockedEnv:
    return LockedEnv("acme/shell", "1.0.0", "sha256:" + "0" * 64, 10, "default", None, **extra)


def test_a_lock_records_images_only_when_there_are_some_and_reads_them_back() -> None:
    plain = dumps(Lockfile(["acme/shell"], {"acme/shell": _locked()}))
    assert "images" not in plain  # a lock without images keeps its bytes
    text = dumps(Lockfile(["acme/shell"], {"acme/shell": _locked(images=(IMAGE,))}))
    assert f'images = [\n    "{IMAGE}",\n]' in text or f'images = ["{IMAGE}"]' in text
    assert loads(text).environments["acme/shell"].images == (IMAGE,)
    import jsonschema

    schema = json.loads((ROOT / "spec" / "schema" / "lock-v1.schema.json").read_text())
    import tomllib

    jsonschema.validate(tomllib.loads(text), schema)


def test_a_lock_with_an_image_not_by_digest_is_refused_naming_the_field() -> None:
    from envhub.project import LockError

    text = dumps(Lockfile(["acme/shell"], {"acme/shell": _locked(images=(IMAGE,))}))
    with pytest.raises(LockError) as e:
        loads(text.replace(IMAGE, "docker.io/library/python:3.12"))
    assert e.value.message.startswith("envhub.lock: environment[0].images[0]: image 'docker.io/library/python:3.12' "
                                      "has no digest")


@pytest.fixture
def registry_home(tmp_path: Path) -> Path:
    return tmp_path


def _default_registry() -> Path:
    from envhub.settings import load_settings

    path = Path(load_settings().default_registry.removeprefix("file://"))
    assert path.is_absolute(), path  # never a path relative to the working directory (the repository)
    return path


def _plant_shell_env(registry: Path, tmp: Path, base: str) -> None:
    """Publish acme/shell 1.0.0 whose manifest says ``base``: built as a valid bundle with the
    host base, its manifest then given ``base`` and the archive planted in the registry as a
    writer would (envhub.bundle's validation does not take scheme bases yet: see the report)."""
    from envhub.bundle import RECORD, build_bundle, extract_archive, write_archive
    from tests.registry_fixtures import PLUGINS, plant

    _, root = _bundle(tmp / "src", "host")
    (root / "tasks" / "train.jsonl").write_text('{"id": "t1", "prompt": "p", "answer": "a"}\n')
    text = MANIFEST.format(base='"host"').replace('kind = "sandbox"', 'kind = "sandbox"\nsnapshot = "workspace"')
    (root / "envhub.toml").write_text(text)
    built = build_bundle(root, tmp / "dist", plugins=PLUGINS)
    tree = tmp / "tree"
    extract_archive(built.public.path, tree, max_bytes=1 << 30)
    manifest = tree / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('base = "host"', f"base = {json.dumps(base)}"))
    files = [(p.relative_to(tree).as_posix(), p) for p in sorted(tree.rglob("*"))
             if p.is_file() and p.relative_to(tree).as_posix() != RECORD]
    archive = write_archive(tmp / "planted.tar", files)
    plant(registry, archive.path.read_bytes(), name="acme/shell", version="1.0.0")


def test_lock_records_the_image_of_a_locked_environment_and_sync_pulls_it(registry_home: Path) -> None:
    from tests.test_project import lock_data, project, run_in_process

    _plant_shell_env(_default_registry(), registry_home, f"oci:{IMAGE}")
    root = project(registry_home, ["acme/shell"])
    locked = run_in_process("lock", cwd=root)
    assert locked.code == 0, locked.err
    [entry] = lock_data(root)["environment"]
    assert entry["images"] == [IMAGE]
    from envhub.settings import load_settings

    assert not list(load_settings().cache.glob("bundles/*"))  # read from a temporary copy: the cache untouched
    # sync pulls it through the oci: backend
    from envhub.project import StaleLockError, sync_project
    from envhub.settings import load_settings

    recorder = _Recorder("oci")
    result = sync_project(project_of(root), load_settings(), plugins=manager(recorder))
    assert result.images == [ImagePull(IMAGE, ("acme/shell@1.0.0",), True)]
    assert recorder.calls == [{"pull": IMAGE}]
    # without the plugin: said, and the sync goes on
    result = sync_project(project_of(root), load_settings(), plugins=manager())
    assert result.images == [ImagePull(IMAGE, ("acme/shell@1.0.0",), False,
                                       "no installed plugin runs oci: workspaces (pip install envhub-containers to "
                                       "run them with podman or docker)")]
    # the command says what it did about each image, and --json lists them
    said = run_in_process("sync", cwd=root)
    assert said.code == 0, said.err
    assert (f"Did not pull {IMAGE} (acme/shell@1.0.0): no installed plugin runs oci: workspaces (pip install "
            "envhub-containers to run them with podman or docker)") in said.err
    listed = run_in_process("sync", "--json", cwd=root)
    assert json.loads(listed.out)["images"] == [{"image": IMAGE, "environments": ["acme/shell@1.0.0"],
                                                 "pulled": False, "reason": result.images[0].reason}]
    # a lock that lost the image is stale: --locked fails, a plain sync records it again
    lock = root / "envhub.lock"
    good = lock.read_text()
    lock.write_text(dumps(Lockfile(["acme/shell"], {"acme/shell": replace_images(loads(good), ())})))
    with pytest.raises(StaleLockError) as e:
        sync_project(project_of(root), load_settings(), plugins=manager(recorder), locked=True)
    assert e.value.message == f"{lock} is out of date: acme/shell@1.0.0 references the image {IMAGE}, which the lock " \
                              "does not record"
    sync_project(project_of(root), load_settings(), plugins=manager(recorder))
    assert lock.read_text() == good


def project_of(root: Path) -> Any:
    from envhub.project import find_project

    found = find_project(root)
    assert found is not None
    return found


def replace_images(lock: Lockfile, images: tuple[str, ...]) -> LockedEnv:
    from dataclasses import replace

    return replace(lock.environments["acme/shell"], images=images)


def test_a_lock_of_environments_without_images_is_unchanged(registry_home: Path) -> None:
    from tests.test_project import project, publish, run_in_process

    publish(registry_home, "acme/a", "1.0.0")
    root = project(registry_home, ["acme/a"])
    assert run_in_process("lock", cwd=root).code == 0
    assert "images" not in (root / "envhub.lock").read_text()


# --- the plugin: command lines --------------------------------------------------------------------


def test_the_container_is_created_with_the_limits_as_engine_flags(containers: Any) -> None:
    from envhub_containers._commands import ContainerLimits, create_command

    limits = ContainerLimits(memory_mb=512, processes=64, cpu_s=30, disk_mb=100, network=False)
    argv = create_command("podman", IMAGE, "envhub-ws-1", limits, mounts={"/tests": Path("/tmp/t")},
                          labels={"envhub.workspace": "1"})
    assert argv == [
        "podman", "run", "--detach", "--name", "envhub-ws-1", "--network", "none",
        "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--memory", "512m", "--memory-swap", "512m", "--pids-limit", "64", "--ulimit", "cpu=30:30",
        "--tmpfs", "/workspace:rw,exec,size=100m,mode=1777", "--tmpfs", "/tmp:rw,exec,size=64m,mode=1777",
        "--user", "65534:65534", "--workdir", "/workspace", "--label", "envhub.workspace=1",
        "--mount", "type=bind,source=/tmp/t,target=/tests,readonly",
        "--entrypoint", "/bin/sh", IMAGE, "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]
    shared = create_command("docker", IMAGE, "n", ContainerLimits(512, 64, 30, 100, network=True))
    assert shared[0] == "docker" and "--network" not in shared  # network on: the engine's default network


def test_pull_exec_copy_and_remove_command_lines(containers: Any) -> None:
    from envhub_containers import _commands as c

    assert c.pull_command("docker", IMAGE) == ["docker", "pull", "--quiet", IMAGE]
    assert c.inspect_digests_command("podman", IMAGE) == ["podman", "image", "inspect", "--format",
                                                          "{{json .RepoDigests}}", IMAGE]
    assert c.image_digest(IMAGE) == DIGEST
    with pytest.raises(ValueError, match="not referenced by digest"):
        c.image_digest("docker.io/library/python:3.12")
    assert c.exec_command("podman", "n", ["sh", "-c", "ls"], stdin=True) == [
        "podman", "exec", "--interactive", "--user", "65534:65534", "--workdir", "/workspace", "n", "sh", "-c", "ls"]
    assert c.tar_in_command("podman", "n")[-6:] == ["tar", "-x", "-f", "-", "-C", "/workspace"]
    assert c.tar_out_command("podman", "n")[-6:] == ["tar", "-c", "-f", "-", "-C", "/workspace", "."][-6:]
    assert c.kill_others_command("docker", "n") == ["docker", "exec", "--user", "65534:65534", "n", "/bin/sh", "-c",
                                                    "kill -9 -1 2>/dev/null; true"]
    assert c.remove_command("podman", "n") == ["podman", "rm", "--force", "--volumes", "n"]


def test_the_shell_script_carries_directory_and_exported_variables_between_commands(containers: Any,
                                                                                    tmp_path: Path) -> None:
    """The script each run executes, run here by bash with the state directory moved into tmp_path:
    cwd and exported variables survive from one command to the next, a failing command keeps its
    exit code, and stderr comes with stdout."""
    import subprocess

    from envhub_containers._commands import STATE_DIR, WORKSPACE, shell_script

    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)

    def run(command: str) -> subprocess.CompletedProcess[str]:
        script = shell_script(command).replace(STATE_DIR, str(tmp_path / "state")).replace(WORKSPACE, str(workspace))
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)

    assert run("cd src && export A=1 && echo start").stdout == "start\n"
    second = run('echo "$A $(basename $(pwd))"; echo oops >&2; exit 3')
    assert (second.stdout, second.returncode) == ("1 src\noops\n", 3)
    assert run("echo $A").stdout == "1\n"  # a failed command still saved the state


def test_no_engine_here_is_said_plainly(containers: Any) -> None:
    from envhub_containers._engine import NoEngineError, find_engine

    with pytest.raises(NoEngineError) as e:
        find_engine(candidates=("envhub-no-such-engine",))
    assert e.value.message == f"{NO_ENGINE} (envhub-no-such-engine is not installed)"


# --- the plugin against a real engine ---------------------------------------------------------------

#: The image the engine tests run: busybox, by digest (override with ENVHUB_TEST_OCI_IMAGE).
ENGINE_IMAGE = "docker.io/library/busybox@sha256:e06f93f59fe842fb490ba992bae19fdd5a05373547b52f8184650c2509908114"


@pytest.fixture
def engine(containers: Any) -> Any:
    from envhub_containers._engine import NoEngineError, find_engine

    try:
        return find_engine()
    except NoEngineError as e:
        pytest.skip(f"{NO_ENGINE} ({e.message.split('(', 1)[-1].rstrip(')')})")


def test_a_container_workspace_against_a_real_engine(engine: Any, tmp_path: Path) -> None:
    import os

    from envhub_containers._workspace import start_workspace

    from envhub.errors import EnvhubError

    image = os.environ.get("ENVHUB_TEST_OCI_IMAGE", ENGINE_IMAGE)
    seed = tmp_path / "seed"
    (seed / "src").mkdir(parents=True)
    (seed / "src" / "main.txt").write_text("x = 1\n")
    limits = ShellLimits(command_timeout_s=5, cpu_s=10, memory_mb=128, processes=32, disk_mb=8, output_bytes=1024,
                         network=False)

    async def episode() -> None:
        try:
            workspace = await start_workspace(seed=seed, limits=limits, base=image, engine=engine)
        except EnvhubError as e:
            pytest.skip(f"cannot pull {image} here: {e.message}")
        try:
            assert (await workspace.run("cd src && export A=1")).exit_code == 0
            assert (await workspace.run('echo "$A $(pwd)"')).output == "1 /workspace/src\n"
            await workspace.edit_file("src/main.txt", old="x = 1", new="x = 2")
            assert await workspace.read_file("src/main.txt") == "x = 2\n"
            assert await workspace.list_files(".") == ["src/", "src/main.txt"]
            slow = await workspace.run("sleep 30", timeout_s=1)
            assert slow.timed_out and slow.killed_by == "timeout"
            flood = await workspace.run("yes")
            assert flood.killed_by == "output" and flood.truncated
            full = await workspace.run("dd if=/dev/zero of=big bs=1M count=64")
            assert "No space left on device" in full.output
            net = await workspace.run("wget -q -T 2 -O- http://1.1.1.1 || echo offline")
            assert "offline" in net.output
            await workspace.run("rm -f big")
            out = await workspace.export(tmp_path / "final")
            assert (out / "src" / "main.txt").read_text() == "x = 2\n"
        finally:
            await workspace.close()
        done = await asyncio.create_subprocess_exec(engine.command, "container", "exists", workspace.name)
        assert await done.wait() != 0  # removed

    asyncio.run(episode())


# --- the distribution --------------------------------------------------------------------------------


def test_the_distribution_pins_envhub_rl_and_depends_on_nothing_else() -> None:
    import tomllib

    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["envhub-rl>=0.1.0,<0.2"]
    assert tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]["entry-points"]["envhub"] == {
        "containers": "envhub_containers"}


def test_the_installed_distribution_registers_the_oci_scheme(tmp_path: Path) -> None:
    """pip-installed into a fresh venv: that venv's ``envhub plugins`` lists it, and a manifest
    with an oci: base by digest no longer lacks its plugin."""
    pytest.importorskip("hatchling", reason="building the plugin needs hatchling (the dev extra has it)")
    from tests.plugin_venv import make_venv, pip_install

    venv = make_venv(tmp_path / "venv")
    pip_install(venv, PLUGIN)
    listed = venv.run("plugins", "--json")
    assert listed.code == 0, listed.err
    [ours] = [p for p in json.loads(listed.out)["plugins"] if p["distribution"] == "envhub-containers"]
    assert ours["registers"] == {"workspace_backends": ["oci"]}
    assert ours["entry_point"] == "containers = envhub_containers"
    checked = venv.python_c(
        "import json, sys\n"
        "from envhub.context import make_plugin_manager\n"
        "from envhub.manifest import parse_manifest\n"
        f"text = {MANIFEST.format(base=json.dumps('oci:' + IMAGE))!r}\n"
        "_, found = parse_manifest(text, plugins=make_plugin_manager())\n"
        "print(json.dumps([p.message for p in found]))\n")
    assert checked.code == 0, checked.err
    assert json.loads(checked.out) == []
