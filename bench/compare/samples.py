"""Result files to per-metric samples: one value per independent process, keyed by case and metric.

A side is one or more result files (a directory, or the rounds of an interleaved session); the
values of the same case and metric are pooled. Both sides must use the same schema version and
share at least one case.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.compare import CompareError
from bench.results import ResultsError, load_file

REFERENCE = "reference"


@dataclass(frozen=True, order=True)
class Case:
    """What was measured: scenario, where, and its parameters (lists left out of the label)."""

    scenario: str
    server: str
    config: str
    protocol: int
    parser: str
    params: str  # canonical JSON, so equal params compare equal

    @property
    def label(self) -> str:
        """Short human label: scalar parameters only."""
        params = json.loads(self.params)
        return " ".join(f"{k}={v}" for k, v in params.items() if not isinstance(v, list | dict))

    @property
    def variant(self) -> str:
        """server/config/resp/parser."""
        return f"{self.server}/{self.config}/resp{self.protocol}/{self.parser}"


@dataclass
class Side:
    """Every result document of one side and their pooled values."""

    docs: list[dict[str, Any]]
    values: dict[tuple[Case, str], list[float]] = field(default_factory=dict)
    units: dict[tuple[Case, str], str] = field(default_factory=dict)

    @property
    def schema_version(self) -> int:
        """The documents' schema version (all equal, checked on load)."""
        return int(self.docs[0]["schema_version"])


def case_of(result: dict[str, Any], server: str | None = None) -> Case:
    """The case of one ``results[]`` row; ``server`` renames it (external servers of a session)."""
    return Case(
        result["scenario"], server or result["server"], result["config"], int(result["protocol"]),
        result["parser"], json.dumps(result["params"], sort_keys=True),
    )


def side_from_docs(docs: Sequence[dict[str, Any]]) -> Side:
    """Pool the values of every document's rows."""
    if not docs:
        raise CompareError("no result documents on one side")
    side = Side(list(docs))
    for doc in docs:
        for row in doc["results"]:
            case = case_of(row)
            for name, metric in row["metrics"].items():
                side.values.setdefault((case, name), []).extend(float(v) for v in metric["values"])
                side.units[(case, name)] = metric["unit"]
    return side


def _paths(path: Path) -> list[Path]:
    """A file, or every result file below a directory."""
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.rglob("*.json") if "schema" not in p.parts)
        if found:
            return found
        raise CompareError(f"{path}: no result files in this directory")
    raise CompareError(f"{path}: no such result file or directory")


def _schema_version(path: Path) -> Any:
    """The declared schema version, read before validation so a mismatch is named as such."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CompareError(f"{path}: not a readable JSON result file ({exc})") from exc
    return doc.get("schema_version") if isinstance(doc, dict) else None


def _declared_versions(paths: Sequence[Path]) -> set[str]:
    """Every schema version the files declare (as text, so odd values compare too)."""
    return {repr(_schema_version(p)) for p in paths}


def load_pair(base: Path, head: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Validated documents of both sides, which must all declare one schema version."""
    paths = {"base": _paths(base), "head": _paths(head)}
    versions = {side: _declared_versions(p) for side, p in paths.items()}
    for side, found in versions.items():
        if len(found) > 1:
            raise CompareError(f"{side}: files of different schema versions ({', '.join(sorted(found))})")
    if versions["base"] != versions["head"]:
        raise CompareError(
            f"schema versions differ: base is {versions['base'].pop()}, head is "
            f"{versions['head'].pop()}; rerun the older side with the current suite "
            "(compare the revisions, not the files)"
        )
    try:
        return [load_file(p) for p in paths["base"]], [load_file(p) for p in paths["head"]]
    except ResultsError as exc:
        raise CompareError(str(exc).splitlines()[0]) from exc


def common_keys(base: Side, head: Side) -> list[tuple[Case, str]]:
    """Case/metric pairs present on both sides, sorted; refuse when they do not overlap."""
    keys = sorted(set(base.values) & set(head.values))
    if keys:
        return keys
    b = {c.scenario: c for c, _ in base.values}
    h = {c.scenario: c for c, _ in head.values}
    shared = sorted(set(b) & set(h))
    if not shared:
        raise CompareError(f"no scenario measured on both sides: base has {sorted(b)}, head has {sorted(h)}")
    name = shared[0]
    raise CompareError(
        f"no case measured on both sides: {name} ran as {b[name].variant} {b[name].params} on base "
        f"but {h[name].variant} {h[name].params} on head (sizes or suites differ: compare runs of "
        "the same sizes, or revisions with --suite head)"
    )


def check_same_schema(base: Sequence[dict[str, Any]], head: Sequence[dict[str, Any]]) -> None:
    """Refuse to compare documents written under different schema versions."""
    b = sorted({str(d.get("schema_version")) for d in base})
    h = sorted({str(d.get("schema_version")) for d in head})
    if b != h:
        raise CompareError(f"schema versions differ: base is {', '.join(b)}, head is {', '.join(h)}; "
                           "rerun the older side with the current suite")
