"""A revision in its own environment: its tree exported from git, a venv with that revision installed.

The tree comes from ``git archive`` (no worktree is registered in the repository); the venv gets
the revision's own ``bench`` dependency group and the revision itself, built as a wheel, so a
revision that does not build is found here. Venvs are cached per commit under ``.nox/compare-envs``.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.compare import CompareError

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_CACHE = REPO_ROOT / ".nox" / "compare-envs"
BUILT_MARK = "conveyor-compare-built"


@dataclass(frozen=True)
class Revision:
    """A revision as the user named it and the commit it resolved to."""

    label: str
    commit: str


@dataclass(frozen=True)
class Env:
    """An exported source tree and the Python that has that revision installed."""

    revision: Revision
    source: Path
    python: Path


def _git(*args: str, binary: bool = False) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=not binary,
                          check=False, timeout=120)


def resolve(label: str) -> Revision:
    """The commit ``label`` names; a clear error when git does not know it."""
    if label.startswith("-"):
        raise CompareError(f"unknown revision {label!r}")
    out = _git("rev-parse", "--verify", "--quiet", f"{label}^{{commit}}")
    if out.returncode != 0 or not out.stdout.strip():
        raise CompareError(f"unknown revision {label!r}: not a commit in {REPO_ROOT}")
    return Revision(label, out.stdout.strip())


def export(rev: Revision, dest: Path) -> Path:
    """Write the revision's tree to ``dest`` (no .git: the commit is recorded by the caller)."""
    out = _git("archive", "--format=tar", rev.commit, binary=True)
    if out.returncode != 0:
        raise CompareError(f"revision {rev.label!r}: git archive failed: {out.stderr.decode().strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def group_requirements(pyproject: dict[str, Any], group: str) -> list[str]:
    """A PEP 735 dependency group with its ``include-group`` entries expanded."""
    groups = pyproject.get("dependency-groups", {})
    if group not in groups:
        raise KeyError(group)
    out: list[str] = []
    for item in groups[group]:
        out += group_requirements(pyproject, item["include-group"]) if isinstance(item, dict) else [item]
    return out


def _bench_requirements(rev: Revision, source: Path) -> list[str]:
    try:
        pyproject = tomllib.loads((source / "pyproject.toml").read_text())
        return group_requirements(pyproject, "bench")
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise CompareError(f"revision {rev.label!r} ({rev.commit[:10]}) has no usable pyproject.toml "
                           f"bench group: {exc}") from exc


def build(rev: Revision, source: Path, log: Path, suite: Env | None = None) -> Env:
    """A venv with the revision installed (cached per commit); CompareError if it does not build.

    With ``suite`` (another revision's environment), the returned Env runs that revision's
    benchmark suite, with its requirements, against this revision's library.
    """
    key = rev.commit if suite is None else f"{rev.commit}-suite-{suite.revision.commit[:12]}"
    env_dir = ENV_CACHE / key
    python = env_dir / "bin" / "python"
    runs_in = source if suite is None else suite.source
    if (env_dir / BUILT_MARK).exists():
        return Env(rev, runs_in, python)
    venv.EnvBuilder(clear=True, with_pip=True).create(env_dir)
    command = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
               *_bench_requirements(rev, runs_in), f"{source}[hiredis]"]
    with log.open("a") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        last = [line for line in log.read_text().splitlines() if line.strip()][-1:] or ["?"]
        raise CompareError(f"revision {rev.label!r} ({rev.commit[:10]}) does not build: "
                           f"{last[0].strip()} (full log: {log})")
    check = subprocess.run([str(python), "-c", "import conveyor, redis"], cwd=source, capture_output=True,
                           text=True, check=False)
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["?"])[-1]
        raise CompareError(f"revision {rev.label!r} ({rev.commit[:10]}) does not import: {last}")
    (env_dir / BUILT_MARK).write_text(sys.version)
    return Env(rev, runs_in, python)


def suite_changes(base: Revision, head: Revision) -> int:
    """How many files of the benchmark suite (bench/) differ between the two commits."""
    out = _git("diff", "--name-only", base.commit, head.commit, "--", "bench")
    return len(out.stdout.split()) if out.returncode == 0 else 0
