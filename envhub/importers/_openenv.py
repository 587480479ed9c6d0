"""``envhub import openenv``: a bundle that runs an OpenEnv environment in the episode.

An OpenEnv environment is a Python package with a subclass of OpenEnv's ``Environment``
(``reset``, ``step``, ``state``) and pydantic action and observation types, served by a
FastAPI app in a Docker image. The bundle this writes runs the class itself, in the episode:

- state kind ``python``: ``envhub_openenv:OpenEnvState`` makes the environment and calls its
  ``reset`` with the task's ``reset`` keywords (its seed), and ``close`` when released;
- one tool, ``step(action)`` (``tools/step.json``, a spec tool): the action as a JSON object,
  validated into the environment's action type, then ``step``; it answers
  ``Reply(observation as JSON, reward=observation.reward, done=observation.done)``;
- verifier ``python``: ``envhub_openenv:score`` reads the rewards the episode gathered;
- tasks: ``tasks/<split>.jsonl``, one row per reset seed.

The source is read as text (``ast``), never imported: a source that is not an OpenEnv
environment is refused naming what is missing, and nothing is written. What cannot carry
over (the Docker image, the server's options, a web UI) is listed in the report.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envhub.canary import new_canary
from envhub.errors import UsageError
from envhub.ids import parse_name
from envhub.importers._options import choice, integer
from envhub.importers._report import CarriedOver
from envhub.importers._staging import check_destination, write_staged
from envhub.importers._terminal_bench import ImportSourceError
from envhub.problems import Problem

__all__ = ["OpenEnvImport", "import_openenv", "run_openenv"]

#: Files and directories never copied into the bundle's code.
_SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules",
              "build", "dist"}
_SKIP_SUFFIXES = (".pyc", ".egg-info")
#: JSON schema of simple annotations, for the step tool's action schema.
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array",
               "List": "array", "dict": "object", "Dict": "object", "tuple": "array", "Tuple": "array"}


@dataclass
class OpenEnvImport(CarriedOver):
    """The outcome of one OpenEnv import: the bundle written, what was kept and what was not."""

    source: Path
    out: Path
    name: str
    split: str
    environment: str
    action: str | None
    tasks: int
    kept: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """What was imported: ``"EchoEnvironment, 10 task(s)"``."""
        return f"{self.environment.rpartition(':')[2]}, {self.tasks} task(s)"

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (``envhub import --json``)."""
        return {"kind": "openenv", "name": self.name, "out": str(self.out), "split": self.split,
                "environment": self.environment, "action": self.action, "tasks": self.tasks, "kept": self.kept,
                "dropped": self.not_carried}

    def to_markdown(self) -> str:
        return self.markdown(
            f"Imported by `envhub import openenv` from `{self.source}`: the environment class "
            f"`{self.environment}` runs in each episode; {self.tasks} task(s) in split `{self.split}`, "
            f"{self.dropped} thing(s) not carried over. docs/importers.md explains the mapping.")


def run_openenv(source: Path, out: Path, options: Mapping[str, str]) -> OpenEnvImport:
    """:func:`import_openenv` with its arguments as ``envhub import`` options (``name``,
    ``split``, ``seeds``, ``reward``, ``max-turns``): the ``openenv`` importer's ``run``."""
    return import_openenv(source, out, name=options.get("name"), split=options.get("split", "test"),
                          seeds=integer(options, "seeds", 10, minimum=1, maximum=1_000_000),
                          reward=choice(options, "reward", "sum", ("sum", "last")),
                          max_turns=integer(options, "max-turns", 20, minimum=1, maximum=10_000))


def import_openenv(source: Path, out: Path, *, name: str | None = None, split: str = "test", seeds: int = 10,
                   reward: str = "sum", max_turns: int = 20) -> OpenEnvImport:
    """Write a bundle to ``out`` (a new or empty directory) that runs the OpenEnv environment
    of the package directory ``source``; return what was kept and what was not.

    ``seeds`` tasks are written, resetting the environment with seeds ``0 .. seeds-1`` (when
    its ``reset`` takes a seed); ``reward`` says how the final reward is made from the step
    rewards (``sum`` or ``last``, clamped to [0, 1]); ``max_turns`` is the episode's limit.

    Raises :class:`ImportSourceError` naming what makes ``source`` not an OpenEnv
    environment, :class:`envhub.errors.UsageError` for a non-empty ``out`` or a bad option,
    and :class:`envhub.errors.InvalidIdError` for a bad ``name``. Nothing is written when
    anything fails.
    """
    source, out = Path(source), Path(out)
    env_name = str(parse_name(name or f"imported/{_slug(source.resolve().name)}"))
    if reward not in ("sum", "last"):
        raise UsageError(f"reward {reward!r} is not sum or last", hint="use reward=sum or reward=last")
    if not source.is_dir():
        raise UsageError(f"{source} is not a directory", hint="give the OpenEnv environment's package directory "
                         "(the one with openenv.yaml, models.py and server/)")
    check_destination(split, out)
    found = _read_source(source)
    return write_staged(out, lambda staging: _write_bundle(staging, found, source=source, out=out, name=env_name,
                                                           split=split, seeds=seeds, reward=reward,
                                                           max_turns=max_turns))


# --------------------------------------------------------------------------- reading


@dataclass
class _Found:
    package: str  # the directory the package is copied to, an identifier
    module: str  # the environment's module, relative to the package: "server.echo_env_environment"
    cls: str
    doc: str
    reset_seed: bool  # reset() takes a seed
    action: str | None  # the action type's name, from step's annotation
    action_schema: dict[str, Any]
    action_fields: list[str]
    files: list[Path]  # relative to the source, copied
    skipped: list[str]
    not_carried: list[str]
    kept: list[str]
    dependencies: list[str]


def _read_source(source: Path) -> _Found:
    problems: list[Problem] = []
    files, skipped = _files(source)
    trees: dict[Path, ast.Module] = {}
    for rel in files:
        if rel.suffix != ".py":
            continue
        try:
            trees[rel] = ast.parse((source / rel).read_text(encoding="utf-8"), filename=str(source / rel))
        except (SyntaxError, UnicodeDecodeError, ValueError) as e:
            problems.append(Problem("error", "import-python", f"cannot be read as Python: {e}",
                                    file=str(source / rel), hint="fix the file, or remove it from the source"))
    classes = {node.name: (rel, node) for rel, tree in trees.items() for node in ast.walk(tree)
               if isinstance(node, ast.ClassDef)}
    envs = [(rel, node) for rel, tree in trees.items() for node in tree.body
            if isinstance(node, ast.ClassDef) and _is_openenv_environment(node, tree)]
    if not envs:
        problems.append(Problem(
            "error", "import-openenv-environment",
            "not an OpenEnv environment: no class in its Python files derives from OpenEnv's Environment "
            "(openenv.core.env_server.interfaces.Environment)", file=str(source),
            hint="give the directory `openenv init NAME` makes (its server/NAME_environment.py defines the class)"))
    elif len(envs) > 1:
        named = ", ".join(f"{node.name} ({rel})" for rel, node in envs)
        problems.append(Problem("error", "import-openenv-environment",
                                f"{len(envs)} OpenEnv Environment classes: {named}", file=str(source),
                                hint="import a directory that holds one environment"))
    if problems:
        raise ImportSourceError(f"cannot import {source}: {len(problems)} problem(s)", problems)
    rel, node = envs[0]
    methods = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
    where = f"{source / rel}: class {node.name}"
    for needed in ("reset", "step", "state"):
        if needed not in methods:
            problems.append(Problem("error", "import-openenv-method", f"{node.name} has no {needed}()",
                                    file=str(source / rel), hint="an OpenEnv Environment defines reset(), "
                                    f"step(action) and state: add {needed}"))
    init = methods.get("__init__")
    if init is not None:
        required = _required_params(init)
        if required:
            problems.append(Problem(
                "error", "import-openenv-init",
                f"{node.name}.__init__ requires {', '.join(required)}; envhub makes the environment with no arguments",
                file=str(source / rel), hint="give those parameters defaults"))
    action = None
    step = methods.get("step")
    if step is not None:
        params = [*step.args.posonlyargs, *step.args.args][1:]
        if not params or params[0].annotation is None:
            problems.append(Problem("error", "import-openenv-action",
                                    f"{node.name}.step has no annotated action parameter",
                                    file=str(source / rel),
                                    hint="annotate it with the action type: def step(self, action: MyAction)"))
        else:
            action = _annotation_name(params[0].annotation)
    if problems:
        raise ImportSourceError(f"cannot import {source}: {len(problems)} problem(s)", problems)

    reset = methods["reset"]
    reset_names = {a.arg for a in [*reset.args.posonlyargs, *reset.args.args, *reset.args.kwonlyargs]}
    reset_seed = "seed" in reset_names or reset.args.kwarg is not None
    kept = [f"{where}: run in the episode, one instance per episode (state kind `python`)"]
    not_carried: list[str] = []
    action_fields: list[str] = []
    schema: dict[str, Any] = {"type": "object"}
    if action in classes:
        schema, action_fields = _action_schema(action, classes)
        kept.append(f"the action type {action} ({', '.join(action_fields) or 'no fields'}): the schema of the step "
                    "tool's `action`, validated into the type before each step")
    else:
        not_carried.append(f"the action type {action or '(unnamed)'} is not defined in the source: the step tool's "
                           "`action` is any JSON object, validated by the environment's own type at each step")
    if reset_seed:
        kept.append("reset(seed=...): each task resets with its own seed (the row's `reset` keywords)")
    else:
        not_carried.append(f"{node.name}.reset() takes no seed: every task starts the same way")
    package = _identifier(source.resolve().name)
    module = ".".join(rel.with_suffix("").parts)
    not_carried += skipped
    not_carried += _server_only(source, files, trees, package)
    dependencies = _dependencies(source, not_carried)
    doc = ast.get_docstring(node) or ""
    return _Found(package=package, module=module, cls=node.name, doc=doc, reset_seed=reset_seed, action=action,
                  action_schema=schema, action_fields=action_fields, files=files, skipped=skipped,
                  not_carried=not_carried, kept=kept, dependencies=dependencies)


def _files(source: Path) -> tuple[list[Path], list[str]]:
    """The source's files to copy (relative), and what is left out, said for the report."""
    files: list[Path] = []
    skipped: list[str] = []
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if any(part in _SKIP_DIRS or part.endswith(_SKIP_SUFFIXES) for part in rel.parts):
            continue
        if path.is_symlink() or not path.is_file():
            continue
        if path.name == "Dockerfile" or path.name.startswith("Dockerfile.") or path.name == ".dockerignore":
            skipped.append(f"{rel}: the Docker image is not built; the environment runs in envhub's process, with "
                           "this interpreter's packages (python-dependencies)")
            continue
        files.append(rel)
    return files, skipped


def _is_openenv_environment(node: ast.ClassDef, tree: ast.Module) -> bool:
    """``node`` derives from OpenEnv's ``Environment`` (imported from an ``openenv`` module)."""
    imported = {alias.asname or alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                and n.module and n.module.split(".")[0] in ("openenv", "openenv_core") for alias in n.names
                if alias.name == "Environment"}
    for base in node.bases:
        target = base.value if isinstance(base, ast.Subscript) else base  # Environment[Act, Obs, State]
        if isinstance(target, ast.Name) and target.id in imported:
            return True
        if isinstance(target, ast.Attribute) and target.attr == "Environment" and "openenv" in ast.unparse(target):
            return True
    return False


def _required_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    positional = [*fn.args.posonlyargs, *fn.args.args][1:]
    required = [a.arg for a in positional[:len(positional) - len(fn.args.defaults)]]
    required += [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is None]
    return required


def _annotation_name(annotation: ast.expr) -> str:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):  # "MyAction"
        return annotation.value.split(".")[-1]
    if isinstance(annotation, ast.Attribute):
        return annotation.attr
    return ast.unparse(annotation)


def _action_schema(name: str, classes: Mapping[str, tuple[Path, ast.ClassDef]]) -> tuple[dict[str, Any], list[str]]:
    """A JSON schema of the action type's fields, read from its class body and its bases in
    the source. Only simple annotations get a type; the environment's pydantic type checks
    the rest at each step."""
    properties: dict[str, Any] = {"metadata": {"type": "object", "description": "Additional metadata for the action"}}
    required: list[str] = []
    seen: set[str] = set()
    chain: list[ast.ClassDef] = []
    todo = [name]
    while todo:  # the class and its bases defined in the source, base first in the end
        current = todo.pop()
        if current in seen or current not in classes:
            continue
        seen.add(current)
        node = classes[current][1]
        chain.insert(0, node)
        todo += [b.id for b in node.bases if isinstance(b, ast.Name)]
    fields: list[str] = []
    for node in chain:
        for stmt in node.body:
            if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                continue
            key = stmt.target.id
            if key.startswith("_") or key == "model_config":
                continue
            prop: dict[str, Any] = {}
            base = stmt.annotation.value if isinstance(stmt.annotation, ast.Subscript) else stmt.annotation
            base_name = base.id if isinstance(base, ast.Name) else None
            if base_name in _JSON_TYPES:
                prop["type"] = _JSON_TYPES[base_name]
            description, has_default = _field_info(stmt.value)
            prop["description"] = description or f"({ast.unparse(stmt.annotation)})"
            properties[key] = prop
            if key not in fields:
                fields.append(key)
            if not has_default and key not in required:
                required.append(key)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema, fields


def _field_info(value: ast.expr | None) -> tuple[str, bool]:
    """(description, has a default) of a field's assigned value."""
    if value is None:
        return "", False
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "Field":
        keywords = {k.arg: k.value for k in value.keywords if k.arg}
        description = keywords.get("description")
        text = description.value if isinstance(description, ast.Constant) and isinstance(description.value, str) else ""
        first = value.args[0] if value.args else keywords.get("default")
        has_default = ("default_factory" in keywords
                       or (first is not None and not (isinstance(first, ast.Constant) and first.value is Ellipsis)))
        return text, has_default
    return "", True


def _server_only(source: Path, files: list[Path], trees: Mapping[Path, ast.Module], package: str) -> list[str]:
    """What the server side configures and envhub does not carry over, said for the report."""
    notes: list[str] = []
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "create_app":
                options = [k.arg for k in node.keywords if k.arg]
                notes.append(f"{rel}: the FastAPI server (create_app{' with ' + ', '.join(options) if options else ''})"
                             " is copied but not run: the class runs in the episode, and `envhub serve` serves the "
                             "bundle; the server's options (concurrency, its own endpoints) do not apply")
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.split(".")[0] == package:
                notes.append(f"{rel}: `from {node.module} import ...` names the package absolutely; a bundle's code is "
                             "imported under a private name, so only relative imports (or the fallback beside them) "
                             "find it")
        text = (source / rel).read_text(encoding="utf-8", errors="replace")
        if re.search(r"gradio|web_interface|ENABLE_WEB_INTERFACE", text):
            notes.append(f"{rel}: the web UI (OpenEnv's web interface) is not carried over")
    manifest = source / "openenv.yaml"
    if manifest.is_file():
        notes.append("openenv.yaml: its deployment settings (runtime, app, port, the Hugging Face Space type) do not "
                     "apply; the file is copied for reference")
    return notes


def _dependencies(source: Path, not_carried: list[str]) -> list[str]:
    """The bundle's python-dependencies: OpenEnv itself, and the package's own dependencies
    from its pyproject.toml (OpenEnv's distribution is named ``openenv-core``)."""
    import tomllib

    from packaging.requirements import InvalidRequirement, Requirement

    dependencies = ["openenv-core"]
    pyproject = source / "pyproject.toml"
    if pyproject.is_file():
        try:
            declared = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("dependencies", [])
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            declared = []
            not_carried.append("pyproject.toml cannot be read: its dependencies are not in python-dependencies")
        for text in declared if isinstance(declared, list) else []:
            try:
                req = Requirement(str(text))
            except InvalidRequirement:
                not_carried.append(f"pyproject.toml dependency {text!r} is not a requirement; left out")
                continue
            if req.name.lower().replace("_", "-") in ("openenv-core", "openenv"):
                continue  # the adapter needs it anyway; its extras are the server's
            dependencies.append(str(req))
    requirements = source / "server" / "requirements.txt"
    if requirements.is_file():
        not_carried.append("server/requirements.txt: the server image's packages (FastAPI, uvicorn, ...) are not "
                           "needed to run the class; pyproject.toml's dependencies are the bundle's")
    return dependencies


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:63].strip("-") or "environment"


def _identifier(text: str) -> str:
    ident = re.sub(r"\W+", "_", text).strip("_") or "environment"
    return f"env_{ident}" if ident[0].isdigit() or ident == "envhub_openenv" else ident


# --------------------------------------------------------------------------- writing


def _write_bundle(root: Path, found: _Found, *, source: Path, out: Path, name: str, split: str, seeds: int,
                  reward: str, max_turns: int) -> OpenEnvImport:
    package = root / found.package
    for rel in found.files:
        target = package / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, target)
    kept = list(found.kept)
    kept.append(f"the package's {len(found.files)} file(s): copied to `{found.package}/` (the bundle's code)")
    (root / "envhub_openenv.py").write_text(_ADAPTER.format(
        package=found.package, module=found.module, cls=found.cls), encoding="utf-8")
    (root / "tools").mkdir()
    (root / "tools" / "step.json").write_text(json.dumps(_step_spec(found), indent=2) + "\n", encoding="utf-8")
    (root / "prompts").mkdir()
    (root / "prompts" / "system.md").write_text(_system_prompt(found), encoding="utf-8")
    (root / "tasks").mkdir()
    with (root / "tasks" / f"{split}.jsonl").open("w", encoding="utf-8") as f:
        for seed in range(seeds):
            row = {"id": f"seed-{seed}", "prompt": _prompt(found, seed), "reset": {"seed": seed} if found.reset_seed
                   else {}}
            f.write(json.dumps(row) + "\n")
    kept.append(f"{seeds} task(s), resetting with seeds 0 to {seeds - 1}" if found.reset_seed
                else f"{seeds} task(s) (the environment takes no seed: they start alike)")
    kept.append(f"each step's reward and done: the step tool's per-turn reward and end of episode; the final reward "
                f"is the {'sum of the step rewards' if reward == 'sum' else 'last step reward'}, clamped to [0, 1] "
                "(the unclamped figures are in the verifier's info)")
    (root / "envhub.toml").write_text(_manifest(found, name=name, split=split, reward=reward, max_turns=max_turns),
                                      encoding="utf-8")
    report = OpenEnvImport(source=source, out=out, name=name, split=split,
                           environment=f"{found.package}.{found.module}:{found.cls}", action=found.action,
                           tasks=seeds, kept=kept, not_carried=list(found.not_carried))
    (root / "IMPORT-REPORT.md").write_text(report.to_markdown(), encoding="utf-8")
    (root / ".envhubignore").write_text("# The import report is for the author, not the published bundle.\n"
                                        "IMPORT-REPORT.md\n", encoding="utf-8")
    return report


def _step_spec(found: _Found) -> dict[str, Any]:
    action = f"an action of type {found.action}" if found.action else "an action"
    fields = f" ({', '.join(found.action_fields)})" if found.action_fields else ""
    return {"type": "function", "function": {
        "name": "step",
        "description": (f"Take one step of the environment with {action}{fields}, given as a JSON object. Returns "
                        "the observation as JSON (with its reward and whether the episode is done). Without an "
                        "action, returns the current observation (before the first step: the one reset gave)."),
        "parameters": {"type": "object", "properties": {"action": found.action_schema},
                       "additionalProperties": False},
    }}


def _system_prompt(found: _Found) -> str:
    about = f"\n\n{found.doc.strip()}" if found.doc.strip() else ""
    return (f"You act in the environment {found.cls} through the tool `step`: each call takes one action and "
            f"returns what you observe, the reward the action earned, and whether the episode is over.{about}\n\n"
            "Reply without calling a tool when you are done: a reply without tool calls ends the episode.\n")


def _prompt(found: _Found, seed: int) -> str:
    start = (f"The environment has been reset with seed {seed}." if found.reset_seed
             else "The environment has been reset.")
    return f"{start} Call `step` without an action to see the first observation, then act to earn reward."


def _manifest(found: _Found, *, name: str, split: str, reward: str, max_turns: int) -> str:
    q = json.dumps
    lines = [
        "# Written by `envhub import openenv`; IMPORT-REPORT.md says what did not carry over.",
        "",
        "[environment]",
        f"name = {q(name)}",
        'version = "0.1.0"',
        f"description = {q(f'The OpenEnv environment {found.cls}, run in the episode; one step tool.')}",
        'tags = ["tool-use", "openenv", "imported"]',
        f"python-dependencies = {q(found.dependencies)}",
        f"canary = {q(new_canary())}",
        "",
        "[tasks]",
        'format = "jsonl"',
        'id-field = "id"',
        'prompt-field = "prompt"',
        f"splits.{split} = {{ path = {q(f'tasks/{split}.jsonl')} }}",
        "",
        "[harness]",
        'protocol = "tool-use"',
        'system-prompt = "prompts/system.md"',
        f"max-turns = {max_turns}",
        "",
        "[[harness.spec-tools]]",
        'spec = "tools/step.json"',
        'handler = "envhub_openenv:step"   # calls the environment\'s step(action)',
        "",
        "[verifier]",
        'kind = "python"',
        'entry-point = "envhub_openenv:score"   # the step rewards the episode gathered',
        "",
        "[state]",
        'kind = "python"',
        f'entry-point = "envhub_openenv:OpenEnvState"   # one {found.cls} per episode, reset with the task\'s seed',
        'reset = "per-episode"',
        "",
        "[config]",
        f"params = {{ reward = {q(reward)} }}",
        "",
    ]
    return "\n".join(lines)


_ADAPTER = '''\
"""The bridge between envhub and the OpenEnv environment {cls} (written by
`envhub import openenv`; docs/importers.md).

`OpenEnvState` is the episode's state (`[state] kind = "python"`): one {cls} per episode,
reset with the task's `reset` keywords. `step` is the one tool: it validates the model's
action into the environment's action type and answers with the observation as JSON, the
observation's reward and done. `score` is the verifier: the rewards the episode gathered.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Mapping
from typing import Any

from envhub.runtime import Reply, State, Task, ToolError

from .{package}.{module} import {cls} as Environment


def _action_type() -> type:
    hints = typing.get_type_hints(Environment.step)
    action = hints.get("action")
    if action is None:
        raise TypeError(f"{{Environment.__name__}}.step has no action annotation")
    return action


class OpenEnvState:
    """One {cls} and what its episode gathered: each step's reward, and whether it is done."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.reward_mode = str(params.get("reward", "sum"))
        self.env: Any = None
        self.observation: Any = None
        self.rewards: list[float] = []
        self.done = False

    def reset(self, task: Task) -> None:
        self.env = Environment()
        keywords = dict(task.get("reset") or {{}})
        accepted = inspect.signature(self.env.reset).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
            keywords = {{k: v for k, v in keywords.items() if k in accepted}}
        self.observation = self.env.reset(**keywords)
        self.rewards = []
        self.done = bool(getattr(self.observation, "done", False))

    def step(self, action: dict[str, Any] | None) -> Reply:
        if action is None:
            return Reply(self.observation.model_dump_json())
        if self.done:
            raise ToolError("the episode is over; reply without a tool call to finish")
        validate = getattr(_action_type(), "model_validate", None)  # a pydantic model, as OpenEnv's are
        try:
            typed = validate(action) if validate is not None else action
        except ValueError as e:  # pydantic's ValidationError
            raise ToolError(f"invalid action: {{e}}") from e
        self.observation = observation = self.env.step(typed)
        reward = observation.reward
        value = None if reward is None else float(reward)
        if value is not None:
            self.rewards.append(value)
        self.done = bool(observation.done)
        return Reply(observation.model_dump_json(), reward=value, done=self.done)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def step(action: dict[str, Any] | None = None, *, env: State[OpenEnvState]) -> Reply:
    """Take one step of the environment with `action`; without one, see the current observation."""
    return env.step(action)


def score(state: OpenEnvState | None = None) -> dict[str, Any]:
    """The final reward: the sum (or the last) of the step rewards, clamped to [0, 1]; the
    unclamped figures are in the info."""
    if state is None:  # a completion scored without an episode: no step was taken
        return {{"reward": 0.0, "info": {{"steps": 0}}}}
    total = sum(state.rewards)
    last = state.rewards[-1] if state.rewards else 0.0
    raw = total if state.reward_mode == "sum" else last
    reward = 0.0 if math.isnan(raw) else min(1.0, max(0.0, raw))
    return {{"reward": reward, "info": {{"total_reward": total, "last_reward": last, "steps": len(state.rewards),
                                        "done": state.done}}}}
'''
