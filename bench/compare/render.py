"""The comparison report: Markdown for a pull-request comment, or JSON for machines."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.compare.rows import Row, noise_floor, power_note

MARK = {"improved": "🟢", "regressed": "🔴", "noise": "", "not judged": ""}


@dataclass
class Report:
    """Everything rendered: both sides' provenance, the method, and the rows."""

    base: dict[str, Any]  # from describe_side()
    head: dict[str, Any]
    machine: dict[str, Any]
    method: dict[str, Any]
    rows: list[Row]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON document (``--format json``)."""
        return {
            "base": self.base, "head": self.head, "machine": self.machine, "method": self.method,
            "summary": summary(self.rows), "noise_floor": noise_floor(self.rows),
            "notes": self.notes + _power(self), "rows": [r.as_dict() for r in self.rows],
        }


def describe_side(label: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Provenance of one side from its result documents (first document wins; commits listed)."""
    first = docs[0]
    servers = {s["id"]: f"{s.get('family')} {s.get('version')} ({s.get('allocator')})"
               for d in docs for s in d["servers"] if s.get("measured")}
    commits = sorted({(d["git"].get("commit") or "unknown") + ("+dirty" if d["git"].get("dirty") else "")
                      for d in docs})
    return {
        "label": label, "commits": commits, "conveyor_version": first["conveyor_version"],
        "clients": first["clients"], "servers": servers, "run_ids": [d["run_id"] for d in docs],
    }


def summary(rows: list[Row]) -> dict[str, int]:
    """How many Conveyor rows (reference ceilings excluded) changed which way."""
    counts = Counter(r.result.change for r in rows if not r.reference)
    return {k: counts.get(k, 0) for k in ("regressed", "improved", "noise", "not judged")}


def to_json(report: Report) -> str:
    """Machine-readable report."""
    return json.dumps(report.as_dict(), indent=1) + "\n"


def num(value: float) -> str:
    """Three significant digits, thousands separators for large values."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def pct(value: float | None, signed: bool = True) -> str:
    """A percentage at one decimal; an em dash when undefined."""
    if value is None:
        return "—"
    return f"{value:+.1f}" if signed else f"{value:.1f}"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.2g}"


def _short(commits: list[str]) -> str:
    return ", ".join(f"`{c[:10]}`" for c in commits)


def _machine_line(machine: dict[str, Any]) -> str:
    mem = machine.get("memory_bytes")
    gib = f", {mem / 2**30:.1f} GiB" if mem else ""
    return (f"{machine.get('cpu_model')}, {machine.get('cores')} cores{gib}, {machine.get('os')} "
            f"{machine.get('kernel')}, Python {machine.get('python')} "
            f"(label `{machine.get('machine_label')}`)")


def _header(report: Report) -> list[str]:
    b, h = report.base, report.head
    lines = [
        f"## Conveyor performance: `{h['label']}` against `{b['label']}`", "",
        "| | base | head |", "|---|---|---|",
        f"| revision | `{b['label']}` {_short(b['commits'])} | `{h['label']}` {_short(h['commits'])} |",
        f"| Conveyor | {b['conveyor_version']} | {h['conveyor_version']} |",
        f"| redis-py / hiredis | {b['clients'].get('redis_py')} / {b['clients'].get('hiredis')} | "
        f"{h['clients'].get('redis_py')} / {h['clients'].get('hiredis')} |",
        f"| servers | {'; '.join(b['servers'].values())} | {'; '.join(h['servers'].values())} |",
        "", f"**Machine:** {_machine_line(report.machine)}", "",
        f"**Method:** {report.method['description']}", "",
    ]
    return lines


def _table(rows: list[Row]) -> list[str]:
    out = ["| scenario | case | metric | better | base median (MAD %) | head median (MAD %) | Δ % "
           "| p | verdict | A/A Δ % |",
           "|---|---|---|---|--:|--:|--:|--:|---|--:|"]
    for r in rows:
        c = r.result
        aa = pct(r.aa.diff_pct) if r.aa else "—"
        if r.aa and r.aa.change in ("improved", "regressed"):
            aa += " ⚠"
        out.append(
            f"| {r.case.scenario} | {r.case.label} | {r.metric} ({c.unit}) | {c.better or '—'} | "
            f"{num(c.base_median)} ({pct(c.base_mad_pct, False)}) | "
            f"{num(c.head_median)} ({pct(c.head_mad_pct, False)}) | {pct(c.diff_pct)} | "
            f"{_p(c.p_value)} | {MARK[c.change]} {c.verdict} | {aa} |".replace("|  ", "| ")
        )
    return out


def _by_variant(rows: list[Row]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.case.variant, []).append(r)
    return groups


def _power(report: Report) -> list[str]:
    note = power_note(report.rows, report.method["alpha"])
    return [note] if note else []


def to_markdown(report: Report) -> str:
    """The pull-request comment."""
    lines = _header(report)
    s = summary(report.rows)
    lines += [f"**Verdict:** {s['regressed']} slower/worse, {s['improved']} faster/better, "
              f"{s['noise']} within noise (Conveyor rows; reference ceilings excluded).", ""]
    floor = noise_floor(report.rows)
    if floor:
        lines += [f"**Noise floor (A/A, base against a second set of base runs):** median |Δ| "
                  f"{floor['median_abs_diff_pct']:.1f}%, largest {floor['max_abs_diff_pct']:.1f}%, "
                  f"{floor['flagged']} of {floor['rows']} rows flagged (expected 0).", ""]
    lines += [f"> {n}" for n in report.notes + _power(report)] + [""]
    conveyor = [r for r in report.rows if not r.reference]
    for variant, group in _by_variant(conveyor).items():
        lines += [f"### Conveyor on {variant}", ""]
        lines += [*_table([r for r in group if r.headline]), ""]
        rest = [r for r in group if not r.headline]
        if rest:
            lines += ["<details><summary>Other metrics</summary>", "", *_table(rest)]
            lines += ["", "</details>", ""]
    reference = [r for r in report.rows if r.reference]
    if reference:
        lines += ["### Machine check: reference ceilings (PING, EVALSHA; no Conveyor code)", "",
                  "Both sides run the same client and server here, so a verdict in this table means "
                  "the machine changed during the session, not the code.", ""]
        lines += [*_table(reference), ""]
    return "\n".join(lines).rstrip() + "\n"
