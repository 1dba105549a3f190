"""Capture what is needed to reproduce a run: machine, Python, client libraries, git state."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import secrets
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


def run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id such as ``20261129T201500Z-ab12cd``."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def utc_timestamp(now: datetime | None = None) -> str:
    """ISO 8601 UTC timestamp with a ``Z`` suffix, seconds precision."""
    return f"{(now or datetime.now(UTC)):%Y-%m-%dT%H:%M:%SZ}"


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo, or platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_bytes() -> int | None:
    """Total physical memory in bytes (psutil when present, else /proc/meminfo)."""
    try:
        import psutil  # noqa: PLC0415 (deliberately lazy)

        return int(psutil.virtual_memory().total)
    except ImportError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def cores() -> int:
    """CPU cores usable by this process."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def environment() -> dict[str, Any]:
    """The ``environment`` block of a result file."""
    uname = platform.uname()
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": uname.system,
        "kernel": uname.release,
        "cpu_model": cpu_model(),
        "cores": cores(),
        "memory_bytes": memory_bytes(),
        "machine_label": os.environ.get("BENCH_MACHINE_LABEL", uname.node or "unknown"),
        "platform": platform.platform(),
        "executable_version": sys.version.split()[0],
    }


def package_version(name: str) -> str | None:
    """Installed distribution version, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def conveyor_version() -> str:
    """conveyor.__version__ when importable, else the installed distribution, else 'unknown'."""
    try:
        import conveyor  # noqa: PLC0415 (deliberately lazy)

        return str(conveyor.__version__)
    except (ImportError, AttributeError):
        return package_version("conveyor") or "unknown"


CLIENT_PACKAGES = ("redis", "hiredis", "valkey-glide", "valkey-glide-sync")


def install_sizes() -> dict[str, int]:
    """Installed bytes of each client package present here (from its file list)."""
    sizes = {}
    for name in CLIENT_PACKAGES:
        try:
            files = importlib.metadata.files(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        sizes[name] = sum(f.size or 0 for f in files)
    return sizes


def clients() -> dict[str, str | None]:
    """The ``clients`` block: versions of redis-py, hiredis and conveyor."""
    return {
        "redis_py": package_version("redis") or "unknown",
        "hiredis": package_version("hiredis"),
        "valkey_glide": package_version("valkey-glide"),
        "conveyor": conveyor_version(),
    }


def git_state() -> dict[str, Any]:
    """Current commit and dirty flag of the repository (None when not a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    # Tracked files that differ from the commit, staged or not: paths only (never contents), so
    # the pages can say whether the library or the benchmark was edited.
    changed = git("diff", "--name-only", "HEAD")
    if changed is None:
        return {"commit": commit, "dirty": None}
    paths = sorted(changed.splitlines())
    return {"commit": commit, "dirty": bool(paths), "changed": paths}
