"""The PING probe the maintenance and listing scenarios share, against a real server."""

from __future__ import annotations

from bench.scenarios._common import Target
from bench.scenarios._ping_probe import PingProbe


def test_a_probe_stopped_as_soon_as_it_started_has_timed_a_ping(redis_url):
    # A listing with nothing parked reads its pages within milliseconds of start(): the probe
    # must have a sample by then (a full run's Redis 7.0 cell failed on a probe with none). The
    # stop is requested before the child even starts, the tightest case of that race.
    probe = PingProbe(Target("t", "valkey", None, "default", redis_url))
    probe._stop.set()
    probe.start()
    samples = probe.stop()
    assert len(samples) >= 1
    assert all(0 < s < 5 for s in samples)
