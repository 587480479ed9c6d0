"""Composite environments: tasks that are a weighted mixture of dependencies' splits.

A composite's manifest has ``format = "mixture"`` and, per split, ``mixture = [{ env,
split, weight }]`` naming its ``[dependencies]``. Each task is run and scored by the
environment it came from (its harness, verifier and state), so a composite is only a
router: ids are ``<env>:<split>:<task id>``, and every rollout record carries the child
environment's provenance (:meth:`CompositeEnvironment.task_provenance`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from envhub.errors import BundleError, EnvNotFoundError
from envhub.manifest import Manifest
from envhub.runtime._environment import Environment, bundle_digest, provenance
from envhub.runtime._episode import Episode
from envhub.runtime._protocols import SplitInfo
from envhub.runtime._types import Message, Score, Task, Trajectory

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.runtime.verifiers import ScoringContext

__all__ = ["CompositeEnvironment", "apportion", "interleave"]


def apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Split ``total`` into integer counts proportional to ``weights`` (largest remainder;
    ties go to the earlier part), so the counts always sum to ``total``."""
    whole = sum(weights)
    quotas = [total * w / whole for w in weights]
    counts = [math.floor(q) for q in quotas]
    order = sorted(range(len(weights)), key=lambda i: (-(quotas[i] - counts[i]), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def interleave(counts: Sequence[int]) -> list[int]:
    """An order of part indices with ``counts[i]`` of each, spread evenly, so every prefix
    of the mixture is close to its weights (``envhub eval -n`` takes a prefix)."""
    taken = [0] * len(counts)
    order = []
    for _ in range(sum(counts)):
        i = min((i for i in range(len(counts)) if taken[i] < counts[i]),
                key=lambda i: ((taken[i] + 0.5) / counts[i], i))
        taken[i] += 1
        order.append(i)
    return order


class CompositeEnvironment:
    """A loaded composite environment: the same interface as :class:`Environment`, with
    each task routed to the child it came from. Make one with :func:`envhub.load`."""

    def __init__(self, manifest: Manifest, root: Path, children: Mapping[str, Environment | CompositeEnvironment], *,
                 plugins: PluginLookup, digest: str | None = None, source: str | None = None,
                 locator: str | None = None) -> None:
        self._plugins = plugins
        self.manifest = manifest
        self.root = root
        self.children = dict(children)
        self.source = source or str(root)
        self.locator = locator
        self._digest = digest
        env = manifest.environment
        self.name: str = env.name
        self.version: str = env.version
        self.score_version: int = env.score_version
        self.max_turns: int = max((c.max_turns for c in self.children.values()), default=1)
        #: None of its own: each task runs with the tools of the environment it comes from.
        self.tool_specs: list[dict[str, Any]] = []
        self._routes: dict[tuple[str, str], tuple[Environment | CompositeEnvironment, Task]] = {}
        self._built: dict[tuple[str, int | None], list[Task]] = {}
        self._check_held_out()

    def _check_held_out(self) -> None:
        for name, split in self.manifest.tasks.splits.items():
            for part in split.mixture or ():
                child = self.children[part.env]
                info = child.splits.get(part.split)
                if info is None:
                    known = ", ".join(child.splits)
                    raise BundleError(f"{self.name}: split {name!r} mixes {part.env} split {part.split!r}, which "
                                      f"{part.env} {child.version} does not have (its splits: {known})", [],
                                      hint="fix the mixture's split name, or the dependency's version specifier")
                if info.held_out and not split.held_out:
                    raise BundleError(f"{self.name}: split {name!r} is public but mixes the held-out split "
                                      f"{part.split!r} of {part.env}", [],
                                      hint=f"mark [tasks.splits.{name}] held-out = true")

    # -- tasks --------------------------------------------------------------------------

    @property
    def splits(self) -> dict[str, SplitInfo]:
        out = {}
        for name, split in self.manifest.tasks.splits.items():
            available = all(self.children[p.env].splits[p.split].available for p in split.mixture or ())
            out[name] = SplitInfo(name, split.held_out, available, split.size, False)
        return out

    def tasks(self, split: str, *, seed: int | None = None, limit: int | None = None) -> Sequence[Task]:
        """The mixture's tasks: each part's tasks (shuffled by ``seed`` if given) in
        proportion to its weight, spread evenly; as many as fit without repeating a task,
        or the split's ``size``. Raises :class:`EnvNotFoundError` for an unknown split."""
        tasks = self._built.get((split, seed))
        if tasks is None:
            tasks = self._built[(split, seed)] = self._build(split, seed)
        return tasks if limit is None else tasks[:limit]

    def _build(self, split: str, seed: int | None) -> list[Task]:
        spec = self.manifest.tasks.splits.get(split)
        if spec is None:
            known = ", ".join(self.manifest.tasks.splits)
            raise EnvNotFoundError(f"{self.name} has no split {split!r}; its splits: {known}")
        parts = spec.mixture or []
        pools = [self.children[p.env].tasks(p.split, seed=seed) for p in parts]
        weights = [p.weight for p in parts]
        fit = min(math.floor(len(pool) * sum(weights) / w + 1e-9) for pool, w in zip(pools, weights, strict=True))
        total = spec.size or fit
        counts = apportion(total, weights)
        for part, pool, count in zip(parts, pools, counts, strict=True):
            if count > len(pool):
                raise BundleError(f"{self.name}: split {split!r} asks for {total} tasks, so {count} from "
                                  f"{part.env} split {part.split!r}, which has {len(pool)}", [],
                                  hint=f"lower size (at most {fit} fit), or change the weights")
        taken = [0] * len(parts)
        out = []
        for index, i in enumerate(interleave(counts)):
            part, child_task = parts[i], pools[i][taken[i]]
            taken[i] += 1
            task = Task(id=f"{part.env}:{part.split}:{child_task.id}", split=split, data=child_task.data, index=index,
                        prompt=child_task.prompt, difficulty=child_task.difficulty, seed=child_task.seed)
            self._routes[(split, task.id)] = (self.children[part.env], child_task)
            out.append(task)
        return out

    def task(self, split: str, task_id: str) -> Task:
        if (split, task_id) not in self._routes:
            self.tasks(split)
        for task in self.tasks(split):
            if task.id == task_id:
                return task
        raise EnvNotFoundError(f"{self.name} split {split!r} has no task {task_id!r}")

    def _route(self, task: Task) -> tuple[Environment | CompositeEnvironment, Task]:
        route = self._routes.get((task.split, task.id))
        if route is None:
            self.task(task.split, task.id)  # builds the split, or raises
            route = self._routes[(task.split, task.id)]
        return route

    # -- episodes and scores: the child's ---------------------------------------------

    def episode(self, task: Task, *, seed: int | None = None, scoring: ScoringContext | None = None) -> Episode:
        child, child_task = self._route(task)
        return child.episode(child_task, seed=seed, scoring=scoring)

    def score(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
              state: Any = None, context: ScoringContext | None = None) -> Score:
        child, child_task = self._route(task)
        return child.score(child_task, completion_or_trajectory, state=state, context=context)

    async def ascore(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
                     state: Any = None, context: ScoringContext | None = None) -> Score:
        child, child_task = self._route(task)
        return await child.ascore(child_task, completion_or_trajectory, state=state, context=context)

    def check_scoring(self, context: ScoringContext) -> None:
        """Every child's check: one child's self-judging llm-judge refuses the run."""
        for child in self.children.values():
            child.check_scoring(context)

    def reference_actions(self, task: Task) -> list[Message]:
        child, child_task = self._route(task)
        return child.reference_actions(child_task)

    # -- provenance ---------------------------------------------------------------------

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = bundle_digest(self.root, self._plugins)
        return self._digest

    def provenance(self) -> dict[str, Any]:
        return provenance(self)

    def task_provenance(self, task: Task) -> dict[str, Any]:
        """Where ``task`` really comes from: the child's provenance, split and task id."""
        child, child_task = self._route(task)
        inner = child.task_provenance(child_task)  # a composite of composites: the leaf's
        if inner is not None:
            return inner
        prov = child.provenance()
        prov.pop("envhub_version", None)
        return {**prov, "split": child_task.split, "task_id": child_task.id}

    def close(self) -> None:
        for child in self.children.values():
            child.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<CompositeEnvironment {self.name}@{self.version} of {', '.join(sorted(self.children))}>"
