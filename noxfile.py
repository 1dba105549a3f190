"""Nox sessions for Conveyor. Each session installs what it needs; none calls another."""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint"]

PYTHON = "3.11"
PYTHONS = ["3.11", "3.12", "3.13"]  # supported interpreters, oldest first


def _pyenv_on_path() -> None:
    """Put pyenv's CPython builds of PYTHONS first on PATH: its shims expose only the global one."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = [sorted(root.glob(f"{v}.*"), key=lambda p: [int(x) for x in p.name.split(".") if x.isdigit()])
             for v in PYTHONS]
    extra = [str(builds[-1] / "bin") for builds in found if builds]
    os.environ["PATH"] = os.pathsep.join([*extra, os.environ.get("PATH", "")])


_pyenv_on_path()
PYPROJECT = nox.project.load_toml("pyproject.toml")
os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")


def _install(session: nox.Session, *groups: str, project: bool = True) -> None:
    """Install dependency groups (read from pyproject) and, optionally, the project itself."""
    requirements: list[str] = []
    for group in groups:
        requirements += nox.project.dependency_groups(PYPROJECT, group)
    session.install("-q", *requirements)
    if project:
        session.install("-q", "-e", ".[hiredis,cli,cron,prometheus,otel]")


def _tests(session: nox.Session) -> None:
    _install(session, "test")
    # Six pytest-xdist workers, each server kind's (and driver's) tests kept in four groups
    # (tests/conftest.py): most tests wait on leases and timers, so on 2 cores more workers than
    # cores pay (earlier: four ran the suite in 6.8 min against 10.4 min with two; with the suite
    # grown, four took 10.6 min and six 8.5 min, same machine, back to back, all passed).
    # `-n 0` after `--` runs them in one process.
    # The slowest tests are listed at the end: CI must stay under 30 minutes in all.
    session.run("pytest", "-n", "6", "--dist", "loadgroup", "-m", "not browser and not ha", "--durations=15",
                *session.posargs)  # fmt: skip


def _bench(session: nox.Session) -> None:
    _install(session, "bench")
    args = " ".join(session.posargs).replace("=", " ")
    beside = args.split("--beside ", 1)[1].split(" ", 1)[0].split(",") if "--beside " in args else []
    if "--driver glide" in args or "glide" in beside:  # the optional client, only where measured
        session.install("-q", *PYPROJECT["project"]["optional-dependencies"]["glide"])
    session.run("python", "-m", "bench", *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite on every server this machine can start (site tests: `browser`)."""
    _tests(session)


@nox.session(python=PYTHON)
def ha(session: nox.Session) -> None:
    """Cluster and Sentinel topologies, failovers and durability (CONVEYOR_HA_SERVER picks the kind)."""
    _install(session, "test")
    session.run("pytest", "tests/ha", "-m", "ha", *session.posargs)


@nox.session(python=PYTHON)
def soak(session: nox.Session) -> None:
    """The chaos soak on every local server: `nox -s soak -- 600` runs 600 s per server (default 300)."""
    _install(session, "test")
    seconds = session.posargs[0] if session.posargs else "300"
    session.run("pytest", "tests/chaos", "-m", "soak", "-p", "no:cacheprovider", "-s", *session.posargs[1:],
                env={"CONVEYOR_SOAK_SECONDS": seconds})


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff on everything, mypy --strict on the library."""
    _install(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "queue")
    session.run("mypy")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run the benchmark suite; arguments are forwarded to `python -m bench`."""
    _bench(session)


@nox.session(python=PYTHONS)
def bench_python(session: nox.Session) -> None:
    """The benchmark suite on one interpreter: `nox -s bench_python-3.13 -- --loop uvloop ...`."""
    _bench(session)


@nox.session(python=PYTHONS)
def tests_python(session: nox.Session) -> None:
    """The test suite on one interpreter: `nox -s tests_python-3.13 -- tests/unit`."""
    _tests(session)


@nox.session(python=PYTHON)
def compare(session: nox.Session) -> None:
    """Compare two revisions (or result files): `nox -s compare -- BASE HEAD [--help]`."""
    _install(session, "compare")
    session.run("python", "-m", "bench.compare", *session.posargs)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site strictly from results/."""
    _install(session, "docs")
    session.run("mkdocs", "build", "--strict", *session.posargs)


@nox.session(python=PYTHON)
def serve(session: nox.Session) -> None:
    """Serve the documentation site locally with live reload."""
    _install(session, "docs")
    session.run("mkdocs", "serve", *session.posargs)


@nox.session(python=PYTHON)
def browser(session: nox.Session) -> None:
    """Build the site and test every page in headless Chromium."""
    _install(session, "browser")
    session.run("pytest", "tests/docs", "-m", "browser", *session.posargs)
