"""The stated like-for-like headline points: one list, read by the Home, History and Servers pages.

Each point names its conditions in plain words (``label``) and as the case parameters that hold
them (``where``; a list with None also matches older files that did not record the parameter).
They are the cases the harness itself marks as headlines, and every committed run that measured
the scenario holds them; a run without the case shows "not measured in this run", never another case.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pandas as pd

from bench.report.compare import select


class Point(NamedTuple):
    """One headline figure: a scenario's metric at stated conditions."""

    label: str
    scenario: str
    metric: str
    where: dict[str, Any]
    higher_better: bool = True

    def rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The summary rows of ``frame`` at this point's scenario, metric and conditions."""
        return select(frame, scenario=self.scenario, metric=self.metric, **self.where)


PROCESS = Point("process, concurrency 32", "process", "jobs_per_s", {"concurrency": 32, "payload_bytes": 64})
LIFECYCLE = Point("lifecycle, 64 B, 8 tasks", "lifecycle", "lifecycles_per_s",
                  {"concurrency": 8, "payload_bytes": 64})
ENQUEUE = Point("enqueue, one per call, 1 caller", "enqueue-single", "jobs_per_s",
                {"payload_bytes": 64, "callers": [1, None], "batching": [False, None]})
ENQUEUE_MANY = Point("enqueue_many, 1 producer", "enqueue-bulk", "jobs_per_s",
                     {"payload_bytes": 64, "producers": [1, None]})
LATENCY = Point("latency p99, unloaded", "latency", "p99_ms", {"load": "unloaded"}, higher_better=False)
MEMORY = Point("memory per job, 256 B", "memory", "bytes_per_job", {"payload_bytes": 256},
               higher_better=False)
REFERENCE = Point("machine check: EVALSHA, one at a time (no Conveyor)", "reference",
                  "evalsha_c1_ops_per_s", {})

NOT_MEASURED = "not measured in this run"
POINTS = (ENQUEUE, ENQUEUE_MANY, PROCESS, LIFECYCLE, LATENCY, MEMORY, REFERENCE)
# The Servers page compares Conveyor's figures; the machine check is no Conveyor figure.
COMPARED = (LIFECYCLE, PROCESS, ENQUEUE, ENQUEUE_MANY, LATENCY, MEMORY)
