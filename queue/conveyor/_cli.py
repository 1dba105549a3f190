"""Entry point of the ``conveyor`` command: error handling, exit codes and app loading.

Exit codes: 0 done (a worker that stopped on SIGTERM/SIGINT or drained in ``--burst`` included),
1 a runtime failure (for example the server could not be reached, or the metrics port is in use)
or an internal error, 2 bad input (a usage error, an app path that does not import, an unknown
queue or task, an invalid option), 3 a second signal forced the worker to exit without waiting
for its jobs (their leases expire and they are redelivered), 130 (128 + SIGINT, as a shell reports
it) Ctrl-C ended an inspection or admin command (info, jobs, retry, purge), saying so in one line
(retry and purge: how many jobs were already done). Only ``BadInput`` is exit 2: the
commands turn their checks of the command line into it, so a ValueError raised anywhere else (a
bug, bad data on the server) is not taken for a typo.
Errors are one line on stderr, with the traceback above it for an internal error (an exception
that is not a ConveyorError or OSError); ``--debug`` (or CONVEYOR_DEBUG=1) always shows it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ._app import Conveyor
from ._errors import ConveyorError
from ._runner import FORCED_EXIT_CODE

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, EXIT_FORCED = 0, 1, 2, FORCED_EXIT_CODE
EXIT_INTERRUPTED = 128 + signal.SIGINT
F = TypeVar("F", bound=Callable[..., Any])


class BadInput(ConveyorError, ValueError):
    """Input the command cannot act on; reported in one line with exit code 2."""


class StoppedBeforeStart(BaseException):
    """SIGTERM or SIGINT (its name the argument) came while the worker command started (its app
    importing, ...): exit 0 at once."""


class Interrupted(BaseException):
    """Ctrl-C (KeyboardInterrupt) ended a command; the argument says what it had done, if anything.
    Not a KeyboardInterrupt: click turns those into Abort, which ended the command with code 1
    and a blank line, as a failure."""


def interruptible(command: F) -> F:
    """``command`` with its KeyboardInterrupt made ``Interrupted`` (exit 130, one line)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt as exc:
            raise Interrupted() from exc

    return run  # type: ignore[return-value]


def _stopped_before_start(signum: int, _frame: object) -> None:
    raise StoppedBeforeStart(signal.Signals(signum).name)


@contextlib.contextmanager
def stop_signals_exit_until_started() -> Iterator[None]:
    """While inside (until the Runner's own handlers take over), SIGTERM or SIGINT ends the command
    with code 0, as once the worker runs. SIGTERM's default action ends it too, except in PID 1 (a
    container's worker started in exec form), for which the kernel drops it: the worker started
    anyway and ran until the SIGKILL; SIGINT's (KeyboardInterrupt) ended it with code 1."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _stopped_before_start) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def given_input() -> Iterator[None]:
    """Checks of what the command line gave (a queue list, option values, job ids): their
    ValueError or TypeError is bad input; elsewhere one is a fault, reported as such."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise BadInput(str(exc)) from exc


def load_app(path: str) -> Conveyor:
    """The ``Conveyor`` named by ``module.path:attribute`` (the current directory is importable)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise BadInput(f"app path {path!r} must look like 'package.module:app'")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # a module that exits on import (argparse at top level)
        # left the command with the module's exit code (3 is a forced worker exit) and no message
        raise BadInput(f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}") from exc
    app: Any = module
    for part in attribute.split("."):
        if not hasattr(app, part):
            raise BadInput(f"module {module_name!r} has no attribute {attribute!r}")
        app = getattr(app, part)
    if not isinstance(app, Conveyor):
        raise BadInput(f"{path!r} is a {type(app).__name__}, not a conveyor.Conveyor app")
    return app


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _traceback_if(debug: bool) -> None:
    """With --debug, the traceback above the error line; not instead of it: re-raised, the error
    left main() for Python to print, with exit code 1 whatever it was (bad input is 2)."""
    if debug:
        traceback.print_exc()


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args or os.environ.get("CONVEYOR_DEBUG", "") not in ("", "0")
    try:
        import click  # noqa: PLC0415 - the cli extra is optional: say so instead of a traceback

        from ._cli_commands import cli  # noqa: PLC0415
    except ImportError as exc:
        print(f"conveyor: error: the command line needs the 'cli' extra ({exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        result = cli.main(args, prog_name="conveyor", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except StoppedBeforeStart as exc:
        print(f"conveyor: received {exc} before the worker started: exiting", file=sys.stderr)
        return EXIT_OK
    except Interrupted as exc:
        print(f"conveyor: interrupted (SIGINT){f': {exc}' if str(exc) else ''}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except click.exceptions.Abort as exc:  # Ctrl-C outside a command (its arguments parsing) too
        return EXIT_INTERRUPTED if isinstance(exc.__cause__, KeyboardInterrupt) else EXIT_FAILURE
    except click.UsageError as exc:
        if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):  # click >= 8.2
            exc.show()  # the help, as it is: squeezed into one error line it could not be read
            return EXIT_BAD_INPUT
        hint = f" (see 'conveyor {exc.ctx.info_name} --help')" if exc.ctx and exc.ctx.parent else ""
        print(f"conveyor: error: {_one_line(exc.format_message())}{hint}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ConveyorError as exc:  # BadInput included; a ConveyorError's message names the problem
        _traceback_if(debug)
        print(f"conveyor: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT if isinstance(exc, BadInput) else EXIT_FAILURE
    except OSError as exc:
        _traceback_if(debug)
        print(f"conveyor: error: {type(exc).__name__}: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:
        traceback.print_exc()  # a fault in Conveyor or in the app's code: where it is matters
        print(f"conveyor: error: internal error (traceback above): {type(exc).__name__}: "
              f"{_one_line(str(exc))}", file=sys.stderr)  # fmt: skip
        return EXIT_FAILURE
    return result if isinstance(result, int) else EXIT_OK
