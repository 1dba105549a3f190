"""Benchmark result files: write, read and validate (schema_version 1).

Layout: ``results/v<schema>/conveyor-<version>/<run_id>.json``; the JSON Schema is
``results/schema/v<schema>.json``. Readers refuse any schema version they do not know
with an error naming the file. Credentials never reach a file: URLs are stripped of
user names and passwords before writing, and the schema rejects URLs that carry them.

Public API used by the docs: :func:`load_results`, :func:`load_file`, :func:`validate`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from conveyor import redact_url

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "results"
SCHEMA_DIR = RESULTS_DIR / "schema"
SCHEMA_VERSION = 1
KNOWN_VERSIONS = (1,)

__all__ = [
    "KNOWN_VERSIONS",
    "RESULTS_DIR",
    "SCHEMA_VERSION",
    "InvalidResults",
    "ResultsError",
    "UnknownSchemaVersion",
    "default_path",
    "load_file",
    "load_results",
    "strip_credentials",
    "validate",
    "write_results",
]


class ResultsError(Exception):
    """Base class for result-file errors; the message always names the file."""


class UnknownSchemaVersion(ResultsError):
    """The file declares a schema_version this reader does not know."""

    def __init__(self, source: str, version: object) -> None:
        self.source = source
        self.version = version
        super().__init__(
            f"{source}: unknown schema_version {version!r}; this reader knows "
            f"{', '.join(map(str, KNOWN_VERSIONS))}. Upgrade Conveyor's bench package "
            "or regenerate the file with `nox -s bench`."
        )


class InvalidResults(ResultsError):
    """The file is not valid JSON or does not match its schema."""


@cache
def load_schema(version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """Return the JSON Schema for ``version`` from ``results/schema/v<version>.json``."""
    return json.loads((SCHEMA_DIR / f"v{version}.json").read_text())


def validate(doc: Any, source: str | Path = "<memory>") -> dict[str, Any]:
    """Validate ``doc`` against its schema; return it, or raise naming ``source``."""
    source = str(source)
    if not isinstance(doc, dict):
        raise InvalidResults(f"{source}: a results file must hold a JSON object")
    version = doc.get("schema_version")
    if version not in KNOWN_VERSIONS or isinstance(version, bool):
        raise UnknownSchemaVersion(source, version)
    _check_no_credentials(doc, source)
    validator = jsonschema.Draft202012Validator(load_schema(version))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  at /{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10]]
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise InvalidResults(
            f"{source}: does not match results schema v{version}:\n" + "\n".join(lines) + more
        )
    return doc


def load_file(path: str | Path) -> dict[str, Any]:
    """Read and validate one result file; a ``_source`` key is NOT added."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidResults(f"{path}: not valid JSON: {exc}") from exc
    return validate(doc, path)


def load_results(path_or_dir: str | Path = RESULTS_DIR) -> list[dict[str, Any]]:
    """Load one file, or every ``*.json`` result file under a directory (sorted by path).

    Files under ``schema/`` directories are skipped. Each document is validated;
    the first invalid or unknown-version file raises an error naming it.
    """
    path = Path(path_or_dir)
    if path.is_file():
        return [load_file(path)]
    if not path.is_dir():
        raise ResultsError(f"{path}: no such results file or directory")
    return [load_file(p) for p in _result_files(path)]


def _result_files(root: Path) -> Iterable[Path]:
    """Yield result JSON files below ``root``, skipping schema files."""
    for p in sorted(root.rglob("*.json")):
        if "schema" not in p.relative_to(root).parts[:-1] and p.parent != SCHEMA_DIR:
            yield p


def default_path(doc: dict[str, Any], root: Path = RESULTS_DIR) -> Path:
    """Return ``results/v<schema>/conveyor-<version>/<run_id>.json`` for ``doc``."""
    version = re.sub(r"[^A-Za-z0-9._+-]", "_", str(doc["conveyor_version"]))
    return root / f"v{doc['schema_version']}" / f"conveyor-{version}" / f"{doc['run_id']}.json"


def write_results(doc: dict[str, Any], path: str | Path | None = None) -> Path:
    """Strip credentials, validate, and write ``doc``; return the path written.

    ``path`` may be a file (``*.json``) or a directory (the default layout is used below it).
    """
    doc = strip_credentials(doc)
    if path is None:
        target = default_path(doc)
    else:
        target = Path(path)
        if target.suffix != ".json":
            target = default_path(doc, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        validate(doc, target)
    except ResultsError:
        # Keep the measurements for diagnosis under a name no reader picks up, then re-raise.
        target.with_suffix(".json.invalid").write_text(json.dumps(doc, indent=1) + "\n")
        raise
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    tmp.replace(target)
    return target


_SECRET_FLAGS = {"--requirepass", "--masterauth", "--requirepass=", "--pass", "--password"}
_URL_RE = re.compile(r"\b(?:redis|rediss|valkey|valkeys|unix|dragonfly)://[^\s\"']+")


def strip_credentials(obj: Any) -> Any:
    """Return a copy of ``obj`` where every URL-looking string has its credentials removed."""
    if isinstance(obj, dict):
        return {k: _strip_value(k, v) for k, v in obj.items()}
    if isinstance(obj, list):
        out = [strip_credentials(v) for v in obj]
        for i in range(1, len(out)):
            if str(out[i - 1]).lower() in _SECRET_FLAGS:
                out[i] = "***"
        return out
    if isinstance(obj, str):
        return _URL_RE.sub(lambda m: redact_url(m.group(0)), obj)
    return obj


def _strip_value(key: str, value: Any) -> Any:
    """Blank values under credential-like keys; recurse otherwise."""
    if key.lower() in {"password", "requirepass", "masterauth", "auth", "secret", "token"}:
        return "***" if isinstance(value, str) else value
    return strip_credentials(value)


def _check_no_credentials(doc: dict[str, Any], source: str) -> None:
    """Refuse a document that still carries a URL with credentials."""
    text = json.dumps(doc)
    for match in _URL_RE.finditer(text):
        if redact_url(match.group(0)) != match.group(0):
            raise InvalidResults(f"{source}: contains a URL with credentials: refusing it")


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.results PATH...``: validate result files (or directories of them)."""
    import sys  # noqa: PLC0415

    paths = (argv if argv is not None else sys.argv[1:]) or [str(RESULTS_DIR)]
    try:
        for path in paths:
            docs = load_results(path)
            if not docs:
                print(f"{path}: no result files")
                return 1
            print(f"{path}: {len(docs)} result file(s) valid (schema_version {SCHEMA_VERSION})")
    except ResultsError as exc:
        print(f"invalid: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
