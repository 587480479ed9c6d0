from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ENVHUB = shutil.which("envhub", path=str(Path(sys.executable).parent)) or "envhub"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the user's home: envhub's directories live in a temporary one."""
    home = tmp_path_factory.mktemp("envhub-home")
    monkeypatch.setenv("ENVHUB_HOME", str(home / "home"))
    monkeypatch.setenv("ENVHUB_CACHE", str(home / "cache"))
    monkeypatch.delenv("ENVHUB_DEBUG", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def envhub_cli(capsys: pytest.CaptureFixture[str]):
    """Run the CLI in-process through its real error boundary, ``envhub.cli.main``."""
    from envhub.cli import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        captured = capsys.readouterr()
        return Result(int(exc.value.code or 0), captured.out, captured.err)

    return run


def run_envhub(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    """Run the installed ``envhub`` command in a subprocess, as a user would."""
    proc = subprocess.run([ENVHUB, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)
    return Result(proc.returncode, proc.stdout, proc.stderr)


# --- registries: a directory, memory:// and s3:// on a real (moto) server on 127.0.0.1 ---------

S3_BUCKET = "envhub-test"


@pytest.fixture(scope="session")
def s3_endpoint():
    """A moto S3 server on 127.0.0.1 (a free port), with dummy credentials and one bucket.

    Started once per session, and only by tests that use s3://."""
    import logging

    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log on the tests' stderr
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                           "AWS_EC2_METADATA_DISABLED": "true"}.items():
            mp.setenv(key, value)
        for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(key, raising=False)
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            endpoint = f"http://{host}:{port}"
            import boto3

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=S3_BUCKET)
            yield endpoint
        finally:
            server.stop()


@dataclass
class RegistryTarget:
    """Where a test's registry lives: its URL and the storage options fsspec needs."""

    kind: str
    url: str
    storage_options: dict[str, object]

    #: Equivalent options that make fsspec create another filesystem instance (s3fs caches
    #: listings per instance), to act as a second, independent client.
    other_storage_options: dict[str, object] | None = None

    def open(self, *, other_client: bool = False):  # type: ignore[no-untyped-def]
        from envhub.registry import FsspecRegistry

        options = self.other_storage_options if other_client and self.other_storage_options else self.storage_options
        return FsspecRegistry(self.url, storage_options=options)


@pytest.fixture(params=["dir", "memory", "s3"])
def registry_target(request: pytest.FixtureRequest, tmp_path: Path) -> RegistryTarget:
    """An empty registry of each kind, unique to the test."""
    import uuid

    unique = uuid.uuid4().hex
    if request.param == "dir":
        return RegistryTarget("dir", str(tmp_path / "registry"), {})
    if request.param == "memory":
        return RegistryTarget("memory", f"memory://envhub-test-{unique}", {})
    endpoint = request.getfixturevalue("s3_endpoint")
    return RegistryTarget("s3", f"s3://{S3_BUCKET}/{unique}", {"client_kwargs": {"endpoint_url": endpoint}},
                          {"endpoint_url": endpoint, "key": "testing", "secret": "testing"})


@pytest.fixture
def s3_cli(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point fsspec's s3 configuration at the moto server, for commands given only a URL.

    fsspec reads ``FSSPEC_S3_<KWARG>`` when it is imported (fsspec.config.set_conf_env): the
    returned variables serve subprocesses; in this process the parsed config is patched."""
    import fsspec.config

    env = {"FSSPEC_S3_ENDPOINT_URL": s3_endpoint, "FSSPEC_S3_KEY": "testing", "FSSPEC_S3_SECRET": "testing"}
    conf: dict[str, dict[str, object]] = {}
    fsspec.config.set_conf_env(conf, env)
    monkeypatch.setitem(fsspec.config.conf, "s3", conf["s3"])
    return env


# --- an OpenAI-compatible chat-completions server on 127.0.0.1 (tests/openai_server.py) ---------


@pytest.fixture
def openai_server():  # type: ignore[no-untyped-def]
    """A running OpenAI-compatible server answering "" until a test sets ``server.script``;
    ``server.base_url`` ends in ``/v1`` and ``server.requests`` records what was sent."""
    from tests.openai_server import OpenAIServer

    with OpenAIServer() as server:
        yield server
