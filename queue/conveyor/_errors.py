"""Conveyor's exception hierarchy: every error a caller can meet derives from ConveyorError."""

from __future__ import annotations


class ConveyorError(Exception):
    """Base class of every Conveyor error."""


class InvalidNameError(ConveyorError, ValueError):
    """A queue, task, prefix or job id cannot be used in a key."""


class UnknownTaskError(ConveyorError, LookupError):
    """No task of that name is registered in the app."""


class SerializationError(ConveyorError, ValueError):
    """A payload could not be encoded, or a stored payload could not be decoded."""


class PayloadTooLargeError(ConveyorError, ValueError):
    """An encoded payload exceeds ``QueueSettings.max_payload_bytes``."""


class LeaseLostError(ConveyorError):
    """An ack, fail or extend presented a token that no longer holds the job's lease.

    The job was redelivered, finished by someone else, or its lease expired. Nothing was changed.
    """


class SchemaVersionError(ConveyorError):
    """The queue's data was written by an incompatible layout version."""


class ServerConfigError(ConveyorError):
    """The server is configured in a way that can lose jobs (strict mode only)."""


class ServerError(ConveyorError):
    """The server answered with an error reply: out of memory (maxmemory with noeviction), a write
    sent to a read-only replica, a key of the queue holding the wrong type, ... The message names
    the server and quotes its reply. A script refused for lack of memory changed nothing."""


class ConnectionFailedError(ConveyorError, ConnectionError):
    """The server could not be reached; the message names the address, never the credentials."""


class CredentialsRefusedError(ConnectionFailedError):
    """The server was reached but refused the URL's user or password (a ConnectionFailedError, as
    redis-py's AuthenticationError is a ConnectionError: a worker retries it, as a rotated password
    may be fixed on the server's side)."""


class PoolExhaustedError(ConnectionFailedError):
    """Every connection of the bounded pool stayed busy for ``pool_timeout`` seconds."""


class QueueClosedError(ConveyorError):
    """A call met its queue closed by ``close()`` / ``aclose()``. Not a ConnectionFailedError: a
    worker or a result wait does not retry it, and a closed glide client never reconnects.

    ``maybe_applied`` says whether the call may have changed the queue. True: the queue was closed
    while the call was in flight, after it may have been sent, so it may have been applied or not
    (an enqueue may have created its job: as after a timeout, repeat it only with a ``job_id``).
    False: nothing was sent (a call after ``close()`` on a glide client, which cannot reconnect),
    the call only reads (counts, get_job, jobs: nothing was changed), or a result wait was ended
    while it waited (a wait changes nothing on the server)."""

    def __init__(self, message: str, maybe_applied: bool) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied

    def __reduce__(self) -> tuple[type[QueueClosedError], tuple[str, bool]]:
        return type(self), (str(self), self.maybe_applied)


class PermissionDeniedError(ConveyorError, PermissionError):
    """The server's ACL refused a command or key to this user (NOPERM); the message names it."""


class ReplicationError(ConveyorError):
    """Fewer replicas than ``QueueSettings.wait_replicas`` confirmed a write within ``wait_timeout``.

    The write happened on the primary, but a failover now could lose it; the caller decides
    whether to retry (an enqueue with a ``job_id`` is safe to repeat).
    """


class JobFailedError(ConveyorError):
    """Raised by ``job.result()``: the job ended failed; ``error`` is its stored error text."""

    def __init__(self, job_id: str, state: str, error: str, attempts: int | None) -> None:
        tried = "" if attempts is None else f" after {attempts} attempt(s)"
        super().__init__(f"job {job_id!r} {state}{tried}: {error}")
        self.job_id, self.state, self.error, self.attempts = job_id, state, error, attempts


class JobCancelledError(JobFailedError):
    """Raised by ``job.result()``: the job was cancelled, while it ran (it ended ``cancelled``) or
    before (``cancel()`` removed it while waiting, delayed or waiting for a retry). A timed-out job
    ends failed instead, with an error naming its time limit (JobFailedError)."""
