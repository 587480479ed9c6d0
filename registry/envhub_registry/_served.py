"""One served environment, and what of it a client may see.

The messages themselves are :mod:`envhub.runtime.served`'s records, the one encoding of the
protocol that envhub's client reads too. For a held-out split a task is ``{id, split, index,
prompt, difficulty}``: what the model is shown. The row itself (its answer, references,
solution, verifier fields, anything else) and the verifier's breakdown and error text stay on
the server.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from envhub import __version__ as envhub_version
from envhub.bundle import public_manifest
from envhub.errors import EnvNotFoundError
from envhub.manifest import dump_manifest
from envhub.runtime import Environment, Task
from envhub.runtime.served import EnvironmentDetail, SplitView, TaskView

__all__ = ["Served"]

#: Orderings of a split kept for paging (seed and limit), per environment.
_ORDERINGS = 8


class Served:
    """An :class:`Environment` as the server offers it."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.name = env.name
        # The manifest as the built bundle publishes it, never the file on disk: a source
        # bundle's manifest names held-out seed ranges and secrets (and its comments may say
        # anything).
        manifest, _ = public_manifest(env.manifest, env.root)
        self.manifest_text = dump_manifest(manifest)
        self._orderings: OrderedDict[tuple[str, int | None, int | None], Sequence[Task]] = OrderedDict()
        # Which splits there are, and which are here, does not change while serving; the
        # property stats each split's file, on every request otherwise.
        self.splits = env.splits

    # -- splits and tasks -------------------------------------------------------------

    def held_out(self, split: str) -> bool:
        """Whether ``split`` is held out; :class:`EnvNotFoundError` if there is no such split."""
        info = self.splits.get(split)
        if info is None:
            known = ", ".join(self.splits)
            raise EnvNotFoundError(f"{self.name} has no split {split!r} (splits: {known})",
                                   hint=f"use one of: {known}")
        return info.held_out

    def tasks(self, split: str, *, seed: int | None, limit: int | None) -> Sequence[Task]:
        """The split's tasks as ``env.tasks`` orders them, kept for the next page."""
        key = (split, seed, limit)
        tasks = self._orderings.get(key)
        if tasks is None:
            tasks = self.env.tasks(split, seed=seed, limit=limit)
            self._orderings[key] = tasks
            while len(self._orderings) > _ORDERINGS:
                self._orderings.popitem(last=False)
        else:
            self._orderings.move_to_end(key)
        return tasks

    def task_at(self, split: str, index: int) -> Task:
        tasks = self.tasks(split, seed=None, limit=None)
        if index >= len(tasks):
            raise EnvNotFoundError(f"{self.name}: split {split!r} has {len(tasks)} tasks; there is no index {index}",
                                   hint=f"use an index from 0 to {len(tasks) - 1}" if tasks else None)
        return tasks[index]

    def task_view(self, task: Task, *, held_out: bool) -> TaskView:
        """A task as a client may see it (module docstring)."""
        return TaskView.of(task, prompt_field=self.env.manifest.tasks.prompt_field, held_out=held_out)

    # -- the environment as a whole -----------------------------------------------------

    def split_view(self, name: str) -> SplitView:
        info = self.splits[name]
        rows = info.rows
        if rows is None and info.available and not info.generated:
            rows = len(self.tasks(name, seed=None, limit=None))  # read at start-up: a count, no I/O
        return SplitView(name, info.held_out, info.available, rows, info.generated)

    def detail(self) -> EnvironmentDetail:
        """The environment as ``GET /v1/environments/{ns}/{name}`` describes it; its
        summary is what ``GET /v1/environments`` lists."""
        env = self.env
        provenance = env.provenance()
        return EnvironmentDetail(
            env.name, env.version, env.digest, env.manifest.harness.protocol,
            [self.split_view(name) for name in self.splits],
            score_version=env.score_version,
            description=env.manifest.environment.description,
            max_turns=env.max_turns,
            tools=env.tool_specs,
            # Not "source": where the server loaded the bundle from (a path, a registry URL) is
            # the operator's business; a client's records name the server's URL instead.
            provenance={key: provenance.get(key) for key in ("env", "version", "digest", "score_version",
                                                             "locator", "envhub_version")
                        if provenance.get(key) is not None},
            server_envhub_version=envhub_version,
            manifest=self.manifest_text,
        )

    def close(self) -> None:
        self.env.close()

