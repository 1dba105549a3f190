"""The valkey-glide driver: glide clients behind the subset of redis-py's API that Conveyor uses.

The seam between Conveyor and a driver is that subset (see ``SEAM``): script calls
(``evalsha``, ``script_load``), a non-transactional ``pipeline`` of a few reads plus EVALSHA and
WAIT, the blocking wait on the marker (``bzpopmin``, ``zadd``), a few reads (``hgetall``, ``hmget``,
``zcard``, list/zset ranges, ``info``, ``config_get``), connection naming (per worker role) and
``close``. Errors come out as redis-py's exception classes, so error handling is shared.

Scripts run with glide's ``invoke_script`` (EVALSHA, loading the script itself on NOSCRIPT);
inside a batch glide has no script call (valkey-io/valkey-glide#4018), so EVALSHA is sent as a
custom command and a NOSCRIPT reply is handled by the caller, as with redis-py.

Differences, each explicit: one multiplexed connection per client instead of a pool
(``pool_size``/``pool_timeout`` do not apply); one server only (Cluster, Sentinel and ``unix://``
URLs raise ``ConveyorError``); of the URL options only ``ssl_ca_certs`` and
``ssl_cert_reqs`` (none, optional, required) are read, on rediss:// URLs (others raise). glide
never re-sends a command on its own here: Conveyor passes no command retry settings, and its
reconnect backoff (one connect retry, then every ~0.5 s: ``_CONNECT_RETRY``) only reopens the
connection. A closed client is not reopened: a call after ``close()`` is a ``ConveyorError``.
"""

from __future__ import annotations

from ._glide_async import GlideAsync
from ._glide_common import SEAM, GlideDriver
from ._glide_sync import GlideSync
from ._models import QueueSettings

__all__ = ["SEAM", "GlideAsync", "GlideDriver", "GlideSync", "glide_client"]


def glide_client(is_async: bool, url: str, settings: QueueSettings) -> GlideDriver:
    """The command client of a queue (a multiplexed connection; ``pool_size`` does not apply)."""
    return (GlideAsync if is_async else GlideSync)(url, settings)
