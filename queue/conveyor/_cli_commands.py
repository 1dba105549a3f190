"""The ``conveyor`` commands (click). Error handling and exit codes live in ``_cli.main``."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ._app import Conveyor
from ._cli import (
    EXIT_FAILURE,
    EXIT_OK,
    BadInput,
    Interrupted,
    given_input,
    interruptible,
    load_app,
    stop_signals_exit_until_started,
)
from ._cli_metrics import scrape_timeout_option, serve_metrics
from ._client import Queue
from ._dispatch import WorkerOptions
from ._inspect import LISTABLE, BatchesInterrupted
from ._keys import validate_name
from ._models import Job
from ._runner import Runner, check_queues

F = TypeVar("F", bound=Callable[..., Any])
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
log = logging.getLogger("conveyor.cli")


def common(command: F) -> F:
    """Options every command takes: the app path, --debug and --log-level; and Ctrl-C's exit 130."""
    command = interruptible(command)
    command = click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")(
        command
    )
    command = click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
        default="info",
        show_default=True,
        help="Logging threshold (logs go to stderr).",
    )(command)
    return click.argument("app_path", metavar="APP")(command)


def _queues(app: Conveyor, options: tuple[str, ...]) -> list[str]:
    """The queues named by -q, each a list A,B, given once or more: ``-q a -q b`` is ``-q a,b``
    (click kept only the last); default: every queue of the app. Each must have a task of the
    app, so that a misspelt name is an error instead of an empty queue's zeros."""
    if not options:  # not '-q ""' (an unset variable in a script): that is an empty name
        return app.queue_names()
    names = []
    for option in options:
        names += [name.strip() for name in option.split(",")]
        if "" in names:
            raise BadInput(f"queue list {option!r} has an empty name")
    return _known_queues(app, names)


def _known_queues(app: Conveyor, names: list[str]) -> list[str]:
    """``check_queues``, whose ValueError is about the command line here."""
    with given_input():
        return check_queues(app, names)


def one_queue(help_text: str) -> Callable[[F], F]:
    """The -q of a command on one queue (jobs, retry, purge): given twice it is refused, where
    click kept the last, so ``purge -q a -q b --all`` purged b's failed jobs alone."""

    def once(_ctx: click.Context, _param: click.Parameter, given: tuple[str, ...]) -> str:
        if len(given) > 1:
            raise click.BadParameter(f"names one queue, given {len(given)} times ({', '.join(given)})")
        return given[0]

    return click.option("-q", "--queue", "queue_name", required=True, multiple=True, callback=once,
                        help=help_text)  # fmt: skip


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def cli() -> None:
    """Conveyor: run workers and inspect queues of an app given as 'package.module:app'."""


@cli.command()
@common
@click.option("-q", "--queues", "queues_option", metavar="A,B", multiple=True,
              help="Queues to serve (default: all); repeatable.")  # fmt: skip
@click.option("-c", "--concurrency", type=click.IntRange(1, 1000), default=8, show_default=True,
              help="Handler slots per queue.")  # fmt: skip
@click.option("--prefetch", type=click.IntRange(0, 1000), default=0, show_default=True,
              help="Jobs leased per queue beyond the running ones, for short jobs (see Tuning).")  # fmt: skip
@click.option("--burst", is_flag=True, help="Exit once the queues are drained.")
@click.option("--shutdown-timeout", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds running jobs get to finish after SIGTERM/SIGINT.")  # fmt: skip
@click.option("--scheduler/--no-scheduler", default=True, show_default=True,
              help="Also fire the app's periodic schedules (safe in any number of workers).")  # fmt: skip
@click.option("--metrics-port", type=click.IntRange(1, 65535), default=None,
              help="Serve Prometheus metrics on this port (needs the 'prometheus' extra).")  # fmt: skip
@click.option("--metrics-addr", default=None,
              help="Address of the metrics server (with --metrics-port; default 127.0.0.1).")  # fmt: skip
@scrape_timeout_option
@click.option("--block-timeout", type=click.FloatRange(min=0.01), default=2.0, show_default=True,
              help="Longest idle wait on the server, in seconds.")  # fmt: skip
def worker(
    *,
    app_path: str,
    queues_option: tuple[str, ...],
    concurrency: int,
    prefetch: int,
    burst: bool,
    shutdown_timeout: float,
    block_timeout: float,
    scheduler: bool,
    metrics_port: int | None,
    metrics_addr: str | None,
    metrics_scrape_timeout: float | None,
    debug: bool,
    log_level: str,
) -> int:
    """Process jobs of APP's queues until SIGTERM or SIGINT.

    Each queue gets its own worker with CONCURRENCY handler slots, so a backlog on one queue never
    delays another (the order of -q sets no priority). On SIGTERM or SIGINT the worker stops
    claiming, lets running jobs finish for up to --shutdown-timeout seconds, gives back the jobs
    not started and the async tasks still running (cancelled), and exits 0; a sync task still
    running in its thread keeps its job until the lease expires and lease recovery redelivers it.
    A second signal exits at once with code 3.
    """
    _setup_logging(log_level)
    with stop_signals_exit_until_started():
        app = load_app(app_path)
        queues = _known_queues(app, _queues(app, queues_option))  # none: the app has no task
        options: dict[str, Any] = {
            "concurrency": concurrency,
            "prefetch": prefetch,
            "burst": burst,
            "shutdown_timeout": shutdown_timeout,
            "block_timeout": block_timeout,
        }
        with given_input():  # click lets nan and inf through its ranges
            WorkerOptions(**options)
        if metrics_port is not None:
            serve_metrics(app, metrics_addr or "127.0.0.1", metrics_port, metrics_scrape_timeout)
        else:
            _no_metrics_port(metrics_addr, metrics_scrape_timeout)
        runner = Runner(app, queues, scheduler=scheduler, **options)
        mode = "asyncio" if runner.use_asyncio else "threads"
        log.info("worker %d starting: queues %s, %d slots per queue (%s)", os.getpid(),
                 ", ".join(runner.queues), concurrency, mode)  # fmt: skip
        stats = runner.run()
    for queue, numbers in stats.items():
        # "failed" counts failed attempts: most are retried, so it is not the queue's failed count
        log.info("queue %s: %d completed, %d attempt(s) failed (retried or failed for good)",
                 queue, numbers["processed"], numbers["failed"])  # fmt: skip
    log.info("worker %d stopped", os.getpid())
    return EXIT_OK


def _no_metrics_port(address: str | None, scrape_timeout: float | None) -> None:
    """A metrics option without --metrics-port would do nothing: refused, as a typo may be."""
    for name, value in (("--metrics-addr", address), ("--metrics-scrape-timeout", scrape_timeout)):
        if value is not None:
            raise BadInput(f"{name} is given without --metrics-port: no metrics would be served")


@cli.command()
@common
@click.option("-q", "--queues", "queues_option", metavar="A,B", multiple=True,
              help="Queues to show (default: all); repeatable.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line instead of a table.")
def info(*, app_path: str, queues_option: tuple[str, ...], as_json: bool, debug: bool, log_level: str) -> int:
    """Jobs per state in each queue of APP."""
    _setup_logging(log_level)
    app = load_app(app_path)
    queues = _queues(app, queues_option)
    if not queues:  # an empty table and exit 0 made a wrong app path look like empty queues
        raise BadInput("no queue to show: the app has no registered task (is its tasks' module imported?)")
    rows = [{"queue": q, **app.queue(q).counts()} for q in queues]
    app.close()
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return EXIT_OK
    columns = [
        "queue",
        "waiting",
        "delayed",
        "active",
        "completed",
        "failed",
        "cancelled",
        "total_completed",
        "total_failed",
    ]
    _table(columns, [[row.get(c, "") for c in columns] for row in rows])
    return EXIT_OK


@cli.command()
@common
@one_queue("The queue to list.")
@click.option("-s", "--state", type=click.Choice(LISTABLE), default="failed", show_default=True)
@click.option("-n", "--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Jobs to skip.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line instead of a table.")
def jobs(
    *,
    app_path: str,
    queue_name: str,
    state: str,
    limit: int,
    offset: int,
    as_json: bool,
    debug: bool,
    log_level: str,
) -> int:
    """A page of jobs of one queue in one state: waiting in claim order, delayed and active by due
    time, completed, failed and cancelled newest first. Jobs parked at their limit key's
    concurrency are waiting jobs too, listed after the ready ones (they wait for a slot of their key)."""
    _setup_logging(log_level)
    app = load_app(app_path)
    queue = _known_queues(app, [queue_name])[0]
    rows = [_job_row(job) for job in app.queue(queue).jobs(state, offset, limit)]
    app.close()
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return EXIT_OK
    columns = ["id", "task", "state", "priority", "attempts", "error"]
    _table(columns, [[row[c] for c in columns] for row in rows])
    return EXIT_OK


def failed_job_command(
    action: str, summary: str, verb: str
) -> Callable[[Callable[[Queue, list[str] | None], int]], Any]:
    """A command applying ``operation`` to failed jobs of one queue: the given ids, or all with --all."""

    def decorate(operation: Callable[[Queue, list[str] | None], int]) -> Any:
        @cli.command(
            name=action,
            help=f"{summary} failed jobs of one queue: JOB_IDS, or every one with --all. "
            "Given ids that are not failed are named and skipped (exit code 1).",
        )
        @common
        @one_queue("The queue of the failed jobs.")
        @click.option("--all", "every", is_flag=True, help="Every job failed when the command starts.")
        @click.argument("job_ids", nargs=-1)
        def command(
            *,
            app_path: str,
            queue_name: str,
            every: bool,
            job_ids: tuple[str, ...],
            debug: bool,
            log_level: str,
        ) -> int:
            if bool(job_ids) == every:
                raise BadInput(f"{action}: give job ids or --all (not both)")
            with given_input():
                for job_id in job_ids:
                    validate_name("job id", job_id)
            _setup_logging(log_level)
            app = load_app(app_path)
            queue = app.queue(_known_queues(app, [queue_name])[0])
            try:
                skipped = not_failed(queue, job_ids)
                done = operation(queue, list(job_ids) or None)
            except KeyboardInterrupt as exc:
                raise Interrupted(interrupted_after(exc, verb, queue_name)) from exc
            app.close()
            click.echo(f"{verb} {done} failed job(s) of queue {queue_name}")
            if skipped:  # named, and exit 1: a script must not mistake a typo for success
                click.echo(f"not failed, skipped: {', '.join(skipped)}", err=True)
                return EXIT_FAILURE
            return EXIT_OK

        return command

    return decorate


def interrupted_after(exc: KeyboardInterrupt, verb: str, queue_name: str) -> str:
    """What retry / purge had done when Ctrl-C came (the batches whose reply came, if any)."""
    if isinstance(exc, BatchesInterrupted):
        return str(exc)
    return f"no failed job of queue {queue_name} was {verb}"  # interrupted before its first batch


def not_failed(queue: Queue, job_ids: tuple[str, ...]) -> list[str]:
    """Each given id whose job is not failed now, with its state ("no such job" when none).
    Read before the operation: after it, a re-queued or deleted job looks like a skipped one."""
    skipped = []
    for job_id in dict.fromkeys(job_ids):
        job = queue.get_job(job_id)
        if job is None or job.state != "failed":
            skipped.append(f"{job_id} ({'no such job' if job is None else job.state})")
    return skipped


@failed_job_command("retry", "Re-queue (attempts reset)", "re-queued")
def _retry(queue: Queue, job_ids: list[str] | None) -> int:
    return queue.retry_failed(job_ids)


@failed_job_command("purge", "Delete", "deleted")
def _purge(queue: Queue, job_ids: list[str] | None) -> int:
    return queue.purge_failed(job_ids)


def _job_row(job: Job) -> dict[str, Any]:
    error = (job.error or "").strip().splitlines()
    return {"id": job.id, "task": job.task, "state": job.state, "priority": job.priority,
            "attempts": job.attempts, "error": error[0] if error else ""}  # fmt: skip


def _table(columns: list[str], rows: list[list[Any]]) -> None:
    cells = [columns] + [[str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for row in cells:
        click.echo("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())
