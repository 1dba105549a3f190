"""`mkdocs build --strict` end to end: empty results, bad results, deterministic output.

Marked ``browser`` so it runs in ``nox -s browser`` (the session that installs mkdocs); it
needs no browser itself and is skipped where mkdocs is not installed.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from docs_synthetic import make_run

pytestmark = pytest.mark.browser
pytest.importorskip("mkdocs")
pytest.importorskip("mkdocs_macros")

REPO = Path(__file__).resolve().parents[2]


def build(results: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """Run a strict build with ``results`` as the results directory."""
    env = {**os.environ, "CONVEYOR_RESULTS_DIR": str(results), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )


def write(root: Path, doc: dict[str, object]) -> Path:
    """Write a result file below ``root``."""
    path = root / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return path


def test_empty_results_build_says_how_to_make_them(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    proc = build(tmp_path / "results", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "site" / "performance" / "index.html").read_text()
    assert "No results yet" in html and "nox -s bench" in html
    assert "cv-chart" not in html
    assert (tmp_path / "site" / "assets" / "plotly.min.js").stat().st_size > 1_000_000


@pytest.mark.parametrize("breakage", ["version", "field"])
def test_bad_result_file_fails_the_build_naming_it(tmp_path: Path, breakage: str) -> None:
    doc = make_run()
    if breakage == "version":
        doc["schema_version"] = 2
    else:
        del doc["results"][0]["metrics"]
    path = write(tmp_path / "results", doc)
    proc = build(tmp_path / "results", tmp_path / "site")
    assert proc.returncode != 0
    assert str(path) in proc.stdout + proc.stderr


def test_duplicate_run_id_fails_the_build_naming_files_and_field(tmp_path: Path) -> None:
    doc = make_run()
    first = write(tmp_path / "results", doc)
    second = tmp_path / "results" / "v1" / "copy.json"
    second.write_text(json.dumps(doc))
    proc = build(tmp_path / "results", tmp_path / "site")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert str(first) in out and str(second) in out and "run_id" in out


def test_build_is_deterministic_and_serves_raw_json(tmp_path: Path) -> None:
    path = write(tmp_path / "results", make_run())
    for out in ("a", "b"):
        proc = build(tmp_path / "results", tmp_path / out)
        assert proc.returncode == 0, proc.stderr
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*")
                     if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*")
                     if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    served = tmp_path / "a" / "results" / "v1" / "conveyor-0.1.0" / path.name
    assert served.read_bytes() == path.read_bytes()
    assert 'href="../results/v1/conveyor-0.1.0/' in (tmp_path / "a" / "performance" /
                                                      "index.html").read_text()


def test_api_page_renders_no_raw_sphinx_roles(tmp_path: Path) -> None:
    # mkdocstrings does not interpret Sphinx roles: :class:`Job` reaches the reader as ":class:Job".
    (tmp_path / "results").mkdir()
    proc = build(tmp_path / "results", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "site" / "api" / "index.html").read_text()
    assert 'id="conveyor.Queue.result"' in page  # the docstrings were rendered at all
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    roles = re.findall(r":(?:class|meth|func|attr|exc|mod):\S*", text)
    assert roles == [], roles
    # What they became: links to objects on the page (an unresolved one fails the strict build).
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="#conveyor\.Limit"', page)
