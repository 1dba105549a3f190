"""Conveyor: a fast, correct task queue for Redis, Valkey and Dragonfly, sync and asyncio."""

from ._acl import acl_rules
from ._app import Conveyor
from ._async_client import AsyncQueue
from ._async_worker import AsyncWorker
from ._client import Queue
from ._connection import redact_url
from ._errors import (
    ConnectionFailedError,
    ConveyorError,
    CredentialsRefusedError,
    InvalidNameError,
    JobCancelledError,
    JobFailedError,
    LeaseLostError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PoolExhaustedError,
    QueueClosedError,
    ReplicationError,
    SchemaVersionError,
    SerializationError,
    ServerConfigError,
    ServerError,
    UnknownTaskError,
)
from ._hooks import current_job
from ._metrics import instrument
from ._models import Job, JobSpec, Limit, QueueSettings
from ._retry import Backoff
from ._schedule import Schedule
from ._serialize import JSONSerializer, Serializer
from ._tasks import Task
from ._tracing import instrument_tracing
from ._worker import Worker

__version__ = "0.1.0"


__all__ = [
    "AsyncQueue",
    "AsyncWorker",
    "Backoff",
    "ConnectionFailedError",
    "Conveyor",
    "ConveyorError",
    "CredentialsRefusedError",
    "InvalidNameError",
    "JSONSerializer",
    "Job",
    "JobCancelledError",
    "JobFailedError",
    "JobSpec",
    "LeaseLostError",
    "Limit",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PoolExhaustedError",
    "Queue",
    "QueueClosedError",
    "QueueSettings",
    "ReplicationError",
    "Schedule",
    "SchemaVersionError",
    "SerializationError",
    "Serializer",
    "ServerConfigError",
    "ServerError",
    "Task",
    "UnknownTaskError",
    "Worker",
    "__version__",
    "acl_rules",
    "current_job",
    "instrument",
    "instrument_tracing",
    "redact_url",
]
