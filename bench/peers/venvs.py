"""One virtual environment per library, created on demand from its pinned requirements.

Location: ``.bench-venvs/<library>-<hash of the pins>/`` at the repository root (gitignored,
outside results/), or ``$CONVEYOR_BENCH_VENVS``. A venv is reused only when a marker written
after a successful install is present, so an interrupted install is redone.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

from bench.peers import Library

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 600.0


class InstallError(RuntimeError):
    """pip failed; the message is pip's first error line."""


def root() -> Path:
    """Where the venvs live."""
    return Path(os.environ.get("CONVEYOR_BENCH_VENVS", REPO_ROOT / ".bench-venvs"))


def _dir(lib: Library) -> Path:
    digest = hashlib.sha256("\n".join(lib.requirements).encode()).hexdigest()[:10]
    return root() / f"{lib.name}-{digest}"


def first_error(output: str) -> str:
    """pip's first line that names an error (else its last line)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for line in lines:
        if line.startswith("ERROR") or "error:" in line.lower():
            return line
    return lines[-1] if lines else "pip failed without output"


def python_for(lib: Library) -> str:
    """The interpreter that runs ``lib``'s adapter, installing its venv first if needed."""
    if not lib.requirements:
        return sys.executable
    where = _dir(lib)
    python = where / "bin" / "python"
    marker = where / ".installed"
    if marker.exists():
        return str(python)
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    cmd = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
           *lib.requirements]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"pip install timed out after {INSTALL_TIMEOUT:.0f} s") from exc
    if proc.returncode != 0:
        raise InstallError(first_error(proc.stderr + proc.stdout))
    marker.write_text("\n".join(lib.requirements) + "\n")
    return str(python)
