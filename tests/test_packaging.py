"""The distribution: its name, and that nothing depends on the unrelated PyPI 'envhub'."""

from __future__ import annotations

import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _pyprojects() -> list[Path]:
    return [p for p in ROOT.rglob("pyproject.toml") if ".venv" not in p.parts and "bench" not in p.parts]


def test_no_project_depends_on_the_unrelated_envhub() -> None:
    """'envhub' on PyPI is another project; ours is 'envhub-rl'. A plugin or extra that
    asked for 'envhub' would install the wrong package."""
    assert _pyprojects()
    for path in _pyprojects():
        project = tomllib.loads(path.read_text())["project"]
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements.extend(extra)
        for text in requirements:
            assert canonicalize_name(Requirement(text).name) != "envhub", (
                f"{path}: {text!r} pulls the unrelated 'envhub'")
        assert canonicalize_name(project["name"]) != "envhub", path


def test_installed_distribution() -> None:
    dist = distribution("envhub-rl")
    assert any(ep.name == "envhub" and ep.value == "envhub.cli:main" for ep in dist.entry_points)
    assert (ROOT / "envhub" / "py.typed").exists()


def test_public_surface_resolves() -> None:
    import envhub

    for name in envhub.__all__:
        assert getattr(envhub, name) is not None, name
    assert envhub.parse_ref("acme/x@1.0").pinned is not None
