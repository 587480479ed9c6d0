"""Pydantic models of ``envhub.toml``, manifest spec v1 (``spec/manifest.md``).

An environment is E = <T, H, V, S, C>: ``[tasks]``, ``[harness]``, ``[verifier]``,
``[state]`` and ``[config]``, plus ``[environment]`` metadata and ``[dependencies]``.
Keys are kebab-case in TOML; unknown keys are errors. Validation here is per field; the
checks that relate fields to each other live in :mod:`envhub.manifest._semantic`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, WithJsonSchema
from pydantic import Tag as _Tag

from envhub.manifest._types import (
    BundlePath,
    Canary,
    CriterionName,
    EntryPoint,
    EnvNameStr,
    FieldName,
    GeneratorRef,
    Regex,
    RequirementStr,
    ServerName,
    Sha256,
    SpecifierStr,
    SplitName,
    Tag,
    VersionStr,
    open_name,
)

MANIFEST_VERSION = 1


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Model(BaseModel):
    # strict: TOML has real types, so "3" is never silently an integer.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        alias_generator=_kebab,
        populate_by_name=True,
        # A timeout or tolerance of inf/nan is a mistake, not a setting.
        allow_inf_nan=False,
    )


# --- [environment] ---------------------------------------------------------------------


class EnvironmentSection(_Model):
    """Who the environment is: its id, version and metadata."""

    name: EnvNameStr = Field(description="Namespaced id, 'namespace/name'.")
    version: VersionStr = Field(description="PEP 440 version; published versions are immutable.")
    score_version: int = Field(
        1, ge=1, description="Bump when rewards stop being comparable with earlier versions."
    )
    description: str = ""
    license: str | None = Field(None, description="SPDX license expression.")
    authors: list[str] = []
    tags: list[Tag] = []
    python_requires: SpecifierStr | None = None
    python_dependencies: list[RequirementStr] = []
    canary: Canary | None = Field(
        None, description="Contamination canary: 'envhub-canary:' and 32 hex digits."
    )
    golden: BundlePath | None = Field(
        None, description="JSONL of golden trajectories (public splits only) with the rewards they got; "
        "'envhub validate --against' replays them to keep score-version honest."
    )


# --- [dependencies] --------------------------------------------------------------------


class PathDependency(_Model):
    """A dependency in a directory beside this bundle, for local development: loaded from
    ``path`` instead of a registry. ``envhub build`` publishes it as ``==<its version>``."""

    path: str = Field(min_length=1, description="The dependency's bundle directory, relative to this bundle.")
    version: SpecifierStr = Field(
        "*", description="The versions accepted; the directory's must satisfy it ('*': any)."
    )


def _dependency_tag(value: Any) -> str:
    # Anything not a table is read as a specifier, so a number gets "expected a string".
    return "table" if isinstance(value, (dict, PathDependency)) else "specifier"


#: A ``[dependencies]`` value: a version specifier, or a table with a path.
Dependency = Annotated[
    Annotated[SpecifierStr, _Tag("specifier")] | Annotated[PathDependency, _Tag("table")],
    Discriminator(_dependency_tag),
]


# --- [tasks] ---------------------------------------------------------------------------


class MixtureComponent(_Model):
    """One part of a composite split: a split of a dependency, and its share of the tasks."""

    env: EnvNameStr = Field(description="A dependency, named in [dependencies].")
    split: SplitName = Field(description="The dependency's split the tasks come from.")
    weight: float = Field(gt=0, description="Relative share of the mixture's tasks.")


class Split(_Model):
    """One named split of tasks: a file (jsonl, parquet), a seed range (generator), seeds
    drawn from a secret (a held-out generator split), or a weighted mixture of
    dependencies' splits (mixture)."""

    path: BundlePath | None = Field(None, description="Task file, for jsonl and parquet.")
    seeds: list[int] | None = Field(
        None, description="[start, stop) seed range, for generator tasks."
    )
    seed_space: list[int] | None = Field(
        None,
        description="Held-out generator split: the public [lo, hi) its `rows` seeds are drawn from, "
                    "keyed by its secret.",
    )
    secret: BundlePath | None = Field(
        None, description="Held-out generator split: the file holding its 256-bit key (64 hex digits); never published."
    )
    mixture: list[MixtureComponent] | None = Field(
        None, min_length=1, description="Dependencies' splits and weights, for format = mixture."
    )
    size: int | None = Field(
        None, ge=1, description="Mixture: number of tasks (default: as many as fit without repeats)."
    )
    held_out: bool = Field(False, description="Never published in the clear.")
    rows: int | None = Field(None, ge=0, description="Recorded row count, checked by validate.")
    sha256: Sha256 | None = Field(None, description="Recorded file digest, checked by validate.")
    description: str = ""


#: The built-in task formats; installed plugins may add file formats (``envhub.hookspecs``).
TASK_FORMATS = ("jsonl", "parquet", "generator", "mixture")


class TasksSection(_Model):
    """T: the problems, in named splits."""

    format: open_name(TASK_FORMATS, "task format") = "jsonl"  # type: ignore[valid-type]
    id_field: FieldName = "id"
    prompt_field: FieldName = "prompt"
    difficulty_field: FieldName | None = None
    expect_noop_field: FieldName | None = Field(
        None, description="A boolean task field: true when doing nothing is the task's correct outcome.")
    difficulty_levels: list[int] | None = Field(
        None, min_length=1,
        description="Generator: the difficulty levels it takes, easiest first; "
                    "task i of a split is made at level i mod len.",
    )
    generator: GeneratorRef | None = Field(
        None, description="Task generator, for format = generator: the bundle's 'module:function' or a plugin's name."
    )
    splits: dict[SplitName, Split] = Field(min_length=1)


# --- [harness] -------------------------------------------------------------------------


#: The built-in harness protocols; installed plugins may add more.
HARNESS_PROTOCOLS = ("single-turn", "multi-turn", "tool-use")


#: The tools envhub provides for state kind ``sandbox`` (``[harness] builtin-tools``).
BUILTIN_TOOLS = ("bash", "read_file", "write_file", "edit_file", "list_files")


class SpecTool(_Model):
    """A tool declared by its OpenAI/JSON-Schema spec and bound to a handler."""

    spec: BundlePath = Field(description="A JSON file: one OpenAI tool ({type: function, function: {...}}) or its "
                                         "function object ({name, description, parameters}).")
    handler: EntryPoint = Field(description="The function called with the validated arguments as keywords.")


class McpServer(_Model):
    """An MCP server whose tools become the episode's tools."""

    name: ServerName = Field(description="The server's name, unique in the harness.")
    command: list[str] | None = Field(
        None, min_length=1, description="A stdio server: the command, run in the bundle directory (needs trust); "
                                        "a first word 'python' is the interpreter running envhub.")
    url: str | None = Field(None, description="A streamable-HTTP server's URL.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables of a stdio server.")
    prefix: str = Field("", pattern=r"^[A-Za-z0-9_.-]*$", description="Prepended to the server's tool names.")
    scope: Literal["episode", "environment"] = Field(
        "episode", description="episode: a fresh server per episode; environment: one server shared by all.")
    tools: list[str] | None = Field(None, description="The server's tools offered, by their names on the server; "
                                                      "absent: all.")
    timeout_s: float = Field(30.0, gt=0, le=3600, description="Start-up and per-call limit, in seconds.")


class TaskHarnessFields(_Model):
    """The task fields that set a task's own harness (each absent: the manifest's harness)."""

    tools: FieldName | None = Field(None, description="A list of tool names: the task's tools, a subset.")
    system_prompt: FieldName | None = Field(None, description="The task's system prompt text.")
    messages: FieldName | None = Field(None, description="The task's starting messages (a chat list).")
    max_turns: FieldName | None = Field(None, description="The task's turn limit, an integer >= 1.")


class HarnessSection(_Model):
    """H: how the model interacts with the environment."""

    protocol: open_name(HARNESS_PROTOCOLS, "harness protocol") = "single-turn"  # type: ignore[valid-type]
    system_prompt: BundlePath | None = None
    system_prompt_template: BundlePath | None = Field(
        None, description="A Jinja template file rendered per task into the system prompt.")
    prompt_template: BundlePath | None = Field(
        None, description="A Jinja template file rendered per task into the prompt.")
    max_turns: int | None = Field(None, ge=1)
    tools: list[EntryPoint] = []
    spec_tools: list[SpecTool] = Field([], description="Tools declared by JSON-Schema specs, bound to handlers.")
    mcp_servers: list[McpServer] = Field([], description="MCP servers whose tools become the episode's tools.")
    task_fields: TaskHarnessFields = Field(
        default_factory=TaskHarnessFields, description="Task fields that set a task's own harness.")
    builtin_tools: list[Literal["bash", "read_file", "write_file", "edit_file", "list_files"]] = Field(
        [], description="Tool-use with state kind 'sandbox': envhub's own shell and file tools, offered "
                        "beside the bundle's tools."
    )
    responder: EntryPoint | None = Field(
        None, description="Multi-turn: the function that answers the model each turn; tool-use: the one that "
                          "answers a turn without tool calls (a simulated user)."
    )
    context: Literal["full", "recent-turns"] = "full"
    keep_turns: int | None = Field(None, ge=1, description="Turns kept by context = recent-turns.")


# --- [verifier] ------------------------------------------------------------------------

Normalization = Literal["strip", "lower", "collapse-whitespace", "strip-punctuation"]


class ExactMatch(_Model):
    """Reward 1 when the completion equals the task's field after normalisation."""

    kind: Literal["exact-match"]
    field: FieldName = "answer"
    normalize: list[Normalization] = ["strip"]


class Numeric(_Model):
    """Reward 1 when the number read from the completion is within tolerance."""

    kind: Literal["numeric"]
    field: FieldName = "answer"
    tolerance: float = Field(1e-6, ge=0)
    relative_tolerance: float = Field(0.0, ge=0)
    extract: Literal["auto", "boxed", "last-number"] = "auto"


class RegexMatch(_Model):
    """Reward 1 when the completion matches a pattern (fixed, or from a task field)."""

    kind: Literal["regex"]
    pattern: Regex | None = None
    pattern_field: FieldName | None = None
    ignore_case: bool = False
    full_match: bool = False


class JsonMatch(_Model):
    """Reward 1 when the completion parses as JSON equal to (or a superset of) the field."""

    kind: Literal["json-match"]
    field: FieldName = "answer"
    subset: bool = False


class PythonVerifier(_Model):
    """Reward from a function of the bundle's code (needs trust)."""

    kind: Literal["python"]
    entry_point: EntryPoint


class CodeTests(_Model):
    """Run the task's tests against the candidate code in a sandboxed subprocess."""

    kind: Literal["code-tests"]
    tests_field: FieldName = "tests"
    language: Literal["python"] = "python"
    timeout_s: float = Field(10.0, gt=0, le=3600)
    memory_mb: int = Field(512, ge=16)


class WorkspaceTests(_Model):
    """Run the task's tests against the final workspace of a sandbox episode, in a fresh
    sandbox the agent never had; the tests never enter the agent's workspace."""

    kind: Literal["workspace-tests"]
    tests_field: FieldName | None = Field(
        None, description="A task field naming the task's directory under tests-directory, or holding the "
                          "tests inline as a table {\"relative/path\": \"text\"}; absent: the directory named "
                          "by the task's id."
    )
    tests_directory: BundlePath = Field(
        "tests", description="A directory of the bundle with each task's tests; never copied into the workspace."
    )
    command: str = Field(
        "bash /tests/run-tests.sh", min_length=1,
        description="Run in /workspace of the fresh sandbox, the task's tests read-only at /tests.",
    )
    timeout_s: float = Field(120.0, gt=0, le=3600, description="Wall-clock limit of the test run, in seconds.")


class JudgeVerdict(_Model):
    """How an llm-judge's answer becomes a reward."""

    regex: Regex | None = Field(None, description="A pattern whose first group is the score (a number, or a label "
                                                   "in labels).")
    json_field: str | None = Field(None, description="The answer is a JSON object; this key holds the score.")
    labels: dict[str, float] = Field(default_factory=dict, description="Labels the score may be, and their rewards.")
    scale: float = Field(1.0, gt=0, description="A numeric score is divided by this (10 for a 0-10 grade).")


class LlmJudge(_Model):
    """Ask a pinned judge model, through an OpenAI-compatible endpoint, to grade."""

    kind: Literal["llm-judge"]
    model: str = Field(min_length=1, description="Judge model, pinned.")
    rubric: BundlePath | None = Field(None, description="Prompt file with the grading rubric.")
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(0.0, ge=0)
    allow_self_judge: bool = False
    prompt_template: BundlePath | None = Field(
        None, description="A Jinja template file: the judge's prompt, over the task's fields and the completion.")
    verdict: JudgeVerdict | None = Field(None, description="How to read the judge's answer; absent: the default.")


class _Criterion(_Model):
    name: CriterionName
    weight: float = Field(1.0, gt=0)
    required: bool = Field(False, description="A gate: the rubric scores 0 unless this passes.")


class ExactMatchCriterion(_Criterion, ExactMatch):
    pass


class NumericCriterion(_Criterion, Numeric):
    pass


class RegexCriterion(_Criterion, RegexMatch):
    pass


class JsonMatchCriterion(_Criterion, JsonMatch):
    pass


class PythonCriterion(_Criterion, PythonVerifier):
    pass


class CodeTestsCriterion(_Criterion, CodeTests):
    pass


class LlmJudgeCriterion(_Criterion, LlmJudge):
    pass


class WorkspaceTestsCriterion(_Criterion, WorkspaceTests):
    pass


VERIFIER_KINDS = (
    "exact-match",
    "numeric",
    "regex",
    "json-match",
    "python",
    "code-tests",
    "rubric",
    "llm-judge",
    "workspace-tests",
)
_PLUGIN = "plugin"


def _plugin_kind_schema(exclude: tuple[str, ...]) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "not": {"enum": list(exclude)},
                           "description": "a verifier kind an installed plugin provides"})


class PluginVerifier(BaseModel):
    """A verifier kind that an installed plugin provides: ``kind`` and the kind's own
    options, which the plugin's options model checks when the manifest is validated
    (``envhub.manifest._plugins``); :attr:`options` holds them as written."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, allow_inf_nan=False)

    kind: Annotated[str, _plugin_kind_schema(VERIFIER_KINDS)]

    @property
    def options(self) -> dict[str, Any]:
        """The table's keys other than ``kind`` (and a criterion's name, weight, required)."""
        return dict(self.model_extra or {})


class PluginCriterion(_Criterion, PluginVerifier):
    model_config = ConfigDict(extra="allow")


def _kind_of(value: Any) -> Any:
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


def _verifier_tag(value: Any) -> str | None:
    # Built-in kinds are validated by their own strict models; any other kind by
    # PluginVerifier, then against the installed plugins. A missing kind has no tag.
    kind = _kind_of(value)
    if kind is None:
        return None
    return kind if isinstance(kind, str) and kind in VERIFIER_KINDS else _PLUGIN


def _criterion_tag(value: Any) -> str | None:
    kind = _kind_of(value)
    if kind == "rubric":
        return "rubric"  # no such tag: "a criterion cannot itself be a rubric"
    return _verifier_tag(value)


Criterion = Annotated[
    (
        Annotated[ExactMatchCriterion, _Tag("exact-match")]
        | Annotated[NumericCriterion, _Tag("numeric")]
        | Annotated[RegexCriterion, _Tag("regex")]
        | Annotated[JsonMatchCriterion, _Tag("json-match")]
        | Annotated[PythonCriterion, _Tag("python")]
        | Annotated[CodeTestsCriterion, _Tag("code-tests")]
        | Annotated[LlmJudgeCriterion, _Tag("llm-judge")]
        | Annotated[WorkspaceTestsCriterion, _Tag("workspace-tests")]
        | Annotated[PluginCriterion, _Tag(_PLUGIN)]
    ),
    Discriminator(_criterion_tag),
]


class Rubric(_Model):
    """Weighted criteria; required criteria gate the whole reward."""

    kind: Literal["rubric"]
    criteria: list[Criterion] = Field(min_length=1)


Verifier = Annotated[
    (
        Annotated[ExactMatch, _Tag("exact-match")]
        | Annotated[Numeric, _Tag("numeric")]
        | Annotated[RegexMatch, _Tag("regex")]
        | Annotated[JsonMatch, _Tag("json-match")]
        | Annotated[PythonVerifier, _Tag("python")]
        | Annotated[CodeTests, _Tag("code-tests")]
        | Annotated[Rubric, _Tag("rubric")]
        | Annotated[LlmJudge, _Tag("llm-judge")]
        | Annotated[WorkspaceTests, _Tag("workspace-tests")]
        | Annotated[PluginVerifier, _Tag(_PLUGIN)]
    ),
    Discriminator(_verifier_tag),
]


# --- [state] ---------------------------------------------------------------------------


#: The built-in state kinds; installed plugins may add more.
STATE_KINDS = ("none", "files", "sqlite", "python", "sandbox")


class SandboxLimits(_Model):
    """``[state.limits]``: what one command of a sandbox episode may use."""

    command_timeout_s: float = Field(30.0, gt=0, le=3600, description="Wall-clock limit of one command, in seconds.")
    cpu_s: int = Field(60, ge=1, le=86_400, description="CPU time of one command, in seconds.")
    memory_mb: int = Field(1024, ge=16, le=1_048_576, description="Address space of one process, in MiB.")
    processes: int = Field(128, ge=1, le=65_536, description="Processes at once in the sandbox.")
    disk_mb: int = Field(256, ge=1, le=1_048_576, description="Size of the workspace, in MiB.")
    output_kb: int = Field(16, ge=1, le=16_384, description="Output of one command shown to the agent, in KiB.")


class StateSection(_Model):
    """S: what the agent acts on, and when it is reset."""

    kind: open_name(STATE_KINDS, "state kind") = "none"  # type: ignore[valid-type]
    snapshot: BundlePath | None = Field(
        None, description="files: a directory copied per reset; sqlite: a database file; sandbox: the "
                          "workspace's starting tree."
    )
    entry_point: EntryPoint | None = Field(None, description="python: a state factory.")
    snapshot_field: FieldName | None = Field(
        None, description="files, sqlite: a task field naming the task's own snapshot (a bundle path), used "
                          "instead of snapshot.")
    reset: Literal["per-episode", "per-task", "never"] = "per-episode"
    files_field: FieldName | None = Field(
        None, description="sandbox: a task field, a table {\"relative/path\": \"text\"} written over the workspace."
    )
    task_directory: BundlePath | None = Field(
        None, description="sandbox: a per-task directory of the bundle copied over the workspace; "
                          "'{id}' stands for the task's id."
    )
    setup: str | None = Field(
        None, min_length=1, description="sandbox: a command run in the workspace before the agent's first turn."
    )
    setup_field: FieldName | None = Field(None, description="sandbox: a task field with a command run after setup.")
    network: bool | None = Field(None, description="sandbox: share the host's network (default false).")
    base: BundlePath | None = Field(
        None, description="sandbox: 'host' (the host's read-only system, the default), a root filesystem "
                          "archive of the bundle (tar, tar.gz), or 'scheme:reference' for a plugin's backend, "
                          "e.g. 'oci:docker.io/library/python@sha256:...' (an image by digest)."
    )
    limits: SandboxLimits | None = Field(None, description="sandbox: limits of each command.")

    @property
    def sandbox_limits(self) -> SandboxLimits:
        """``limits``, or the defaults when the manifest has none."""
        return self.limits if self.limits is not None else SandboxLimits()


# --- [config] --------------------------------------------------------------------------


class Sampling(_Model):
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    stop: list[str] = []


class Curriculum(_Model):
    strategy: Literal["none", "ordered", "success-window"] = "none"
    window: int = Field(64, ge=1)
    promote_at: float = Field(0.9, gt=0, le=1)
    demote_at: float | None = Field(None, ge=0, lt=1)


class Noise(_Model):
    tool_error_rate: float = Field(0.0, ge=0, le=1)


class ConfigSection(_Model):
    """C: the knobs."""

    timeout_s: float | None = Field(None, gt=0, description="Wall-clock limit per episode.")
    sampling: Sampling | None = None
    curriculum: Curriculum | None = None
    noise: Noise | None = None
    params: dict[str, Any] = Field(
        default_factory=dict, description="Free-form knobs passed to the environment's code."
    )


# --- the manifest ----------------------------------------------------------------------


class Manifest(_Model):
    """A whole ``envhub.toml``."""

    model_config = ConfigDict(title="envhub manifest v1")

    manifest_version: int = Field(MANIFEST_VERSION, ge=1, le=MANIFEST_VERSION)
    environment: EnvironmentSection
    dependencies: dict[EnvNameStr, Dependency] = {}
    tasks: TasksSection
    harness: HarnessSection = HarnessSection()
    verifier: Verifier | None = Field(None, description="Required, except for format = mixture.")
    state: StateSection = StateSection()
    config: ConfigSection = ConfigSection()

    def dependency_specifiers(self) -> dict[str, str]:
        r"""Each dependency's version specifier as written ('*' or '' for any), path
        dependencies included.

        >>> from envhub.manifest import parse_manifest
        >>> m, _ = parse_manifest('[environment]\nname = "a/b"\nversion = "1"\n[dependencies]\n"a/c" = ">=1"\n'
        ...                       '"a/d" = { path = "../d" }\n[tasks]\nsplits.train = { path = "t.jsonl" }\n'
        ...                       '[verifier]\nkind = "exact-match"\n')
        >>> m.dependency_specifiers()
        {'a/c': '>=1', 'a/d': '*'}
        >>> m.dependency_paths()
        {'a/d': '../d'}
        """
        return {name: dep if isinstance(dep, str) else dep.version for name, dep in self.dependencies.items()}

    def dependency_paths(self) -> dict[str, str]:
        """The path dependencies: name -> directory as written, relative to the bundle."""
        return {name: dep.path for name, dep in self.dependencies.items() if isinstance(dep, PathDependency)}
