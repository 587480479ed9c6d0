"""``envhub validate``: check a bundle directory against its manifest, gathering every
problem. Nothing here imports environment code."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub._templates import PromptTemplate, TemplateError
from envhub.bundle._golden import golden_problems
from envhub.bundle._paths import bundle_files, escaping_symlinks, resolve_inside
from envhub.manifest import (
    MANIFEST_FILENAME,
    CodeTests,
    ExactMatch,
    JsonMatch,
    LlmJudge,
    Manifest,
    Numeric,
    RegexMatch,
    Rubric,
    Split,
    WorkspaceTests,
    local_dependency_problems,
    locate,
    parse_manifest,
    split_base,
)
from envhub.problems import Problem
from envhub.tasks import (
    DEFAULT_MAX_LINE_BYTES,
    IdSource,
    Needle,
    PublicFile,
    SecretError,
    TaskIds,
    distinctive,
    duplicate_id_problems,
    find_leaks,
    read_secret,
    regenerating_scripts,
    scan_jsonl,
    scan_parquet,
    scan_rows,
)

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup

__all__ = ["BundleCheck", "SplitFacts", "validate_bundle"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass
class SplitFacts:
    name: str
    held_out: bool
    rows: int | None = None
    sha256: str | None = None

    @classmethod
    def recorded(cls, name: str, split: Split) -> SplitFacts:
        """What the manifest itself says: recorded rows and digest, or the size of a
        generator's seed range."""
        rows = split.rows if split.seeds is None else split.seeds[1] - split.seeds[0]
        return cls(name, split.held_out, rows, split.sha256)


@dataclass
class BundleCheck:
    """The outcome of validating one bundle directory."""

    path: Path
    manifest: Manifest | None
    problems: list[Problem] = field(default_factory=list)
    splits: list[SplitFacts] = field(default_factory=list)
    #: What ``--check`` played: tasks, tasks with a reference, episodes (None: not run).
    self_test: dict[str, int] | None = None

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def to_dict(self) -> dict[str, object]:
        env = self.manifest.environment if self.manifest else None
        return {
            "path": str(self.path),
            "name": env.name if env else None,
            "version": env.version if env else None,
            "ok": self.ok,
            "splits": [vars(s) for s in self.splits],
            **({"self_test": self.self_test} if self.self_test is not None else {}),
        }


def validate_bundle(path: str | Path, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                    plugins: PluginLookup) -> BundleCheck:
    """Validate the bundle at ``path`` (a directory, or its ``envhub.toml``). Names that are
    not built in (a plugin's verifier kind, task format, ...) are checked against ``plugins``
    (:func:`envhub.context.make_plugin_manager` makes one); a plugin's task format reads its files."""
    path = Path(path)
    root = path.parent if path.name == MANIFEST_FILENAME and path.is_file() else path
    manifest_path = root / MANIFEST_FILENAME
    display_root = root.as_posix()

    def shown(rel: str) -> str:
        return f"{display_root}/{rel}" if display_root not in ("", ".") else rel

    manifest_file = shown(MANIFEST_FILENAME)
    try:
        is_dir = root.is_dir()
    except OSError:  # a name the file system cannot hold (too long): no such directory either
        is_dir = False
    if not is_dir:
        problem = Problem("error", "not-found", "no such directory", file=str(path),
                          hint="pass a bundle directory (one with an envhub.toml)")
        return BundleCheck(root, None, [problem])
    try:
        source = manifest_path.read_bytes()
    except FileNotFoundError:
        problem = Problem("error", "no-manifest", f"no {MANIFEST_FILENAME} in this directory", file=str(root),
                          hint=f"run 'envhub init NAMESPACE/NAME {root}' to create one")
        return BundleCheck(root, None, [problem])
    manifest, problems = parse_manifest(source, file=manifest_file, plugins=plugins)
    check = BundleCheck(root, manifest, problems)
    if manifest is None:
        return check
    text = source.decode("utf-8")

    def at(field: str, *loc: str | int) -> dict[str, object]:
        position = locate(text, loc)
        return {"file": manifest_file, "field": field,
                "line": position[0] if position else None, "column": position[1] if position else None}

    check.problems.extend(_referenced_files(root, manifest, at, shown))
    check.problems.extend(local_dependency_problems(manifest, root, file=manifest_file, plugins=plugins)[1])
    for rel, target in escaping_symlinks(root):
        check.problems.append(Problem("error", "symlink-escapes", f"symlink leaves the bundle (it points to {target})",
                                      file=shown(rel), hint="copy the file into the bundle instead of linking to it"))
    check.problems.extend(_splits(root, manifest, check, shown, at, max_line_bytes, plugins))
    if check.ok:
        check.problems.extend(_sandbox_problems(root, manifest, at, plugins))
    keys = dict(_secrets(root, manifest, check, at))
    if check.ok:
        check.problems.extend(_heldout_leaks(root, manifest, keys, shown, plugins))
    check.problems.extend(golden_problems(root, manifest, shown, at))
    check.problems.extend(_warnings(manifest, at))
    return check


def _secrets(root: Path, m: Manifest, check: BundleCheck, at) -> Iterator[tuple[str, bytes]]:  # type: ignore[no-untyped-def]
    """Each held-out generator split's key, read from its ``secret`` file; a missing or
    malformed file is an error naming the file, the field and the fix."""
    for name, split in m.tasks.splits.items():
        if split.secret is None or split.seed_space is None:
            continue
        field = f"tasks.splits.{name}.secret"
        target, why = resolve_inside(root, split.secret)
        if why is None:
            try:
                yield name, read_secret(target)
                continue
            except SecretError as e:
                why = str(e)
        code = "missing-secret" if why == "not found" else "bad-secret"
        hint = (f"create it with 'envhub secret {(root / split.secret).as_posix()}' (a random 256-bit key), "
                "and keep it out of version control if the bundle's source is private")
        check.problems.append(Problem("error", code, f"secret file {split.secret!r} {why}", hint=hint,
                                      **at(field, "tasks", "splits", name, "secret")))


def _heldout_leaks(root: Path, m: Manifest, keys: dict[str, bytes], shown,  # type: ignore[no-untyped-def]
                   plugins: PluginLookup) -> list[Problem]:
    """Held-out prompts, rows, distinctive answers and keys found in files the public archive
    would hold (errors), and public scripts that could make a held-out file again (warnings)."""
    splits = m.tasks.splits
    heldout_files = {s.path: n for n, s in splits.items() if s.held_out and s.path is not None
                     and (root / s.path).is_file()}
    private = set(heldout_files) | {s.secret for s in splits.values() if s.secret is not None}
    snapshot = m.state.snapshot.rstrip("/") if m.state.snapshot else None
    public = [PublicFile(shown(rel), root / rel,
                         snapshot is not None and (rel == snapshot or rel.startswith(snapshot + "/")))
              for rel in bundle_files(root) if rel not in private]
    fields = _answer_fields(m)
    prompt_field = m.tasks.prompt_field
    # What a public split also has (a prompt shared by every task, a common answer) is not
    # held-out text, unless a public task is the held-out task itself (the same row but its id).
    common: set[str] = set()
    public_tasks: set[bytes] = set()
    for split in splits.values():
        if not split.held_out and split.path is not None and (root / split.path).is_file():
            for row, _ in _rows(root / split.path, m.tasks.format, plugins):
                common.update(t for t in (distinctive(row.get(f)) for f in (prompt_field, *fields)) if t)
                public_tasks.add(_task_key(row, m.tasks.id_field))
    needles: list[Needle] = []
    for path, name in heldout_files.items():
        for row, raw in _rows(root / path, m.tasks.format, plugins):
            task_id = str(row.get(m.tasks.id_field))
            shared = common if _task_key(row, m.tasks.id_field) not in public_tasks else set()
            prompt = distinctive(row.get(prompt_field))
            if prompt is not None and prompt not in shared:
                needles.append(Needle(prompt, "prompt", name, task_id))
            for f in fields:
                answer = distinctive(row.get(f))
                if answer is not None and answer not in shared:
                    needles.append(Needle(answer, "answer", name, task_id))
            if raw is not None:
                needles.append(Needle(raw, "row", name, task_id))
    needles.extend(Needle(key.hex(), "key", name) for name, key in keys.items())
    # A script can only make a held-out file again if there is one; a generator's held-out
    # split is checked by its form (a public seed range warns, a secret does not).
    scripts = regenerating_scripts(public, heldout_files) if heldout_files else []
    return [*find_leaks(public, needles), *scripts]


def _task_key(row: dict[str, Any], id_field: str) -> bytes:
    """What makes two rows the same task: every field but the id."""
    import orjson

    return orjson.dumps({k: v for k, v in row.items() if k != id_field}, option=orjson.OPT_SORT_KEYS)


def _answer_fields(m: Manifest) -> list[str]:
    """The task fields holding what a verifier compares against: the answers."""
    verifiers = m.verifier.criteria if isinstance(m.verifier, Rubric) else [m.verifier] if m.verifier else []
    out = []
    for v in verifiers:
        if isinstance(v, (ExactMatch, Numeric, JsonMatch)):
            out.append(v.field)
        elif isinstance(v, CodeTests):
            out.append(v.tests_field)
        elif isinstance(v, RegexMatch) and v.pattern_field:
            out.append(v.pattern_field)
        elif isinstance(v, WorkspaceTests) and v.tests_field:
            out.append(v.tests_field)
    return list(dict.fromkeys(out))


def _workspace_tests(m: Manifest) -> list[tuple[str, tuple[str | int, ...], WorkspaceTests]]:
    """(field, location, spec) of each workspace-tests verifier or criterion."""
    if isinstance(m.verifier, Rubric):
        return [(f"verifier.criteria[{i}]", ("verifier", "criteria", i), c) for i, c in enumerate(m.verifier.criteria)
                if isinstance(c, WorkspaceTests)]
    return [("verifier", ("verifier",), m.verifier)] if isinstance(m.verifier, WorkspaceTests) else []


def _sandbox_problems(root: Path, m: Manifest, at, plugins: PluginLookup) -> Iterator[Problem]:  # type: ignore[no-untyped-def]
    """State kind sandbox and workspace-tests: each task's directory and tests are there, and
    no test is where the agent's workspace comes from (the snapshot, a task directory)."""
    s = m.state
    tests = _workspace_tests(m)
    for field_name, loc, v in tests:
        target, why = resolve_inside(root, v.tests_directory)
        if why is None and not target.is_dir():
            why = "is not a directory (workspace-tests reads each task's tests from it)"
        if why is not None:
            yield Problem("error", "bad-path", f"{v.tests_directory!r} {why}",
                          hint="create it, or set tests-directory", **at(f"{field_name}.tests-directory", *loc))
    if s.kind != "sandbox" or (s.task_directory is None and not tests):
        return
    tests_dirs = [(root / v.tests_directory).resolve() for _, _, v in tests]
    seen = 0
    for split in m.tasks.splits.values():
        if split.path is None or m.tasks.format not in ("jsonl", "parquet"):
            continue
        target, why = resolve_inside(root, split.path)
        if why is not None or not target.is_file():
            continue
        for row, _ in _rows(target, m.tasks.format, plugins):
            task_id = str(row.get(m.tasks.id_field))
            problems = _sandbox_task(root, m, task_id, row, tests, tests_dirs, at)
            if split.held_out:
                problems = itertools.chain(problems, _held_out_task_files(m, task_id, row, tests, at))
            for problem in problems:
                if seen < 10:
                    yield problem
                seen += 1
    if seen > 10:
        yield Problem("error", "sandbox-tasks", f"... and {seen - 10} more problems with tasks' directories and tests",
                      **at("state", "state"))


def _sandbox_task(root: Path, m: Manifest, task_id: str, row: dict[str, Any],  # type: ignore[no-untyped-def]
                  tests: list[tuple[str, tuple[str | int, ...], WorkspaceTests]], tests_dirs: list[Path],
                  at) -> Iterator[Problem]:
    s = m.state
    if s.task_directory is not None:
        rel = s.task_directory.replace("{id}", task_id)
        target, why = resolve_inside(root, rel)
        if "/" in task_id or task_id in (".", ".."):
            why = "is not a directory of its own (the task's id is not a plain name)"
        elif why is None and not target.is_dir():
            why = "is not a directory"
        if why is not None:
            yield Problem("error", "bad-path", f"task {task_id!r}: its task directory {rel!r} {why}",
                          hint="create it, or fix task-directory", **at("state.task-directory", "state",
                                                                        "task-directory"))
        else:
            for tests_dir in tests_dirs:
                if tests_dir.is_relative_to(target):
                    yield Problem("error", "tests-in-workspace",
                                  f"task {task_id!r}: its task directory {rel!r} holds the tests directory, so the "
                                  "agent could read the tests",
                                  hint="keep the tests out of every directory copied into the workspace",
                                  **at("state.task-directory", "state", "task-directory"))
    for field_name, loc, v in tests:
        value: Any = task_id if v.tests_field is None else row.get(v.tests_field)
        if isinstance(value, dict):
            if not all(isinstance(k, str) and isinstance(t, str) for k, t in value.items()):
                yield Problem("error", "bad-tests", f"task {task_id!r}: its inline tests are not a table of "
                              "path to text", **at(f"{field_name}.tests-field", *loc, "tests-field"))
            continue
        if not isinstance(value, str) or "/" in value or value in ("", ".", ".."):
            yield Problem("error", "bad-tests", f"task {task_id!r}: its tests {value!r} name no directory of "
                          f"{v.tests_directory!r}", hint="give the name of a directory under tests-directory, "
                          "or the tests inline as a table", **at(field_name, *loc))
            continue
        target, why = resolve_inside(root, f"{v.tests_directory}/{value}")
        if why is None and not target.is_dir():
            why = "is not a directory"
        if why is not None:
            yield Problem("error", "bad-tests", f"task {task_id!r}: its tests {v.tests_directory}/{value} {why}",
                          hint="create the directory with the task's tests", **at(field_name, *loc))


def _held_out_task_files(m: Manifest, task_id: str, row: dict[str, Any],  # type: ignore[no-untyped-def]
                         tests: list[tuple[str, tuple[str | int, ...], WorkspaceTests]], at) -> Iterator[Problem]:
    """A held-out task whose tests or starting directory are directories of the bundle: they
    would be published in the public archive (only the task rows of a held-out split go to the
    held-out archive), and a published test tells what the held-out task asks."""
    if m.state.task_directory is not None:
        rel = m.state.task_directory.replace("{id}", task_id)
        yield Problem("error", "heldout-leak", f"held-out task {task_id!r}: its task directory {rel!r} is a directory "
                      "of the bundle, and would be published with it",
                      hint="give held-out tasks their starting files in their rows (files-field), which stay in the "
                           "held-out archive", **at("state.task-directory", "state", "task-directory"))
    for field_name, loc, v in tests:
        value = task_id if v.tests_field is None else row.get(v.tests_field)
        if not isinstance(value, dict):
            yield Problem("error", "heldout-leak", f"held-out task {task_id!r}: its tests {v.tests_directory}/{value} "
                          "are a directory of the bundle, and would be published with it",
                          hint="give held-out tasks their tests inline in their rows (a table of path to text in the "
                               "tests-field), which stay in the held-out archive", **at(field_name, *loc))


def _rows(path: Path, format: str, plugins: PluginLookup) -> Iterator[tuple[dict[str, Any], str | None]]:
    """The rows of a task file that validated, each with its JSONL line (None for other formats)."""
    if format == "jsonl":
        import orjson

        with path.open("rb") as f:
            for line in f:
                if line.strip():
                    row = orjson.loads(line)
                    yield row, line.decode("utf-8").strip()
        return
    if format == "parquet":
        import pyarrow.parquet as pq

        for row in pq.read_table(path).to_pylist():
            yield row, None
        return
    found = plugins.lookup("task_formats", format)
    if found is not None and found.read is not None:
        for row in found.read(path):
            yield dict(row), None


def _referenced_files(root: Path, m: Manifest, at, shown) -> Iterator[Problem]:  # type: ignore[no-untyped-def]
    """Files named by the manifest (other than task files) exist, inside the bundle; prompt
    templates also compile (a syntax error names the manifest field, the file and its line)."""
    refs: list[tuple[str, tuple[str | int, ...], str, str]] = []  # field, loc, path, expected kind
    if m.harness.system_prompt:
        refs.append(("harness.system-prompt", ("harness", "system-prompt"), m.harness.system_prompt, "file"))
    for key in ("system-prompt-template", "prompt-template"):
        template = getattr(m.harness, key.replace("-", "_"))
        if template:
            refs.append((f"harness.{key}", ("harness", key), template, "template"))
    if m.state.snapshot:
        # A plugin's state kind says nothing about what its snapshot is: it must exist.
        kind = {"files": "dir", "sqlite": "sqlite", "sandbox": "dir"}.get(m.state.kind, "any")
        refs.append(("state.snapshot", ("state", "snapshot"), m.state.snapshot, kind))
    if m.state.base not in (None, "host") and split_base(m.state.base) is None:  # a bundle file, not SCHEME:REF
        assert m.state.base is not None
        refs.append(("state.base", ("state", "base"), m.state.base, "tar"))
    verifiers = m.verifier.criteria if isinstance(m.verifier, Rubric) else [m.verifier] if m.verifier else []
    for i, v in enumerate(verifiers):
        if isinstance(v, LlmJudge):
            in_rubric = isinstance(m.verifier, Rubric)
            loc: tuple[str | int, ...] = ("verifier", "criteria", i) if in_rubric else ("verifier",)
            field = f"verifier.criteria[{i}]" if in_rubric else "verifier"
            if v.rubric:
                refs.append((f"{field}.rubric", (*loc, "rubric"), v.rubric, "file"))
            if v.prompt_template:
                refs.append((f"{field}.prompt-template", (*loc, "prompt-template"), v.prompt_template, "template"))
    for field_name, loc, rel, kind in refs:
        target, why = resolve_inside(root, rel)
        if why is None:
            if kind == "dir" and not target.is_dir():
                why = f"is not a directory (state kind {m.state.kind!r} copies a directory)"
            elif kind == "tar" and not (target.is_file() and _is_tar(target)):
                why = "is not a tar archive (a root filesystem: tar, tar.gz)"
            elif kind == "any" and not target.exists():
                why = "not found"
            elif kind not in ("dir", "any", "tar") and not target.is_file():
                why = "is not a file"
            elif kind == "sqlite" and target.read_bytes()[:16] != _SQLITE_MAGIC:
                why = "is not an SQLite database"
        if why is not None:
            hint = "create it, or fix the path (relative to envhub.toml)" if why == "not found" else None
            yield Problem("error", "bad-path", f"{rel!r} {why}", hint=hint, **at(field_name, *loc))
        elif kind == "template":
            yield from _template_problems(target, rel, field_name, shown)


def _template_problems(path: Path, rel: str, field: str, shown) -> Iterator[Problem]:  # type: ignore[no-untyped-def]
    """A prompt template that does not compile, at its own file and line."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        yield Problem("error", "bad-template", f"cannot be read as UTF-8 text: {e}", file=shown(rel), field=field,
                      hint="a prompt template is a UTF-8 text file")
        return
    try:
        PromptTemplate(source, name=rel, field=field)
    except TemplateError as e:
        yield Problem("error", "bad-template", f"not a valid prompt template: {e.reason}", file=shown(rel),
                      line=e.line, field=field, hint=e.hint)


def _is_tar(path: Path) -> bool:
    import tarfile

    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def _required_fields(m: Manifest) -> tuple[list[str], list[str]]:
    fields = [m.tasks.prompt_field]
    if m.state.kind == "sandbox":
        fields += [f for f in (m.state.files_field, m.state.setup_field) if f]
    numeric = []
    if m.tasks.difficulty_field:
        fields.append(m.tasks.difficulty_field)
        numeric.append(m.tasks.difficulty_field)
    return list(dict.fromkeys([*fields, *_answer_fields(m)])), numeric


def _splits(root: Path, m: Manifest, check: BundleCheck, shown, at, max_line_bytes: int,  # type: ignore[no-untyped-def]
            plugins: PluginLookup) -> Iterator[Problem]:
    fields, numeric = _required_fields(m)
    prompt = m.tasks.prompt_field
    read = None
    if m.tasks.format not in ("jsonl", "parquet") and any(s.path for s in m.tasks.splits.values()):
        found = plugins.lookup("task_formats", m.tasks.format)  # the manifest check found it
        read = found.read if found is not None else None
    task_ids = TaskIds()  # ids are unique within and across splits
    sources: list[IdSource] = []
    for name, split in m.tasks.splits.items():
        facts = SplitFacts.recorded(name, split)
        check.splits.append(facts)
        if split.path is None:  # generator splits: nothing to read without running code
            continue
        where = at(f"tasks.splits.{name}.path", "tasks", "splits", name, "path")
        target, why = resolve_inside(root, split.path)
        if why is None and not target.is_file():
            why = "is not a file"
        if why is not None:
            if split.held_out and why == "not found" and split.rows is not None and split.sha256:
                # A built bundle: the held-out file was moved to the private store, and
                # the manifest records its count and digest instead.
                continue
            hint = f"create {split.path}, or fix the path (relative to envhub.toml)" if why == "not found" else None
            yield Problem("error", "bad-path", f"task file {split.path!r} {why}", hint=hint, **where)
            continue
        display = shown(split.path)
        if read is not None:
            scan = scan_rows(target, read, display=display, id_field=m.tasks.id_field, fields=fields,
                             numeric_fields=numeric, prompt_field=prompt, task_ids=task_ids)
        elif m.tasks.format == "parquet":
            scan = scan_parquet(target, display=display, id_field=m.tasks.id_field, fields=fields,
                                numeric_fields=numeric, prompt_field=prompt, task_ids=task_ids)
        else:
            scan = scan_jsonl(target, display=display, id_field=m.tasks.id_field, fields=fields, numeric_fields=numeric,
                              prompt_field=prompt, max_line_bytes=max_line_bytes, task_ids=task_ids)
        sources.append(IdSource(name, target, display, m.tasks.format, read))
        facts.rows, facts.sha256 = scan.rows, scan.sha256
        yield from scan.problems
        if scan.rows == 0 and not scan.problems:
            yield Problem("error", "empty-split", f"split {name!r} has no tasks", file=display,
                          hint="add tasks to the file, or remove the split")
        if split.rows is not None and split.rows != scan.rows:
            yield Problem("error", "rows-mismatch",
                          f"the manifest records rows = {split.rows}, but the file has {scan.rows}",
                          hint="update or remove 'rows'",
                          **at(f"tasks.splits.{name}.rows", "tasks", "splits", name, "rows"))
        if split.sha256 is not None and split.sha256 != scan.sha256:
            yield Problem("error", "digest-mismatch",
                          f"the manifest records sha256 = {split.sha256[:12]}..., "
                          f"but the file's is {scan.sha256[:12]}...",
                          hint="the file changed since it was recorded: update or remove 'sha256'",
                          **at(f"tasks.splits.{name}.sha256", "tasks", "splits", name, "sha256"))
    if task_ids.repeated:
        yield from duplicate_id_problems(sources, m.tasks.id_field)


def _warnings(m: Manifest, at) -> Iterator[Problem]:  # type: ignore[no-untyped-def]
    def warning(code: str, message: str, hint: str, field: str, *loc: str) -> Problem:
        return Problem("warning", code, message, hint=hint, **at(field, *loc))

    splits = m.tasks.splits
    public = [n for n, s in splits.items() if not s.held_out]
    if not public:
        yield warning("only-held-out", "every split is held out, so nothing can be trained or evaluated in the open",
                      "add a public split (e.g. train) or set held-out = false on one",
                      "tasks.splits", "tasks", "splits")
    if len(splits) > 1 and len(public) == len(splits):
        yield warning("no-held-out", "no split is held out, so every evaluation set is public",
                      "mark the test split held-out = true", "tasks.splits", "tasks", "splits")
    for name, split in splits.items():
        if m.tasks.format != "generator" or not split.held_out or split.seed_space is not None:
            continue
        where = (f"tasks.splits.{name}", "tasks", "splits", name)
        fix = (f'draw them from a secret: replace seeds with seed-space = [lo, hi), rows = N and secret = '
               f'"secrets/{name}.key" (create it with \'envhub secret secrets/{name}.key\')')
        if split.seeds is not None:
            yield warning("public-seed-range",
                          f"held-out split {name!r} makes its tasks from the seed range {split.seeds}: whoever guesses "
                          "the range (the public digest of the built bundle confirms a guess) makes them again",
                          fix, *where)
        else:
            yield warning("public-seed-range",
                          f"held-out split {name!r} was built from a seed range, which its public digest lets anyone "
                          "search for and then make the tasks again",
                          "publish a new version whose source " + fix.replace("draw them", "draws them"), *where)
    if m.environment.canary is None:
        yield warning("no-canary", "no canary: contamination of training sets cannot be detected",
                      f"add canary = \"envhub-canary:{secrets.token_hex(16)}\" to [environment]",
                      "environment.canary", "environment")
    if not m.environment.description:
        yield warning("no-description", "no description", "add description = \"...\" to [environment]",
                      "environment.description", "environment")
