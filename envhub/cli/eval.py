"""``envhub eval``: roll out a policy on a split and record every episode."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envhub.cli._common import json_option, offline_option, registry_option
from envhub.errors import EnvhubError, ExitCode

if TYPE_CHECKING:
    from envhub.runtime import EvalResult, Evaluation, RolloutRecord

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
@click.option("--record-tokens", is_flag=True, envvar="ENVHUB_RECORD_TOKENS", show_envvar=True,
              help="Ask the openai:MODEL endpoint for each turn's token ids and log-probs (vLLM, SGLang) and keep "
                   "them in the records (turns_tokens, sampling).")
@click.option("--success-threshold", type=click.FloatRange(0, 1), default=1.0,
              help="A rollout succeeds (for pass@k) when its reward is at least this.")
@click.option("--with-heldout", is_flag=True, help="Fetch held-out splits too (needs access to the held-out store).")
@click.option("--force-self-judge", is_flag=True, help="Let an llm-judge verifier grade its own model's answers.")
@click.option("--executor", default="local", envvar="ENVHUB_EXECUTOR", show_envvar=True,
              help="Where rollouts run: local (this process), processes (-j worker processes on this machine), "
                   "or an executor an installed plugin provides.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), envvar="ENVHUB_JOBS", show_envvar=True,
              help="Worker processes for --executor processes (default: the number of CPUs), or actors for an "
                   "executor such as ray; -c is split among them.")
@click.option("--address", help="The cluster an executor that runs on one joins (--executor ray: HEAD:PORT; default: "
                                "RAY_ADDRESS, else a local cluster for the run).")
@trust_option
@registry_option
@offline_option
@json_option
@click.pass_context
def eval_(ctx: click.Context, target: str, split: str, policy_spec: str, limit: int | None,
          rollouts_per_task: int, concurrency: int, seed: int | None, output: Path | None, resume: bool,
          use_curriculum: bool, timeout_s: float | None, base_url: str | None, record_tokens: bool,
          success_threshold: float,
          with_heldout: bool,
          force_self_judge: bool, executor: str, jobs: int | None, address: str | None, trust: bool,
          registry: str | None, offline: bool, as_json: bool) -> None:
    """Roll out a policy on one split of an environment, writing one JSONL record per
    episode (messages, tool calls, reward, breakdown, timing, error, provenance) and a
    summary (mean reward, pass@k, per-criterion means, errors).

    REF|PATH is a bundle directory, an environment id (pulled if not cached), or the URL of
    an environment served by 'envhub serve' (http://HOST:PORT/NAMESPACE/NAME).

    Exit codes: 0 done (whatever the rewards), 1 every rollout failed, 2 invalid input.
    """
    import asyncio

    from envhub._evaluate import prepare_evaluation
    from envhub.cli._common import app_context

    context = app_context()
    evaluation = prepare_evaluation(
        target, policy_spec, split=split, n=limit, k=rollouts_per_task, concurrency=concurrency, seed=seed,
        output=output, output_dir=Path("envhub-runs") if output is None else None, resume=resume,
        curriculum=use_curriculum, timeout_s=timeout_s, success_threshold=success_threshold, executor=executor,
        jobs=jobs, executor_options={"address": address} if address else None, base_url=base_url,
        record_tokens=record_tokens, force_self_judge=force_self_judge, context=context, trust_code=trust,
        registry=registry, with_heldout=with_heldout, offline=True if offline else None)
    try:
        result = asyncio.run(_run_with_progress(evaluation, show=_progress_wanted(as_json)))
    except KeyboardInterrupt:
        assert evaluation.output is not None
        raise _Interrupted(evaluation.output,
                           _resume_command((ctx.find_root().obj or {}).get("argv"), evaluation.output)) from None
    finally:
        evaluation.close()

    if as_json:
        from envhub.cli._output import emit_json

        emit_json(result.as_json())
    else:
        _print_summary(result)
    if result.summary.environment_faults:
        from envhub.cli._output import message

        message(f"envhub: warning: {result.summary.environment_faults} tool call(s) in "
                f"{result.summary.environment_fault_rollouts} rollout(s) failed because the environment's code "
                "raised, not because of the model; their rewards do not measure the policy\n"
                f"  (the tool messages starting with 'Error:' in {result.output} say what raised)")
    if result.ran and result.failed == result.ran:
        from envhub.cli._output import message

        message(f"envhub: every rollout of this run failed ({result.ran}); the first error:\n  {result.first_error}\n"
                f"  (every record's 'error' field is in {result.output})")
        ctx.exit(ExitCode.CHECK_FAILED)


async def _run_with_progress(evaluation: Evaluation, *, show: bool) -> EvalResult:
    """Run ``evaluation``, with a progress bar (and the running mean reward) on stderr when
    wanted."""
    if not show:
        return await evaluation.run()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total_reward = 0.0
    done = 0
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("mean reward {task.fields[mean]}"), console=Console(stderr=True),
                  transient=True) as progress:
        bar = progress.add_task("rollouts", total=evaluation.remaining, mean="-")

        def advance(record: RolloutRecord) -> None:
            nonlocal total_reward, done
            total_reward += record.reward
            done += 1
            progress.update(bar, advance=1, mean=f"{total_reward / done:.3f}")

        return await evaluation.run(advance)


def _progress_wanted(as_json: bool) -> bool:
    import os

    return not as_json and not os.environ.get("CI") and sys.stderr.isatty()


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


def _print_summary(result: EvalResult) -> None:
    summary = result.summary
    lines = []
    if summary.rollouts and summary.environment is not None:
        env = summary.environment
        lines.append(f"{env.env} {env.version}  split {summary.split}  policy {summary.policy}")
        lines.append(f"  {summary.rollouts} rollout(s) of {summary.tasks} task(s)"
                     + (f" ({result.skipped} already done)" if result.skipped else ""))
        lines.append(f"  mean reward   {summary.mean_reward or 0.0:.4f}")
        if summary.mean_return is not None:
            lines.append(f"  mean return   {summary.mean_return:.4f} (turn rewards, {summary.rewarded_rollouts} "
                         f"rollout(s))")
        for k, value in summary.pass_at_k.items():
            lines.append(f"  pass@{k:<9} {value:.4f}")
        for name, value in summary.criteria.items():
            lines.append(f"  {name:<13} {value:.4f}")
        if summary.curriculum is not None:
            c = summary.curriculum
            spread = ", ".join(f"{level}: {n}" for level, n in c.draws_per_level.items())
            lines.append(f"  curriculum    {c.strategy}, draws per level {spread}; last level {c.last_level}")
        if summary.ended_by.get("environment") or summary.outcomes:
            ended = ", ".join(f"{k} {n}" for k, n in summary.ended_by.items())
            outcomes = ", ".join(f"{k} {n}" for k, n in summary.outcomes.items())
            lines.append(f"  ended by      {ended}" + (f"; outcomes {outcomes}" if outcomes else ""))
        kinds = ", ".join(f"{k} {n}" for k, n in summary.errors_by_kind.items())
        lines.append(f"  errors        {summary.errors}" + (f" ({kinds})" if summary.errors else ""))
        lines.append(f"  tool errors   {summary.tool_errors} (the model's mistakes)")
        lines.append(f"  environment faults  {summary.environment_faults}"
                     + (f" (in {summary.environment_fault_rollouts} rollout(s))" if summary.environment_faults else ""))
    else:
        lines.append("no rollouts")
    lines.append(f"records: {result.output}")
    lines.append(f"summary: {result.summary_path}")
    click.echo("\n".join(lines))
