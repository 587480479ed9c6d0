"""Rollout records: what ``envhub eval`` writes for each episode, read back typed.

A :class:`RolloutRecord` is one line of a records file (JSONL), as specified in
``spec/rollout-record.md``; its JSON Schema, ``spec/schema/rollout-record-v1.schema.json``, is
generated from these models by :func:`rollout_record_json_schema`. Every record says which
version of the format it follows (``record_version``). Fields added to version 1 keep the
version, so a reader accepts fields it does not know (and keeps them); a record of a newer
version is refused by :func:`read_records` with the file and line. A record written before
the version field existed is read as version 1, its ``error`` text (``"<Type>: message"``)
made into a typed :class:`RolloutError`.

>>> error = RolloutError.from_text("timeout: the episode took longer than 5 s")
>>> error.kind, str(error)
('timeout', 'timeout: the episode took longer than 5 s')
>>> RolloutError.from_text("PolicyError: 401 Incorrect API key").kind
'policy'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envhub.errors import UsageError

__all__ = [
    "RECORD_VERSION",
    "CurriculumInfo",
    "ErrorKind",
    "RolloutError",
    "RolloutRecord",
    "RolloutSampling",
    "RolloutTiming",
    "RolloutUsage",
    "TaskOrigin",
    "TurnTokens",
    "dump_record",
    "read_records",
    "rollout_record_json_schema",
]

#: The version of the record format this envhub writes, and the newest it reads.
RECORD_VERSION = 1

#: What failed in a rollout: the episode's time limit, the policy (its endpoint, its key,
#: its code raising a PolicyError), the environment (envhub's own errors while the episode
#: ran: its tools, its sandbox, a served environment), the verifier (it raised while scoring),
#: or an exception whose origin the record does not say.
ErrorKind = Literal["timeout", "policy", "environment", "verifier", "exception"]

#: envhub errors an environment raises while an episode runs (the rest are the policy's).
_ENVIRONMENT_ERRORS = frozenset({
    "BundleError", "EnvhubError", "IntegrityError", "ManifestError", "RemoteError", "SandboxError", "TaskDataError",
    "ToolError",
    "TrustError", "UsageError",
})


class _Model(BaseModel):
    # Fields added to version 1 by a newer envhub are kept, not refused: additive changes
    # keep the version (spec/rollout-record.md, "Versions").
    model_config = ConfigDict(frozen=True, extra="allow")


class RolloutError(_Model):
    """Why a rollout failed (its reward is then 0): the typed ``kind``, the exception's
    class name (``TimeoutError`` for the time limit), and its message."""

    kind: ErrorKind
    type: str = Field(description="The exception's class name, e.g. ZeroDivisionError; TimeoutError for a timeout.")
    message: str

    @classmethod
    def from_text(cls, text: str) -> RolloutError:
        """The error of a record written as text, ``"<Type>: message"`` (records of envhub
        before the typed error, and executors that still send text)."""
        head, sep, rest = text.partition(":")
        if not sep or not head.isidentifier():
            return cls(kind="exception", type="Exception", message=text)
        message = rest.strip()
        if head == "timeout":
            return cls(kind="timeout", type="TimeoutError", message=message)
        if head == "PolicyError":
            return cls(kind="policy", type=head, message=message)
        return cls(kind="environment" if head in _ENVIRONMENT_ERRORS else "exception", type=head, message=message)

    def __str__(self) -> str:
        return f"{'timeout' if self.kind == 'timeout' else self.type}: {self.message}"


class RolloutUsage(_Model):
    """The policy's requests to its endpoint in this episode (zeros for policies that make none)."""

    requests: int = 0
    attempts: int = Field(0, description="Requests including retries.")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


class TurnTokens(_Model):
    """The tokens behind one assistant turn the policy sampled, as its endpoint returned them
    (``envhub eval --record-tokens``): what a trainer needs to use the turn without
    re-tokenising. A field is null where the endpoint sent nothing for it."""

    prompt_token_ids: list[int] | None = Field(
        None, description="The token ids of the prompt as the server rendered it (chat template applied, the "
                          "conversation so far), so a trainer need not re-apply the template.")
    completion_token_ids: list[int] | None = Field(
        None, description="The token ids the model sampled for this turn, as generated (before any tool-call or "
                          "reasoning parsing).")
    logprobs: list[float] | None = Field(
        None, description="The log-probability of each sampled token under the sampling policy, one per completion "
                          "token.")
    finish_reason: str | None = Field(None, description="Why the server stopped: stop, length, tool_calls, ...")


class RolloutSampling(_Model):
    """The settings the policy's turns were sampled with (null: the endpoint's default applied)."""

    model: str | None = Field(None, description="The model the policy asked for.")
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: str | list[str] | None = None


class RolloutTiming(_Model):
    """When the episode started (ISO 8601, UTC) and how long it and the policy's turns took."""

    started_at: str
    duration_s: float
    policy_s: float


class CurriculumInfo(_Model):
    """Where a curriculum stood when it drew this rollout's task (``envhub eval --curriculum``)."""

    strategy: str
    step: int = Field(description="The draw's index in the run, from 0.")
    level: Any = Field(description="The difficulty level the task was drawn at.")
    level_index: int
    levels: int = Field(description="How many levels the curriculum has.")
    batch: int | None = Field(None, description="The run's batch size (its --concurrency).")


class TaskOrigin(_Model):
    """Where a composite environment's task really comes from: the child environment's
    provenance, split and task id."""

    env: str
    version: str
    digest: str | None = None
    score_version: int | None = None
    source: str | None = None
    locator: str | None = None
    split: str
    task_id: str


class RolloutRecord(_Model):
    """One rollout: the environment and policy it ran with, the task, the reward and its
    breakdown, the error if it failed, the conversation, the policy's usage and the timing.
    Build it with :meth:`from_runner` from what an executor yields; write it with
    :func:`dump_record`; read a file of them with :func:`read_records`."""

    record_version: Literal[1] = Field(1, description="The version of this format the record follows.")
    env: str = Field(description="The environment's name, NAMESPACE/NAME.")
    version: str
    digest: str | None = Field(description="The digest of the environment's public archive (sha256:...).")
    score_version: int
    source: str | None = Field(None, description="Where the environment was loaded from.")
    envhub_version: str | None = Field(None, description="The envhub that ran the rollout.")
    locator: str | None = Field(None, description="The Hub commit id, when the registry has one.")
    policy: str
    child: TaskOrigin | None = None
    split: str
    task_id: str
    rollout: int = Field(description="Which rollout of the task this is (or the curriculum draw), from 0.")
    seed: int
    difficulty: Any = None
    curriculum: CurriculumInfo | None = None
    reward: float = Field(ge=0.0, le=1.0)
    breakdown: dict[str, float] = Field(default_factory=dict)
    score_info: dict[str, Any] | None = None
    error: RolloutError | None = None
    turns: int = 0
    truncated: bool = False
    turn_rewards: list[float | None] | None = Field(
        None, description="The environment's reward for each model turn (null where it gave none), for credit "
                          "assignment: any finite numbers, apart from the final reward. Absent when the environment "
                          "gave none.")
    ended_by: Literal["policy", "environment", "turn-limit"] | None = Field(
        None, description="Who ended the episode: the policy (its final answer), the environment (a tool or the "
                          "responder ended it), or the turn limit (truncated). Absent for a failed rollout.")
    outcome: str | None = Field(None, description="Why the environment ended the episode, as it said (e.g. 'win', "
                                                   "'loss', 'hangup').")
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    tool_errors: int = Field(0, description="Tool calls answered with an error, whoever's fault it was.")
    environment_faults: int = Field(
        0, description="Of tool_errors, the calls that failed because the environment's code raised "
                       "(not the model's mistakes).")
    messages: list[dict[str, Any]] = Field(default_factory=list)
    usage: RolloutUsage = Field(default_factory=RolloutUsage)
    timing: RolloutTiming | None = None
    turns_tokens: list[TurnTokens] | None = Field(
        None, description="With --record-tokens: for each completion the policy's endpoint returned, in order (the "
                          "policy's assistant turns in messages), its token ids and log-probs. Absent otherwise.")
    sampling: RolloutSampling | None = Field(
        None, description="With --record-tokens: the sampling settings of the policy's turns. Absent otherwise.")

    @field_validator("error", mode="before")
    @classmethod
    def _error_from_text(cls, value: Any) -> Any:
        return RolloutError.from_text(value) if isinstance(value, str) else value

    @classmethod
    def from_runner(cls, record: dict[str, Any]) -> RolloutRecord:
        """The record of what an executor yields for a rollout (a mapping of these fields).
        Raises :class:`pydantic.ValidationError` when it does not fit."""
        return cls.model_validate(record)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def turn_return(self) -> float | None:
        """The sum of :attr:`turn_rewards` (None when the environment gave none)."""
        if self.turn_rewards is None:
            return None
        return sum(r for r in self.turn_rewards if r is not None)


def dump_record(record: RolloutRecord) -> bytes:
    """``record`` as one JSONL line (with its newline)."""
    return record.__pydantic_serializer__.to_json(record) + b"\n"


def read_records(path: Path, *, repair: bool = False) -> list[RolloutRecord]:
    """The records of the JSONL file ``path`` (none if it does not exist). A torn last line
    (no newline: the writer was killed mid-line) is dropped, and with ``repair`` cut from
    the file. Raises :class:`UsageError` naming the file and line for a line that is not a
    rollout record, and for a record of a newer version than this envhub reads."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    end = len(data) if data.endswith(b"\n") or not data else data.rfind(b"\n") + 1
    if repair and end != len(data):
        with path.open("r+b") as f:
            f.truncate(end)
    records = []
    for number, line in enumerate(data[:end].splitlines(), 1):
        if line.strip():
            records.append(_parse_line(path, number, line))
    return records


def _parse_line(path: Path, number: int, line: bytes) -> RolloutRecord:
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise UsageError(f"{path}: line {number} is not a rollout record (not JSON: {e})",
                         hint="pass a new -o file, or remove the broken line") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: line {number} is not a rollout record (not a JSON object)",
                         hint="pass a new -o file, or remove the broken line")
    version = raw.get("record_version", RECORD_VERSION)  # records from before the field: version 1
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UsageError(f"{path}: line {number} has record_version {version!r}; versions are whole numbers from 1",
                         hint="pass a new -o file, or remove the broken line")
    if version > RECORD_VERSION:
        raise UsageError(f"{path}: line {number} is a version {version} rollout record; this envhub reads "
                         f"version {RECORD_VERSION}", hint="upgrade envhub to read this file")
    try:
        return RolloutRecord.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'record'}: {err['msg']}" for err in e.errors())
        raise UsageError(f"{path}: line {number} is not a rollout record ({problems})",
                         hint="pass a new -o file, or remove the broken line") from None


def rollout_record_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of rollout record version 1, as checked in at
    ``spec/schema/rollout-record-v1.schema.json`` (``json.dumps(..., indent=2,
    sort_keys=True)`` and a newline)."""
    schema = RolloutRecord.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://envhub.dev/schema/rollout-record-v1.schema.json", **schema}


def _schema_text() -> str:
    return json.dumps(rollout_record_json_schema(), indent=2, sort_keys=True) + "\n"
