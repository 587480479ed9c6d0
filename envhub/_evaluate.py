"""``envhub.evaluate``: roll out a policy on one split of an environment, in code.

This is ``envhub eval`` as a function. It resolves what the command line names (an
environment id or directory, a policy spec such as ``"reference"`` or ``"openai:MODEL"``, an
executor name) through a :class:`envhub.context.Context`, and hands the rest to
:class:`envhub.runtime.Evaluation`::

    import envhub

    result = envhub.evaluate("acme/sql-shop@1.2.0", "openai:gpt-4o-mini", split="dev", k=4,
                             output="runs/dev.jsonl")
    print(result.summary.mean_reward, result.summary.pass_at_k)
    for record in result.records:
        ...
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.context import Context

if TYPE_CHECKING:
    from envhub.runtime import EnvironmentProtocol, EvalResult, Evaluation, Executor, RolloutRecord, RolloutSource
    from envhub.runtime.policies import Policy

__all__ = ["aevaluate", "evaluate", "prepare_evaluation"]


def evaluate(env: EnvironmentProtocol | str | os.PathLike[str], policy: Policy | str, *, split: str,
             n: int | None = None, k: int = 1, concurrency: int = 16, seed: int | None = None,
             output: str | os.PathLike[str] | None = None, output_dir: str | os.PathLike[str] | None = None,
             resume: bool = False, curriculum: bool = False, timeout_s: float | None = None,
             success_threshold: float = 1.0, executor: Executor | str = "local", jobs: int | None = None,
             executor_options: Mapping[str, str] | None = None,
             base_url: str | None = None, record_tokens: bool = False, force_self_judge: bool = False,
             context: Context | None = None, trust_code: bool = False, registry: str | None = None,
             with_heldout: bool = False, offline: bool | None = None,
             on_record: Callable[[RolloutRecord], None] | None = None) -> EvalResult:
    """Roll out ``policy`` on ``split`` of ``env`` and return the typed result: the summary,
    the records, where they were written, and how many rollouts ran, were skipped and failed.

    ``env`` is a loaded environment (:class:`envhub.EnvironmentProtocol`, left open), or an id, directory or
    served URL (loaded with ``context``, ``trust_code``, ``registry``, ``with_heldout`` and
    ``offline``, and closed at the end). ``policy`` is a policy object (left open), or a spec
    (``reference``, ``noop``, ``openai:MODEL`` with ``base_url``, ``python:MODULE:FUNC``, or
    one a plugin provides). ``n`` tasks (default all; the first ``n`` after shuffling with
    ``seed``), each played ``k`` times, ``concurrency`` at once, through ``executor``
    (``"local"`` or one a plugin provides, made with ``executor_options`` such as
    ``{"address": "HEAD:PORT"}`` for ``ray``); with ``curriculum``, ``n`` draws of the manifest's
    curriculum instead. Records are appended to ``output`` (``resume`` continues a run that
    file holds), else to a new file under ``output_dir``, else kept only in the result.
    ``record_tokens`` makes a spec's policy keep each turn's token ids and log-probs in the
    records (``turns_tokens``); a policy object is made with ``record_tokens=True`` instead.
    ``on_record`` is called with each :class:`envhub.RolloutRecord` as it finishes.
    ``context=None`` makes one for this call (:meth:`Context.create`).

    Raises :class:`envhub.errors.UsageError` for a split, policy, executor or output that
    cannot be used, and what loading raises (:class:`envhub.errors.EnvNotFoundError`,
    :class:`envhub.errors.TrustError`, ...). Call :func:`aevaluate` from a running event loop.
    """
    evaluation = prepare_evaluation(
        env, policy, split=split, n=n, k=k, concurrency=concurrency, seed=seed, output=output, output_dir=output_dir,
        resume=resume, curriculum=curriculum, timeout_s=timeout_s, success_threshold=success_threshold,
        executor=executor, jobs=jobs, executor_options=executor_options, base_url=base_url, record_tokens=record_tokens,
        force_self_judge=force_self_judge, context=context, trust_code=trust_code, registry=registry,
        with_heldout=with_heldout, offline=offline)
    try:
        return asyncio.run(evaluation.run(on_record))
    finally:
        evaluation.close()


async def aevaluate(env: EnvironmentProtocol | str | os.PathLike[str], policy: Policy | str, *, split: str,
                    **options: Any) -> EvalResult:
    """:func:`evaluate` for a caller already inside an event loop (same arguments)."""
    on_record = options.pop("on_record", None)
    evaluation = prepare_evaluation(env, policy, split=split, **options)
    try:
        return await evaluation.run(on_record)
    finally:
        evaluation.close()


def prepare_evaluation(env: EnvironmentProtocol | str | os.PathLike[str], policy: Policy | str, *, split: str,
                       n: int | None = None, k: int = 1, concurrency: int = 16, seed: int | None = None,
                       output: str | os.PathLike[str] | None = None, output_dir: str | os.PathLike[str] | None = None,
                       resume: bool = False, curriculum: bool = False, timeout_s: float | None = None,
                       success_threshold: float = 1.0, executor: Executor | str = "local", jobs: int | None = None,
                       executor_options: Mapping[str, str] | None = None,
                       base_url: str | None = None, record_tokens: bool = False, force_self_judge: bool = False,
                       context: Context | None = None, trust_code: bool = False, registry: str | None = None,
                       with_heldout: bool = False, offline: bool | None = None) -> Evaluation:
    """The planned :class:`envhub.runtime.Evaluation` that :func:`evaluate` runs, for a caller
    that wants to see it first (``remaining``, ``skipped``, ``output``: the ``envhub eval``
    progress bar and its Ctrl-C message). ``await evaluation.run()`` plays it, and
    ``evaluation.close()`` closes an environment loaded here."""
    from envhub.runtime import Evaluation, Executor, make_executor

    if record_tokens and not isinstance(policy, str):
        from envhub.errors import UsageError

        raise UsageError("record_tokens applies to a policy named by its spec, not to a policy object",
                         hint="make the policy with make_policy(..., record_tokens=True) and leave record_tokens off")
    if context is None:
        context = Context.create()
    # Before loading: a wrong executor name, or what it cannot run, fails fast.
    if isinstance(executor, Executor) and executor_options:
        from envhub.errors import UsageError

        raise UsageError("executor_options apply to an executor named by its name, not to an executor object",
                         hint="pass the options to the executor when you make it")
    runner = executor if isinstance(executor, Executor) else make_executor(executor, plugins=context.plugins,
                                                                          options=executor_options)
    _check_executor(runner, executor, env, policy, jobs)
    loaded = isinstance(env, (str, os.PathLike))
    environment = _load(env, context=context, trust_code=trust_code, registry=registry, with_heldout=with_heldout,
                        offline=offline) if isinstance(env, (str, os.PathLike)) else env
    made: Policy | None = None
    try:
        if isinstance(policy, str):
            made = _make_policy(policy, environment, context=context, base_url=base_url, max_connections=concurrency,
                                record_tokens=record_tokens)
        chosen = made if made is not None else policy
        assert not isinstance(chosen, str)
        evaluation = Evaluation.prepare(
            environment, chosen, split=split, limit=n, rollouts_per_task=k, concurrency=concurrency,
            seed=seed, output=Path(output) if output is not None else None,
            output_dir=Path(output_dir) if output_dir is not None else None, resume=resume, curriculum=curriculum,
            timeout_s=timeout_s, success_threshold=success_threshold, executor=runner,
            force_self_judge=force_self_judge, close_policy=made is not None, close_env=loaded,
            source=_source(env, policy, environment, context=context, trust_code=trust_code, registry=registry,
                           with_heldout=with_heldout, offline=offline, base_url=base_url,
                           record_tokens=record_tokens) if runner.needs_source else None,
            workers=jobs)
    except BaseException:
        if made is not None:
            _close_now(made)
        if loaded:
            environment.close()
        raise
    return evaluation


def _make_policy(spec: str, environment: EnvironmentProtocol, *, context: Context, base_url: str | None,
                 max_connections: int, record_tokens: bool) -> Policy:
    from envhub.runtime.policies import make_policy

    sampling = environment.manifest.config.sampling
    return make_policy(spec, base_url=base_url, max_connections=max_connections, record_tokens=record_tokens,
                       sampling=sampling.model_dump(exclude_none=True, exclude_defaults=True) if sampling else None,
                       settings=context.settings, plugins=context.plugins)


def _check_executor(runner: Executor, name: Executor | str, env: object, policy: object, jobs: int | None) -> None:
    """Refuse, before loading anything, ``jobs`` for an executor without workers, and an
    environment or policy object for an executor that loads them in other processes."""
    from envhub.errors import UsageError

    label = name if isinstance(name, str) else type(runner).__name__
    if jobs is not None and not runner.uses_workers:
        raise UsageError(f"-j/--jobs applies to an executor with worker processes; executor {label!r} has none",
                         hint="pass --executor processes -j N, or leave -j out")
    if runner.needs_source:
        if not isinstance(env, (str, os.PathLike)):
            raise UsageError(f"executor {label!r} loads the environment in each worker process, so it needs the "
                             f"environment's id, directory or URL, not a loaded {type(env).__name__}",
                             hint="pass the id, directory or URL, or use executor='local'")
        if not isinstance(policy, str):
            raise UsageError(f"executor {label!r} rebuilds the policy in each worker process, so it needs a policy "
                             f"spec, not a {type(policy).__name__} object",
                             hint="name the policy by its spec ('python:MODULE:FUNC' for your own function, "
                                  "'openai:MODEL'), or use executor='local'")


def _source(env: str | os.PathLike[str] | EnvironmentProtocol, policy: Policy | str,
            environment: EnvironmentProtocol, *,
            context: Context, trust_code: bool, registry: str | None, with_heldout: bool, offline: bool | None,
            base_url: str | None, record_tokens: bool) -> RolloutSource:
    """What a worker process needs to load ``environment`` and rebuild ``policy`` itself."""
    from envhub.runtime import RolloutSource

    assert isinstance(env, (str, os.PathLike)) and isinstance(policy, str)  # _check_executor
    ref = os.fspath(env)
    if Path(ref).is_dir():
        ref = str(Path(ref).resolve())
    return RolloutSource(env=ref, policy=policy,
                         load=_load_for_worker, settings=context.settings, cwd=context.cwd, trust_code=trust_code,
                         registry=registry, with_heldout=with_heldout, offline=offline, base_url=base_url,
                         record_tokens=record_tokens,
                         digest=None if Path(ref).is_dir() else environment.digest)


def _load_for_worker(source: RolloutSource, concurrency: int) -> tuple[EnvironmentProtocol, Policy]:
    """A worker process's environment and policy, loaded as the driver loaded them (the
    ``load`` of :class:`envhub.runtime.RolloutSource`)."""
    context = Context.create(settings=source.settings, cwd=source.cwd)
    environment = _load(source.env, context=context, trust_code=source.trust_code, registry=source.registry,
                        with_heldout=source.with_heldout, offline=source.offline)
    try:
        policy = _make_policy(source.policy, environment, context=context, base_url=source.base_url,
                              max_connections=concurrency, record_tokens=source.record_tokens)
    except BaseException:
        environment.close()
        raise
    return environment, policy


def _close_now(policy: Policy) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(policy.aclose())
    else:
        loop.create_task(policy.aclose())


def _load(ref: str | os.PathLike[str], *, context: Context, trust_code: bool, registry: str | None,
          with_heldout: bool, offline: bool | None) -> EnvironmentProtocol:
    from envhub._load import load

    return load(ref, context=context, trust_code=trust_code, registry=registry, with_heldout=with_heldout,
                offline=offline)
