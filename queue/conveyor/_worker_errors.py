"""What a worker does with an error of its pump or maintenance: retry it, log it, or stop."""

from __future__ import annotations

import logging

import redis

from ._errors import (
    ConveyorError,
    CredentialsRefusedError,
    PermissionDeniedError,
    SchemaVersionError,
    ServerConfigError,
    ServerError,
)

log = logging.getLogger("conveyor.worker")  # the worker modules log here (_dispatch, _outcomes)
# Errors a worker outlives: it backs off and retries (lost server, restart, failover).
RECOVERABLE = (redis.RedisError, redis.exceptions.RedisClusterException, ConveyorError, OSError)
# Errors no retry can fix, though ConveyorErrors: a worker's run() ends with them (stops_worker).
FATAL = (SchemaVersionError,)


def report_pump_error(exc: BaseException) -> None:
    """Lost servers are expected (a warning); anything else is a bug worth its traceback. A call the
    server refused (credentials, ACL, a server error), or a server configuration strict mode refuses
    (an evicting policy), is retried too, since fixing the server's side lets the worker go on, but
    is not called a lost server."""
    refused = isinstance(exc, ServerError | PermissionDeniedError | CredentialsRefusedError)
    if isinstance(exc, RECOVERABLE):
        what = "call refused by the server" if refused else "lost the server"
        if isinstance(exc, ServerConfigError):
            what = "refuses the server's configuration"
        log.warning("worker %s (%s); retrying", what, exc)
    else:
        log.error("worker pump error; retrying", exc_info=exc)


def report_maintenance_error(exc: BaseException, traced: set[str]) -> None:
    """Log a failed maintenance tick, retried at the next one. A lost server is a warning alone; an
    unexpected error (a bug) gets its traceback the first time its kind is seen, not at every tick
    it recurs (``traced``: the kinds of this worker logged with one so far)."""
    kind = type(exc).__qualname__
    first = not isinstance(exc, RECOVERABLE) and kind not in traced
    traced.add(kind)
    log.warning("maintenance failed (%s); will retry", exc, exc_info=exc if first else None)


def stops_worker(exc: BaseException, queue: str, held: int) -> bool:
    """Whether a pump error ends the worker's run(), logged once if so: a queue of another layout
    version is refused by every call of this Conveyor, so retrying (and calling it a lost server)
    would go on for ever. Jobs still leased cannot be given back (their release is refused too):
    lease recovery redelivers them once their leases expire."""
    if not isinstance(exc, FATAL):
        return False
    kept = f"; {held} leased job(s) left to lease recovery" if held else ""
    log.error("worker of queue %r stops: %s (no retry can fix it%s)", queue, exc, kept)
    return True
