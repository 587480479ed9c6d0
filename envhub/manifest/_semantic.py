"""Checks that relate manifest fields to each other (per-field checks are in the models)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from envhub.manifest._models import (
    HARNESS_PROTOCOLS,
    LlmJudge,
    Manifest,
    RegexMatch,
    Rubric,
    Split,
    WorkspaceTests,
)
from envhub.problems import Problem


def _error(field: str, message: str, hint: str | None = None) -> Problem:
    return Problem(severity="error", code="inconsistent", message=message, field=field, hint=hint)


def semantic_problems(m: Manifest) -> Iterator[Problem]:
    """Yield every cross-field problem of a manifest that passed per-field validation."""
    yield from _tasks(m)
    yield from _harness(m)
    yield from _composite(m)
    yield from _verifier(m)
    yield from _state(m)
    yield from _config(m)
    for name in m.dependencies:
        if name == m.environment.name:
            yield _error(f'dependencies."{name}"', "an environment cannot depend on itself")


def _tasks(m: Manifest) -> Iterator[Problem]:
    t = m.tasks
    generated = t.format == "generator"
    if generated and t.generator is None:
        yield _error(
            "tasks.generator",
            "format = 'generator' needs a generator entry point",
            "add generator = 'module:function' to [tasks]",
        )
    if not generated and t.generator is not None:
        yield _error(
            "tasks.generator",
            f"a generator is only used with format = 'generator', not {t.format!r}",
            "remove it, or set format = 'generator'",
        )
    if t.difficulty_levels is not None:
        levels = t.difficulty_levels
        if not generated:
            yield _error("tasks.difficulty-levels",
                         f"difficulty-levels are only used with format = 'generator', not {t.format!r}",
                         "remove them: a task file's difficulty-field gives each task's level")
        elif any(a >= b for a, b in itertools.pairwise(levels)):
            yield _error("tasks.difficulty-levels", f"difficulty levels must increase (easiest first), got {levels}",
                         "list each level once, in increasing order")
    seen_paths: dict[str, str] = {}
    for name, split in t.splits.items():
        field = f"tasks.splits.{name}"
        if t.format == "mixture":
            yield from _mixture_split(m, name, field)
            continue
        if split.mixture is not None or split.size is not None:
            key = "mixture" if split.mixture is not None else "size"
            yield _error(f"{field}.{key}", f"{key} is only used with format = 'mixture', not {t.format!r}",
                         f"remove {key}, or set format = 'mixture'")
        if generated:
            # A built bundle's held-out split keeps its seed range in the private store and
            # records only rows and sha256 (section 9.1).
            sealed = split.held_out and split.rows is not None and split.sha256 is not None
            if split.seeds is None and split.seed_space is None and not sealed:
                yield _error(f"{field}.seeds", "generator splits need a seed range", "add seeds = [start, stop]")
            if split.path is not None:
                yield _error(f"{field}.path", "generator splits take seeds, not a path", "remove path")
            yield from _keyed_split(t.splits, name, field)
        else:
            if split.path is None:
                yield _error(
                    f"{field}.path",
                    f"missing required key 'path' for a {t.format} split",
                    f"add path = 'tasks/{name}.{t.format}'",
                )
            elif split.path in seen_paths:
                yield _error(
                    f"{field}.path",
                    f"split {name!r} uses the same file as split {seen_paths[split.path]!r}",
                    "give each split its own file",
                )
            else:
                seen_paths[split.path] = name
            if split.seeds is not None:
                yield _error(f"{field}.seeds", "seeds are only used with format = 'generator'", "remove seeds")
            for key, value in (("seed-space", split.seed_space), ("secret", split.secret)):
                if value is not None:
                    yield _error(f"{field}.{key}", f"{key} is only used with format = 'generator', not {t.format!r}",
                                 f"remove {key}")
        if split.seeds is not None and (len(split.seeds) != 2 or split.seeds[0] >= split.seeds[1]):
            yield _error(
                f"{field}.seeds",
                f"expected [start, stop] with start < stop, got {split.seeds}",
            )


def _keyed_split(splits: dict[str, Split], name: str, field: str) -> Iterator[Problem]:
    """The rules of a generator split drawn from a secret (``seed-space``, section 9.1)."""
    split = splits[name]
    if split.seed_space is None:
        if split.secret is not None:
            yield _error(f"{field}.secret", "a secret is only used with seed-space",
                         "remove secret, or draw the split's seeds from seed-space = [lo, hi) with rows = N")
        return
    if split.seeds is not None:
        yield _error(f"{field}.seed-space", "a split takes seeds or seed-space, not both",
                     "keep seed-space (with rows and secret) for a held-out split, seeds for a public one")
    if not split.held_out:
        yield _error(f"{field}.seed-space", "seed-space is only used by held-out splits",
                     "set held-out = true, or give a public split seeds = [start, stop]")
    if split.rows is None:
        yield _error(f"{field}.rows", "a seed-space split needs rows, the number of tasks drawn from it",
                     "add rows = N")
    if split.secret is None and split.sha256 is None:
        yield _error(f"{field}.secret", "a seed-space split needs a secret, the file holding its key",
                     f'add secret = "secrets/{name}.key" and create the file with \'envhub secret secrets/{name}.key\'')
    space = split.seed_space
    if len(space) != 2 or space[0] >= space[1]:
        yield _error(f"{field}.seed-space", f"expected [lo, hi] with lo < hi, got {space}")
        return
    lo, hi = space
    if split.rows is not None and hi - lo < split.rows:
        yield _error(f"{field}.seed-space",
                     f"seed-space [{lo}, {hi}) holds {hi - lo} seeds, fewer than rows = {split.rows}",
                     "widen seed-space or lower rows")
    for other, o in splits.items():
        if other == name:
            continue
        if o.seed_space is not None and list(splits).index(other) > list(splits).index(name):
            continue  # two seed-space splits that overlap: reported once, at the later one
        theirs = o.seed_space if o.seed_space is not None else o.seeds
        if theirs is None or len(theirs) != 2 or theirs[0] >= theirs[1]:
            continue
        if lo < theirs[1] and theirs[0] < hi:
            key = "seed-space" if o.seed_space is not None else "seeds"
            yield _error(f"{field}.seed-space",
                         f"seed-space [{lo}, {hi}) overlaps the {key} [{theirs[0]}, {theirs[1]}) of split {other!r}",
                         "draw held-out seeds from a space no other split uses")


def _mixture_split(m: Manifest, name: str, field: str) -> Iterator[Problem]:
    split = m.tasks.splits[name]
    if split.mixture is None:
        yield _error(f"{field}.mixture", "a mixture split needs its components",
                     'add mixture = [{ env = "acme/other", split = "train", weight = 1.0 }]')
    for key in ("path", "seeds", "seed-space", "secret", "rows", "sha256"):
        if getattr(split, key.replace("-", "_")) is not None:
            yield _error(f"{field}.{key}", f"a mixture split takes its tasks from its dependencies, not {key}",
                         f"remove {key}")
    seen: set[tuple[str, str]] = set()
    for i, part in enumerate(split.mixture or []):
        where = f"{field}.mixture[{i}]"
        if part.env not in m.dependencies:
            yield _error(f"{where}.env", f"{part.env} is not in [dependencies]",
                         f'add "{part.env}" = ">=1.0" (a version specifier) to [dependencies]')
        if (part.env, part.split) in seen:
            yield _error(where, f"{part.env} split {part.split!r} is listed twice", "merge the two weights")
        seen.add((part.env, part.split))


def _harness(m: Manifest) -> Iterator[Problem]:
    h = m.harness
    if h.protocol in HARNESS_PROTOCOLS:  # a plugin's protocol: envhub.manifest._plugins checks it
        yield from _builtin_protocol(m)
    if h.context == "recent-turns" and h.keep_turns is None:
        yield _error("harness.keep-turns", "context = 'recent-turns' needs keep-turns", "add keep-turns = N")
    if h.context != "recent-turns" and h.keep_turns is not None:
        yield _error("harness.keep-turns", "keep-turns is only used with context = 'recent-turns'",
                     "remove keep-turns, or set context = 'recent-turns'")
    if h.builtin_tools:
        yield from _builtin_tools(m)
    if h.system_prompt is not None and h.system_prompt_template is not None:
        yield _error("harness.system-prompt-template", "system-prompt and system-prompt-template are both set",
                     "keep one: a template with no {{ }} in it is plain text")
    yield from _mcp_servers(m)
    if h.protocol == "single-turn" and h.task_fields.max_turns is not None:
        yield _error("harness.task-fields.max-turns", "protocol 'single-turn' has exactly one turn, so a task "
                     "cannot set its own turn limit", "remove task-fields.max-turns, or use protocol 'multi-turn'")


def _mcp_servers(m: Manifest) -> Iterator[Problem]:
    names: set[str] = set()
    for i, server in enumerate(m.harness.mcp_servers):
        field = f"harness.mcp-servers[{i}]"
        if (server.command is None) == (server.url is None):
            yield _error(field, "an MCP server needs exactly one of 'command' (stdio) and 'url' (streamable HTTP)")
        if server.url is not None and server.env:
            yield _error(f"{field}.env", "env is only used by a stdio server (command)", "remove env")
        if server.name in names:
            yield _error(f"{field}.name", f"MCP server name {server.name!r} is used twice",
                         "give each server its own name")
        names.add(server.name)


def _builtin_tools(m: Manifest) -> Iterator[Problem]:
    h = m.harness
    if h.protocol != "tool-use":
        yield _error("harness.builtin-tools", f"builtin-tools are only used by protocol 'tool-use', not {h.protocol!r}",
                     "set protocol = 'tool-use', or remove builtin-tools")
    if m.state.kind != "sandbox":
        yield _error("harness.builtin-tools", f"builtin-tools need state kind 'sandbox', not {m.state.kind!r}",
                     "set [state] kind = 'sandbox': the tools act on its workspace")
    seen: set[str] = set()
    for name in h.builtin_tools:
        if name in seen:
            yield _error("harness.builtin-tools", f"builtin tool {name!r} is listed twice", "list each tool once")
        seen.add(name)


def _builtin_protocol(m: Manifest) -> Iterator[Problem]:
    h = m.harness
    if h.protocol == "tool-use" and not (h.tools or h.builtin_tools or h.spec_tools or h.mcp_servers):
        yield _error("harness.tools", "protocol 'tool-use' needs at least one tool", "add tools = ['module:function']")
    for key in ("tools", "spec-tools", "mcp-servers"):
        if h.protocol != "tool-use" and getattr(h, key.replace("-", "_")):
            yield _error(f"harness.{key}", f"{key} are only used by protocol 'tool-use', not {h.protocol!r}",
                         f"set protocol = 'tool-use', or remove {key}")
    if h.protocol == "multi-turn" and h.responder is None:
        yield _error("harness.responder", "protocol 'multi-turn' needs a responder that answers the model each turn",
                     "add responder = 'module:function'")
    if h.protocol == "single-turn" and h.responder is not None:
        yield _error("harness.responder", "a responder is only used by protocols 'multi-turn' and 'tool-use', not "
                     "'single-turn'", "set protocol = 'multi-turn', or remove responder")
    if h.protocol == "single-turn" and h.max_turns not in (None, 1):
        yield _error("harness.max-turns", f"protocol 'single-turn' has exactly one turn, got max-turns = {h.max_turns}",
                     "remove max-turns, or use protocol 'multi-turn'")


def _composite(m: Manifest) -> Iterator[Problem]:
    """A mixture runs each task with its own environment's harness, verifier and state."""
    mixture = m.tasks.format == "mixture"
    if m.verifier is None and not mixture:
        yield Problem(severity="error", code="missing", message="missing required table [verifier]",
                      field="verifier", hint="add a [verifier] table")
    if not mixture:
        return
    for section in ("harness", "verifier", "state"):
        if section in m.model_fields_set:
            yield _error(section, f"a mixture takes [{section}] from each task's own environment",
                         f"remove [{section}]")
    if not m.dependencies:
        yield _error("dependencies", "format = 'mixture' mixes the splits of dependencies, and there are none",
                     'add [dependencies], e.g. "acme/other" = ">=1.0"')


def _verifier(m: Manifest) -> Iterator[Problem]:
    v = m.verifier
    if v is None:
        return
    if isinstance(v, Rubric):
        names: set[str] = set()
        for i, c in enumerate(v.criteria):
            if c.name in names:
                yield _error(f"verifier.criteria[{i}].name", f"criterion name {c.name!r} is used twice",
                             "give each criterion its own name")
            names.add(c.name)
            yield from _one_verifier(c, f"verifier.criteria[{i}]", m)
    else:
        yield from _one_verifier(v, "verifier", m)


def _one_verifier(v: object, field: str, m: Manifest) -> Iterator[Problem]:
    if isinstance(v, RegexMatch) and (v.pattern is None) == (v.pattern_field is None):
        yield _error(field, "a regex verifier needs exactly one of 'pattern' and 'pattern-field'")
    verdict = v.verdict if isinstance(v, LlmJudge) else None
    if verdict is not None and (verdict.regex is None) == (verdict.json_field is None):
        yield _error(f"{field}.verdict", "a verdict needs exactly one of 'regex' and 'json-field'")
    for label, reward in (verdict.labels.items() if verdict is not None else ()):
        if not 0.0 <= reward <= 1.0:
            yield _error(f"{field}.verdict.labels", f"label {label!r} gives reward {reward:g}, outside [0, 1]",
                         "a reward is in [0, 1]: 1 for a correct answer, 0 for a wrong one")
    if isinstance(v, WorkspaceTests):
        if m.state.kind != "sandbox":
            yield _error(field, f"verifier kind 'workspace-tests' needs state kind 'sandbox', not {m.state.kind!r}",
                         "set [state] kind = 'sandbox': the tests run against the episode's final workspace")
        snapshot = m.state.snapshot
        if snapshot is not None and _inside(v.tests_directory, snapshot):
            yield _error(f"{field}.tests-directory",
                         f"the tests directory {v.tests_directory!r} is inside the workspace's snapshot "
                         f"{snapshot!r}, where the agent could read the tests",
                         "keep the tests in a directory of their own, beside the snapshot")


def _inside(path: str, directory: str) -> bool:
    """Whether bundle path ``path`` is ``directory`` or inside it."""
    a, b = path.rstrip("/").split("/"), directory.rstrip("/").split("/")
    return a[:len(b)] == b


def _state(m: Manifest) -> Iterator[Problem]:
    s = m.state
    if s.kind in ("files", "sqlite") and s.snapshot is None:
        what = "a directory" if s.kind == "files" else "a database file"
        yield _error("state.snapshot", f"state kind {s.kind!r} needs a snapshot ({what})", "add snapshot = 'state/...'")
    if s.kind in ("none", "python") and s.snapshot is not None:
        yield _error("state.snapshot", f"state kind {s.kind!r} takes no snapshot",
                     "remove snapshot, or set kind = 'files' or 'sqlite'")
    if s.kind == "python" and s.entry_point is None:
        yield _error("state.entry-point", "state kind 'python' needs an entry point",
                     "add entry-point = 'module:function'")
    if s.kind != "python" and s.entry_point is not None:
        yield _error("state.entry-point", f"an entry point is only used by state kind 'python', not {s.kind!r}",
                     "remove entry-point")
    if s.snapshot_field is not None and s.kind not in ("files", "sqlite"):
        yield _error("state.snapshot-field", f"snapshot-field is only used by state kinds 'files' and 'sqlite', "
                                             f"not {s.kind!r}", "remove snapshot-field")
    if s.kind != "sandbox":
        for key in _SANDBOX_KEYS:
            if getattr(s, key.replace("-", "_")) is not None:
                yield _error(f"state.{key}", f"{key} is only used by state kind 'sandbox', not {s.kind!r}",
                             f"remove {key}, or set kind = 'sandbox'")
        return
    if s.reset != "per-episode":
        yield _error("state.reset", f"state kind 'sandbox' makes a fresh workspace for every episode, so reset "
                                    f"must be 'per-episode', not {s.reset!r}", "remove reset")
    if s.task_directory is not None and "{id}" not in s.task_directory:
        yield _error("state.task-directory", f"task-directory {s.task_directory!r} does not contain '{{id}}', "
                                             "so every task would get the same directory",
                     "write it with '{id}' where the task's id goes, e.g. 'tasks/{id}'")


#: The keys of [state] that only state kind sandbox takes.
_SANDBOX_KEYS = ("files-field", "task-directory", "setup", "setup-field", "network", "base", "limits")


def _config(m: Manifest) -> Iterator[Problem]:
    c = m.config.curriculum
    if c is None:
        return
    if c.strategy != "none" and m.tasks.difficulty_field is None and m.tasks.difficulty_levels is None:
        yield _error("config.curriculum.strategy", f"curriculum {c.strategy!r} needs tasks with a difficulty",
                     "add difficulty-field = 'difficulty' to [tasks] (or difficulty-levels, for a generator)")
    if c.demote_at is not None and c.demote_at >= c.promote_at:
        yield _error("config.curriculum.demote-at",
                     f"demote-at ({c.demote_at}) must be below promote-at ({c.promote_at})")
