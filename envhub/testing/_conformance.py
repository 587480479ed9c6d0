"""The conformance checks of one bundle, independent of pytest.

A :class:`Conformance` runs each check of :data:`CHECKS` on demand and remembers what it
shares between them: the static validation (as ``envhub validate``), the dynamic self-test
(as ``envhub validate --check``) and the public build (as ``envhub build``). Each check's
:class:`Outcome` carries the same :class:`envhub.problems.Problem` values those commands
report, so a failure reads the same everywhere: file, field, message and hint.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from envhub.problems import Problem

if TYPE_CHECKING:
    from envhub.bundle import BundleCheck, SplitFacts
    from envhub.context import Context
    from envhub.manifest import Split
    from envhub.runtime import CheckResult, EnvironmentProtocol

__all__ = ["CHECKS", "Conformance", "Outcome"]

#: The checks, in the order they run; each name is the last part of a test id
#: (``acme/sql-shop::reference-scores-1``).
CHECKS: tuple[str, ...] = (
    "manifest-valid",
    "tasks-parse",
    "reference-scores-1",
    "noop-scores-below-1",
    "deterministic",
    "resets-isolate",
    "no-heldout-in-public-build",
    "canary-present",
)

#: Problems of the static validation that belong to ``tasks-parse`` although they are
#: reported on the manifest (a split's path, recorded rows or digest).
_TASK_CODES_ON_MANIFEST = frozenset({"bad-path", "rows-mismatch", "digest-mismatch"})
#: Self-test problem codes, by the check that reports them.
_SELF_TEST_CODES = {
    "reference-scores-1": "check-reference",
    "noop-scores-below-1": "check-noop",
    "deterministic": "check-deterministic",
    "resets-isolate": "check-reset",
}
#: Public files larger than this are compared with held-out files by digest only.
_SCAN_LIMIT = 256 * 1024 * 1024


@dataclass(frozen=True)
class Outcome:
    """What one check found: ``passed``, ``failed`` (with the problems) or ``skipped``
    (with the reason). ``warnings`` are problems worth showing that do not fail it."""

    status: Literal["passed", "failed", "skipped"]
    problems: list[Problem] = field(default_factory=list)
    reason: str = ""
    warnings: list[Problem] = field(default_factory=list)

    def render(self) -> str:
        """The problems as ``envhub validate`` prints them, one after another."""
        return "\n".join(p.render() for p in self.problems)


def _verdict(problems: list[Problem], warnings: list[Problem] | None = None) -> Outcome:
    errors = [p for p in problems if p.severity == "error"]
    return Outcome("failed" if errors else "passed", errors, warnings=warnings or [])


class Conformance:
    """The conformance checks of the bundle at ``root``.

    ``display`` is the bundle directory as the user knows it (problems name files under
    it); ``trust`` lets the environment's own code run (the dynamic checks need it when
    the bundle has code); ``limit`` caps the tasks the self-test plays per split;
    ``trust_hint`` says how to trust, in the words of the caller (a pytest option);
    ``context`` gives the settings and plugins (default: :meth:`Context.create` of the
    current environment).
    """

    def __init__(self, root: str | os.PathLike[str], *, display: str | None = None, trust: bool = False,
                 limit: int | None = None, trust_hint: str | None = None, context: Context | None = None) -> None:
        from envhub.context import Context

        self.context = context if context is not None else Context.create()
        self.root = Path(root)
        if display is None or not _same_directory(Path(display), self.root):
            display = os.fspath(root)
        #: The bundle directory as problems show it: validate_bundle names files under the
        #: path it is given, and so does every check here.
        self.display = Path(display).as_posix()
        self.trust = trust
        self.limit = limit
        self.trust_hint = trust_hint
        self.manifest_file = self._shown("envhub.toml")
        self._outcomes: dict[str, Outcome] = {}

    # -- what the checks share, computed once ---------------------------------------------

    @cached_property
    def static(self) -> BundleCheck:
        """``envhub validate`` of the bundle."""
        from envhub.bundle import validate_bundle

        return validate_bundle(Path(self.display), plugins=self.context.plugins)

    @cached_property
    def name(self) -> str | None:
        """The environment's name, if the manifest can be read."""
        from envhub.manifest import MANIFEST_FILENAME, parse_manifest

        try:
            manifest, _ = parse_manifest((self.root / MANIFEST_FILENAME).read_bytes(), plugins=self.context.plugins)
        except OSError:
            return None
        return manifest.environment.name if manifest is not None else None

    @property
    def statically_valid(self) -> bool:
        return self.static.manifest is not None and self.static.ok

    def _invalid(self) -> Outcome | None:
        """A skip when ``manifest-valid`` or ``tasks-parse`` failed (the run fails with them)."""
        failing = [c for c in ("manifest-valid", "tasks-parse") if self.run(c).status == "failed"]
        if failing:
            return Outcome("skipped", reason=f"the bundle is invalid: see {' and '.join(failing)}")
        return None

    @cached_property
    def environment(self) -> EnvironmentProtocol | Problem:
        """The loaded environment, or the problem that stopped it loading."""
        from envhub._load import load
        from envhub.errors import EnvhubError, TrustError

        try:
            return load(self.root, context=self.context, trust_code=self.trust)
        except TrustError as e:
            return Problem("error", "check-load", f"cannot load the environment: {e.message}",
                           file=self.manifest_file, hint=self.trust_hint or e.hint)
        except EnvhubError as e:
            return Problem("error", "check-load", f"cannot load the environment: {e.message}",
                           file=self.manifest_file, hint=e.hint)

    @cached_property
    def self_test(self) -> CheckResult | Problem:
        """``envhub validate --check`` of the bundle, or the problem that stopped it."""
        from envhub.runtime import self_test

        env = self.environment
        if isinstance(env, Problem):
            return env
        try:
            return self_test(env, limit=self.limit, manifest_file=self.manifest_file)
        except Exception as e:  # noqa: BLE001 - the bundle's code failed: report where
            return _crash_problem("the self-test stopped", e, self.manifest_file)

    def close(self) -> None:
        """Free the loaded environment's shared state (if it was loaded)."""
        env = self.__dict__.get("environment")
        if env is not None and not isinstance(env, Problem):
            env.close()

    # -- the checks -------------------------------------------------------------------------

    def run(self, check: str) -> Outcome:
        """The outcome of ``check`` (one of :data:`CHECKS`), computed once; KeyError for
        another name."""
        if check not in self._outcomes:
            if check not in CHECKS:
                raise KeyError(f"unknown conformance check {check!r}; checks: {', '.join(CHECKS)}")
            method: Callable[[], Outcome] = getattr(self, "_" + check.replace("-", "_"))
            self._outcomes[check] = method()
        return self._outcomes[check]

    def _is_task_problem(self, p: Problem) -> bool:
        if p.code == "symlink-escapes":
            return False
        if p.file != self.manifest_file:
            return True
        return p.code in _TASK_CODES_ON_MANIFEST and (p.field or "").startswith("tasks.splits.")

    def _manifest_valid(self) -> Outcome:
        problems = [p for p in self.static.problems if not self._is_task_problem(p) and p.code != "no-canary"]
        return _verdict(problems, [p for p in problems if p.severity == "warning"])

    def _tasks_parse(self) -> Outcome:
        problems = [p for p in self.static.problems if self._is_task_problem(p)]
        if self.static.manifest is None:
            return Outcome("skipped", reason="the manifest cannot be read: see manifest-valid")
        generated = [n for n, s in self.static.manifest.tasks.splits.items() if s.seeds is not None]  # sealed: absent
        if generated and not any(p.severity == "error" for p in problems):
            problems.extend(self._generated_tasks(generated))
        return _verdict(problems, [p for p in problems if p.severity == "warning"])

    def _generated_tasks(self, splits: list[str]) -> list[Problem]:
        """Generator splits have no file to scan: generate their tasks (the generator is code)."""
        env = self.environment
        if isinstance(env, Problem):
            return [env]
        from envhub.errors import EnvhubError

        problems = []
        for name in splits:
            try:
                from envhub.runtime import GENERATED_CHECK_LIMIT

                for _ in env.tasks(name, limit=self.limit if self.limit is not None else GENERATED_CHECK_LIMIT):
                    pass
            except EnvhubError as e:  # e.g. a plugin's generator that is not installed
                problems.append(Problem("error", "bad-generator", f"split {name!r}: {e.message}",
                                        file=self.manifest_file, field=f"tasks.splits.{name}", hint=e.hint))
            except Exception as e:  # noqa: BLE001 - the generator failed: report where
                problems.append(_crash_problem(f"split {name!r}: generating its tasks failed", e,
                                               self.manifest_file, field=f"tasks.splits.{name}"))
        return problems

    def _dynamic(self, check: str) -> Outcome:
        invalid = self._invalid()
        if invalid is not None:
            return invalid
        if check == "resets-isolate":
            state = self.static.manifest.state  # type: ignore[union-attr]
            if state.kind == "none" or state.reset != "per-episode":
                return Outcome("skipped", reason=f"no per-episode state to reset (state.kind = {state.kind!r}, "
                                                 f"reset = {state.reset!r})")
        result = self.self_test
        if isinstance(result, Problem):
            return Outcome("failed", [result])
        if result.tasks == 0:
            return Outcome("skipped", reason="no split has tasks in this copy of the bundle")
        if check in ("reference-scores-1", "deterministic") and result.with_reference == 0:
            warning = next(p for p in result.problems if p.code == "check-no-reference")
            return Outcome("skipped", reason=warning.message, warnings=[warning])
        return _verdict([p for p in result.problems if p.code == _SELF_TEST_CODES[check]])

    def _reference_scores_1(self) -> Outcome:
        return self._dynamic("reference-scores-1")

    def _noop_scores_below_1(self) -> Outcome:
        return self._dynamic("noop-scores-below-1")

    def _deterministic(self) -> Outcome:
        return self._dynamic("deterministic")

    def _resets_isolate(self) -> Outcome:
        return self._dynamic("resets-isolate")

    def _no_heldout_in_public_build(self) -> Outcome:
        if not self.statically_valid:
            return self._invalid() or Outcome("skipped", reason="the bundle is invalid: see manifest-valid")
        manifest = self.static.manifest
        assert manifest is not None
        held = {name: split for name, split in manifest.tasks.splits.items() if split.held_out and split.path}
        if not held:
            return Outcome("passed")
        from envhub.bundle import build_bundle

        facts = {s.name: s for s in self.static.splits}
        with tempfile.TemporaryDirectory(prefix="envhub-conformance-") as out:
            built = build_bundle(self.root, out, plugins=self.context.plugins)
            return _verdict(list(self._leaks(built.public.path, held, facts)))

    def _leaks(self, archive: Path, held: dict[str, Split], facts: dict[str, SplitFacts]) -> Iterator[Problem]:
        """Public files that are a held-out split's file, a copy of one, or contain its rows."""
        from envhub.bundle import RECORD, parse_record

        def leak(rel: str, message: str, line: int | None = None) -> Problem:
            return Problem("error", "heldout-leak", f"the public build {message}", file=self._shown(rel), line=line,
                           hint="delete the file or list it in .envhubignore: held-out tasks must reach only the "
                                "held-out archive")

        paths = {split.path: name for name, split in held.items()}
        digests = {f"sha256:{facts[n].sha256}": n for n in held if n in facts and facts[n].sha256}
        rows: dict[bytes, str] = {}  # each held-out JSONL row -> its split
        assert self.static.manifest is not None
        if self.static.manifest.tasks.format == "jsonl":
            for name, split in held.items():
                path = self.root / str(split.path)
                if path.is_file():
                    with path.open("rb") as f:
                        rows.update((line.strip(), name) for line in f if line.strip())
        with tarfile.open(archive) as tar:
            record_file = tar.extractfile(RECORD)
            assert record_file is not None
            for rel, (digest, size) in parse_record(record_file.read().decode("utf-8")).items():
                if rel in paths:
                    yield leak(rel, f"contains the file of held-out split {paths[rel]!r}")
                elif digest in digests:
                    name = digests[digest]
                    yield leak(rel, f"contains a copy of held-out split {name!r} ({held[name].path})")
                elif rows and size <= _SCAN_LIMIT and rel != "envhub.toml":
                    member = tar.extractfile(rel)
                    if member is None:
                        continue
                    found = [(n, rows[line.strip()]) for n, line in enumerate(member, 1) if line.strip() in rows]
                    if found:
                        line, name = found[0]
                        yield leak(rel, f"contains {len(found)} task(s) of held-out split {name!r} "
                                        f"({held[name].path}), the first at line {line}", line)

    def _shown(self, rel: str) -> str:
        return f"{self.display}/{rel}" if self.display not in ("", ".") else rel

    def _canary_present(self) -> Outcome:
        if self.static.manifest is None:
            return Outcome("skipped", reason="the manifest cannot be read: see manifest-valid")
        missing = [p for p in self.static.problems if p.code == "no-canary"]
        # The warning of `envhub validate` (file, field, a fresh canary in the hint) becomes an error.
        return _verdict([Problem("error", p.code, p.message, file=p.file, line=p.line, column=p.column,
                                 field=p.field, hint=p.hint) for p in missing])


def _same_directory(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _crash_problem(what: str, e: BaseException, manifest_file: str, *, field: str | None = None) -> Problem:
    """A problem for an exception raised by the bundle's code, naming the innermost frame
    outside envhub (the bundle's own line), not envhub's internals."""
    import envhub

    package = str(Path(envhub.__file__).parent)
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(package)]
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return Problem("error", "check-crashed", f"{what}: {type(e).__name__}: {e}{where}", file=manifest_file,
                   field=field, hint="fix the environment's code, then rerun; 'ENVHUB_DEBUG=1 envhub validate "
                                     "--check --trust' shows the whole traceback")
