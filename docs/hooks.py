"""MkDocs hook: serve plotly.js and the raw result files from the site itself.

plotly.min.js is copied from the installed plotly wheel (no CDN: the site works offline);
every result file the pages use is published at ``results/<path below the results dir>``
so each chart can link to its raw JSON, and the JSON Schema at ``results/schema/``.
They are added as generated files, so links to them are checked by ``--strict``.
After the build, sitemap.xml.gz is rewritten without a timestamp (deterministic builds).
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import plotly  # type: ignore[import-untyped]
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.report import result_paths  # noqa: E402
from bench.results import SCHEMA_DIR  # noqa: E402


def plotly_js() -> Path:
    """Path of plotly.min.js inside the installed plotly package."""
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: plotly.min.js missing from the plotly wheel")
    return path


def results_root(config: MkDocsConfig) -> Path:
    """The results directory named by ``extra.results_dir`` (relative to mkdocs.yml)."""
    base = Path(config.config_file_path).resolve().parent
    return (base / str(config.extra["results_dir"])).resolve()


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add plotly.min.js, the result files and their JSON Schema to the site."""
    files.append(File.generated(config, "assets/plotly.min.js", abs_src_path=str(plotly_js())))
    root = results_root(config)
    for path in result_paths(root):
        uri = f"results/{path.relative_to(root).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    for path in sorted(SCHEMA_DIR.glob("v*.json")):
        uri = f"results/schema/{path.name}"
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_post_build(config: MkDocsConfig) -> None:
    """Recompress sitemap.xml with a zero gzip mtime so two builds are byte-identical."""
    sitemap = Path(config.site_dir) / "sitemap.xml"
    if sitemap.is_file():
        with gzip.GzipFile(sitemap.with_suffix(".xml.gz"), "wb", mtime=0) as out:
            out.write(sitemap.read_bytes())
