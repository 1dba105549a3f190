"""Child process entry point: ``python -m bench.worker SPEC.json OUT.json``.

Runs one repetition of one scenario (all its cases, in order) against one target and
writes the per-case outcome as JSON. A fresh interpreter per repetition is the
independent sample (see evidence.md). With ``parser == "python"`` hiredis is hidden
from redis-py before it is imported, so the pure-Python parser and packer are used.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any


def _hide_hiredis() -> None:
    """Make ``import hiredis`` fail so redis-py falls back to its Python parser."""
    sys.modules["hiredis"] = None  # type: ignore[assignment]


def run_case(module: Any, target: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Run one case; convert an exactly-once violation or an error into a failure record."""
    from bench.scenarios._common import ExactlyOnceViolation  # noqa: PLC0415 (deliberately lazy)

    try:
        outcome = module.run(target, params)
    except ExactlyOnceViolation as exc:
        return {"ok": False, "kind": "exactly-once", "error": str(exc), "report": exc.report}
    except Exception as exc:
        tb = traceback.format_exc(limit=6)
        return {"ok": False, "kind": "error", "error": f"{type(exc).__name__}: {exc}", "tb": tb}
    return {"ok": True, **outcome}


def _inject_missing_metric(outcomes: list[dict[str, Any]], repetition: int) -> None:
    """Test hook (``BENCH_INJECT=drop-metric:NAME``): odd repetitions do not report NAME,
    as Dragonfly's INFO commandstats sometimes omits EVALSHA."""
    from bench.scenarios._common import INJECT_ENV  # noqa: PLC0415 (deliberately lazy)

    kind, _, name = os.environ.get(INJECT_ENV, "").partition(":")
    if kind == "drop-metric" and repetition % 2:
        for outcome in outcomes:
            outcome.get("metrics", {}).pop(name, None)


def main(argv: list[str]) -> int:
    """Read the spec, run every case, write the outcome file."""
    spec = json.loads(Path(argv[0]).read_text())
    if spec["target"]["parser"] == "python":
        _hide_hiredis()
    from redis.utils import HIREDIS_AVAILABLE  # noqa: PLC0415 (deliberately lazy)

    from bench import scenarios  # noqa: PLC0415 (deliberately lazy)
    from bench.scenarios._common import Target, case_target  # noqa: PLC0415 (deliberately lazy)

    target = Target.from_dict(spec["target"])
    module = scenarios.load(spec["scenario"])
    outcomes = [run_case(module, case_target(target, params), params) for params in spec["cases"]]
    _inject_missing_metric(outcomes, spec.get("repetition", 0))
    out = {"hiredis_active": HIREDIS_AVAILABLE, "cases": outcomes}
    Path(argv[1]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
