"""``envhub eval``: roll out a policy on a split and record every episode."""

from __future__ import annotations

import itertools
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from envhub.cli._common import json_option, offline_option, registry_option
from envhub.errors import EnvhubError, ExitCode, UsageError

__all__ = ["eval_", "trust_option"]


def trust_option(f: Any) -> Any:
    return click.option("--trust", is_flag=True, envvar="ENVHUB_TRUST", show_envvar=True,
                        help="Run the environment's own code (tools, responders, python verifiers).")(f)


@click.command("eval")
@click.argument("target", metavar="REF|PATH")
@click.option("--split", "-s", required=True, help="The split to evaluate on; never falls back to another.")
@click.option("--policy", "-p", "policy_spec", default="reference", show_default=True,
              help="reference | noop | openai:MODEL | python:MODULE:FUNC")
@click.option("-n", "--limit", type=click.IntRange(min=1), help="At most this many tasks (default: all).")
@click.option("-k", "--rollouts-per-task", type=click.IntRange(min=1), default=1, help="Rollouts of each task.")
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=16, envvar="ENVHUB_CONCURRENCY",
              show_envvar=True, help="Episodes running at once.")
@click.option("--seed", type=int, help="Shuffle the tasks with this seed (default: file order); also seeds rollouts.")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path, dir_okay=False),
              help="JSONL file for the rollout records (default: under ./envhub-runs/).")
@click.option("--resume", is_flag=True, help="Skip rollouts already in the output file.")
@click.option("--curriculum", "use_curriculum", is_flag=True,
              help="Draw -n tasks by the manifest's [config.curriculum] (batches of --concurrency), "
                   "instead of each task in turn.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
              help="Wall-clock limit per episode in seconds (default: the manifest's timeout-s).")
@click.option("--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint for openai:MODEL policies.")
@click.option("--success-threshold", type=click.FloatRange(0, 1), default=1.0,
              help="A rollout succeeds (for pass@k) when its reward is at least this.")
@click.option("--with-heldout", is_flag=True, help="Fetch held-out splits too (needs access to the held-out store).")
@click.option("--force-self-judge", is_flag=True, help="Let an llm-judge verifier grade its own model's answers.")
@click.option("--executor", default="local", envvar="ENVHUB_EXECUTOR", show_envvar=True,
              help="Where rollouts run: local (this process), or an executor an installed plugin provides.")
@trust_option
@registry_option
@offline_option
@json_option
@click.pass_context
def eval_(ctx: click.Context, target: str, split: str, policy_spec: str, limit: int | None,
          rollouts_per_task: int, concurrency: int, seed: int | None, output: Path | None, resume: bool,
          use_curriculum: bool, timeout_s: float | None, base_url: str | None, success_threshold: float, with_heldout: bool,
          force_self_judge: bool, executor: str, trust: bool, registry: str | None, offline: bool,
          as_json: bool) -> None:
    """Roll out a policy on one split of an environment, writing one JSONL record per
    episode (messages, tool calls, reward, breakdown, timing, error, provenance) and a
    summary (mean reward, pass@k, per-criterion means, errors).

    REF|PATH is a bundle directory, an environment id (pulled if not cached), or the URL of
    an environment served by 'envhub serve' (http://HOST:PORT/NAMESPACE/NAME).

    Exit codes: 0 done (whatever the rewards), 1 every rollout failed, 2 invalid input.
    """
    import asyncio
    import functools

    from envhub.runtime import load
    from envhub.runtime import CurriculumRun, EvalRun, plan_jobs, read_records, summarize
    from envhub.runtime import RolloutPlan, make_executor
    from envhub.runtime.policies import make_policy
    from envhub.settings import load_settings

    settings = load_settings()
    if use_curriculum and rollouts_per_task != 1:
        raise UsageError("--curriculum draws each rollout's task itself; it takes no -k",
                         hint="pass -n N for the number of draws")
    runner = make_executor(executor)  # before loading: a wrong name fails fast
    env = load(target, trust_code=trust, registry=registry, with_heldout=with_heldout,
               offline=offline or settings.offline, settings=settings)
    try:
        curriculum = _curriculum(env, split, seed, limit, success_threshold) if use_curriculum else None
        tasks = env.tasks(split, seed=seed, limit=1 if curriculum is not None else limit)
        sampling = env.manifest.config.sampling
        policy = make_policy(policy_spec, base_url=base_url, max_connections=concurrency,
                             sampling=sampling.model_dump(exclude_none=True, exclude_defaults=True) if sampling else None,
                             settings=settings)
        env.use_policy_model(policy.model, force_self_judge=force_self_judge)
        if policy.name == "reference" and len(tasks):
            # Refused before the run, not once per rollout: a served held-out split has no references here.
            env.reference_actions(tasks[0])
        provenance = {**env.provenance(), "policy": policy.name, "split": split}
        out = output or _new_default_output(env.name, env.version, split, policy.name)
        plan = RolloutPlan(env, policy, timeout_s=timeout_s or env.manifest.config.timeout_s,
                           concurrency=concurrency, provenance=provenance)
        run: EvalRun | CurriculumRun
        if curriculum is not None:
            assert curriculum.total is not None
            run = CurriculumRun(plan, curriculum, curriculum.total, out, resume=resume, executor=runner, run_seed=seed)
            remaining = run.prepare()
            skipped = curriculum.total - remaining
            play = run.run
        else:
            run = EvalRun(plan, plan_jobs(tasks, rollouts_per_task, seed), out, resume=resume, executor=runner)
            todo = run.prepare()
            remaining, skipped = len(todo), len(run.jobs) - len(todo)
            play = functools.partial(run.run, todo)
        failures: list[str] = []
        try:
            asyncio.run(_run_with_progress(play, policy, remaining, failures, show=_progress_wanted(as_json)))
        except KeyboardInterrupt:
            raise _Interrupted(out, _resume_command((ctx.find_root().obj or {}).get("argv"), out)) from None
    finally:
        env.close()

    summary = summarize(read_records(out), success_threshold=success_threshold)
    summary.update({"output": str(out), "ran": remaining, "skipped": skipped})
    summary_path = out.with_name(out.name.removesuffix(".jsonl") + ".summary.json")
    import json

    summary_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(summary)
    else:
        _print_summary(summary, summary_path)
    if remaining and len(failures) == remaining:
        from envhub.cli._output import message

        message(f"envhub: every rollout of this run failed ({remaining}); the first error:\n  {failures[0]}\n"
                f"  (every record's 'error' field is in {out})")
        ctx.exit(ExitCode.CHECK_FAILED)


def _curriculum(env: Any, split: str, seed: int | None, limit: int | None, success_threshold: float) -> Any:
    """The curriculum of ``env``'s manifest over ``split``, for ``limit`` draws (default: the
    split's size). Raises UsageError when the manifest declares none."""
    from envhub.runtime import Curriculum

    manifest = getattr(env, "manifest", None)
    spec = manifest.config.curriculum if manifest is not None else None
    if spec is None or spec.strategy == "none":
        raise UsageError(f"{env.name} declares no curriculum", hint="add [config.curriculum] to its manifest, "
                         "e.g. curriculum = { strategy = \"success-window\", window = 32, promote-at = 0.8 }")
    if limit is None and env.splits[split].generated:
        raise UsageError(f"--curriculum on the generated split {split!r} needs the number of draws", hint="pass -n N")
    total = limit if limit is not None else len(env.tasks(split))
    return Curriculum(env, split, spec, seed=seed, total=total, success_threshold=success_threshold)


async def _run_with_progress(play: Any, policy: Any, remaining: int, failures: list[str], *, show: bool) -> None:
    """Run (``play(on_record)``), with a progress bar on stderr when wanted; appends the
    error of each failed rollout to ``failures``, in the order they finished."""
    try:
        if not show:
            def count(record: dict[str, Any]) -> None:
                if record.get("error") is not None:
                    failures.append(str(record["error"]))

            await play(count)
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        total_reward = 0.0
        done = 0
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("mean reward {task.fields[mean]}"), console=Console(stderr=True),
                      transient=True) as progress:
            bar = progress.add_task("rollouts", total=remaining, mean="-")

            def advance(record: dict[str, Any]) -> None:
                nonlocal total_reward, done
                if record.get("error") is not None:
                    failures.append(str(record["error"]))
                total_reward += float(record["reward"])
                done += 1
                progress.update(bar, advance=1, mean=f"{total_reward / done:.3f}")

            await play(advance)
    finally:
        await policy.aclose()


def _progress_wanted(as_json: bool) -> bool:
    import os

    return not as_json and not os.environ.get("CI") and sys.stderr.isatty()


def _new_default_output(name: str, version: str, split: str, policy: str) -> Path:
    """A new, empty records file under ``./envhub-runs/``, created here so that no other run
    (another ``eval`` started in the same second) can take its name: the first free one of
    ``SPLIT.POLICY.STAMP.jsonl``, ``SPLIT.POLICY.STAMP-2.jsonl``, ... An existing file is
    never reused."""
    import os

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", policy)
    directory = Path("envhub-runs") / f"{name.replace('/', '--')}-{version}"
    directory.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = directory / f"{split}.{safe}.{stamp}{f'-{n}' if n > 1 else ''}.jsonl"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")  # itertools.count never ends


class _Interrupted(EnvhubError):
    """Ctrl-C during a run: what was recorded stays, and the message says how to go on."""

    exit_code = ExitCode.INTERRUPTED

    def __init__(self, out: Path, command: str) -> None:
        super().__init__(f"interrupted; the rollouts that finished are in {out}",
                         hint=f"resume the run with: {command}")


def _resume_command(argv: list[str] | None, out: Path) -> str:
    """The command line that resumes this run: the one given, writing to ``out``, with
    ``--resume``."""
    import shlex

    args = list(argv) if argv is not None else sys.argv[1:]
    given = {a.split("=", 1)[0] for a in args}
    if not given & {"-o", "--output"} and not any(a.startswith("-o") and len(a) > 2 for a in args):
        args += ["-o", str(out)]
    if "--resume" not in given:
        args.append("--resume")
    return shlex.join(["envhub", *args])


def _print_summary(summary: dict[str, Any], summary_path: Path) -> None:
    env = summary.get("environment") or {}
    lines = []
    if summary["rollouts"]:
        lines.append(f"{env.get('env')} {env.get('version')}  split {summary['split']}  policy {summary['policy']}")
        lines.append(f"  {summary['rollouts']} rollout(s) of {summary['tasks']} task(s)"
                     + (f" ({summary['skipped']} already done)" if summary["skipped"] else ""))
        lines.append(f"  mean reward   {summary['mean_reward']:.4f}")
        for k, value in summary["pass_at_k"].items():
            lines.append(f"  pass@{k:<9} {value:.4f}")
        for name, value in summary["criteria"].items():
            lines.append(f"  {name:<13} {value:.4f}")
        if "curriculum" in summary:
            c = summary["curriculum"]
            spread = ", ".join(f"{level}: {n}" for level, n in c["draws_per_level"].items())
            lines.append(f"  curriculum    {c['strategy']}, draws per level {spread}; last level {c['last_level']}")
        errors = summary["errors"]
        kinds = ", ".join(f"{k} {n}" for k, n in summary["errors_by_kind"].items())
        lines.append(f"  errors        {errors}" + (f" ({kinds})" if errors else ""))
    else:
        lines.append("no rollouts")
    lines.append(f"records: {summary['output']}")
    lines.append(f"summary: {summary_path}")
    click.echo("\n".join(lines))
