"""Peers page: Conveyor against other Python queues, from the newest file with a ``peers`` section.

The section's rows become one tidy frame (a row per server, library row and column below), from which
every table, ratio and chart is a pivot. Ratios compare figures of one run on one server; a library's
figure is its best row (for Conveyor the best of ``Worker``, ``AsyncWorker`` and the AsyncWorker split
over one process per core), and the ratio tables name the row each ratio uses on both sides.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from functools import wraps
from typing import Any

import pandas as pd

from bench.report.compare import THRESHOLD, ratio, ratio_text
from bench.report.figures import chart, plot
from bench.report.load import Dataset
from bench.report.text import MISSING, admonition, fmt, fmt_stat, md_table, no_data, source_line, times

REF = "conveyor"
# header, table, scenario, params to match, metric, higher is better
COLUMNS = pd.DataFrame([
    *((h, "Enqueue (jobs/s)", s, p, "jobs_per_s", True) for h, s, p in (
        ("enqueue sync", "enqueue-single", {"api": "sync"}),
        ("enqueue asyncio", "enqueue-single", {"api": "async"}), ("bulk (50)", "enqueue-bulk", {}))),
    *((f"process c={c}", "Process (jobs/s)", "process", {"concurrency": c}, "jobs_per_s", True)
      for c in (1, 32, 100)),
    *((f"{h} (ms)", "Unloaded latency and memory per waiting job", "latency", {}, f"{p}_ms", False)
      for h, p in (("latency p50", "p50"), ("p95", "p95"), ("p99", "p99"))),
    ("memory (B/job)", "Unloaded latency and memory per waiting job", "memory", {}, "bytes_per_job", False),
], columns=["column", "table", "scenario", "match", "metric", "higher"])
FAULTS = {"sigkill": "worker SIGKILL", "server-restart": "server restart",
          "connection-cut": "connections cut"}
NO_PEERS = "a peer comparison (`nox -s bench -- --libraries all`)"
FIELDS = ["server", "library", "library (row)", "column", "table", "higher", "value", "status", "lo", "hi",
          "n", "mad"]


def tidy(peers: dict[str, Any]) -> pd.DataFrame:
    """A row per server, library row (library and flavour) and column: its figure and how it is shown."""
    out = []
    for r in peers["rows"]:
        for c in COLUMNS[COLUMNS.scenario == r["scenario"]].itertuples():
            if all(r["params"].get(k) == v for k, v in c.match.items()):
                got = (r.get("metrics") or {}).get(c.metric)
                ok = r["status"] == "ok" and got
                status = ("" if ok or (r["status"] == "ok") else f"≈{fmt(got['median'])} (timed out)"
                          if r["status"] == "timeout" and got else "timed out" if r["status"] == "timeout"
                          else r["status"])
                spread = [got.get(k) if ok else None for k in ("min", "max", "count", "mad")]
                out.append([r["server"], r["library"], f"{r['library']} ({r['flavor']})", c.column, c.table,
                            c.higher, got["median"] if ok else None, status, *spread])
    frame = pd.DataFrame(out, columns=FIELDS)
    return frame.assign(shown=[fmt_stat(r.value, r.mad, int(r.n or 1), r.lo, r.hi) if pd.notna(r.value)
                               else r.status or MISSING for r in frame.itertuples()])


def best(frame: pd.DataFrame) -> pd.DataFrame:
    """Per server, library and column: the better flavour's figure, its ratio to Conveyor's (above 1:
    Conveyor is better) and the cell showing it (or the library's status)."""
    score = frame.value.where(frame.higher, -frame.value)
    top = frame.assign(score=score).sort_values("score", na_position="first", kind="stable").groupby(
        ["server", "library", "column"], sort=False).tail(1).sort_index()
    stats = top.rename(columns={"value": "median", "lo": "min", "hi": "max"})
    ref = stats[stats.library == REF].set_index(["server", "column"])

    def against(row: pd.Series) -> dict[str, Any]:  # compare.ratio: the site's one noise rule
        key = (row.server, row.column)
        if key not in ref.index or pd.isna(row["median"]) or pd.isna(ref.loc[key, "median"]):
            return {"ratio": float("nan"), "noise": False}
        return ratio(ref.loc[key], row) if row.higher else ratio(row, ref.loc[key])

    found = pd.DataFrame([against(r) for _, r in stats.iterrows()], index=top.index)
    return top.assign(ratio=found.ratio, noise=found.noise, cell=[
        (times(r) + (", noise" if n and lib != REF else "")) if r > 0 else s or MISSING
        for r, s, n, lib in zip(found.ratio.fillna(0), top.status, found.noise, top.library, strict=True)])


def named_ratios(top: pd.DataFrame) -> pd.DataFrame:
    """``best``'s cells with the row each ratio uses: the peer's in its cell, Conveyor's on a first
    line of its own (its row may differ by column, e.g. a multi-process row at concurrency 32)."""
    row = top["library (row)"].str.extract(r"\((.*)\)$", expand=False)
    ref = top.library == REF
    cell = [f"{c} ({f})" if r > 0 else c for c, f, r in zip(top.cell, row, top.ratio.fillna(0), strict=True)]
    shown = pd.Series(cell, index=top.index).where(~ref, row.where(top.value.notna(), MISSING))
    return top.assign(cell=shown, library=top.library.where(~ref, "Conveyor's row"))


def table(frame: pd.DataFrame, index: str, values: str, columns: pd.Series) -> str:
    """A Markdown pivot of ``frame``: rows in order of appearance, ``columns`` in their order."""
    wide = frame.pivot_table(index=index, columns="column", values=values, aggfunc="last", sort=False)
    wide = wide.reindex(columns=list(columns)).dropna(how="all")  # a row measured in another table only
    wide = wide.astype(object).fillna(MISSING)  # text in float columns
    return md_table(wide.rename(columns=lambda c: c.replace(" (ms)", "").replace(" (B/job)", "")
                                if values == "cell" else c).reset_index())


def peers_run(ds: Dataset) -> pd.Series | None:
    """The newest run with a ``peers`` section."""
    found = ds.runs[[bool(doc.get("peers")) for doc in ds.runs.doc]]
    return found.iloc[-1] if len(found) else None


def peers_section(body: Callable[[dict[str, Any], pd.DataFrame, str], str], source: bool = True
                  ) -> Callable[[Dataset, str], str]:
    """A section over the ``peers`` part of the newest file holding one (and its tidy frame), with
    the file's source line."""
    @wraps(body)
    def section(ds: Dataset, prefix: str = "") -> str:
        run = peers_run(ds)
        if run is None:
            return no_data(NO_PEERS)
        text = body(run.doc["peers"], tidy(run.doc["peers"]), prefix)
        return f"{text}\n\n{source_line(run, prefix)}" if source else text
    return section


@peers_section
def peers_libraries(peers: dict[str, Any], frame: pd.DataFrame, prefix: str) -> str:
    """Versions, client versions, settings per row, result retention, install status."""
    return md_table(pd.DataFrame([{
        "library": f"{name} {lib.get('versions', {}).get('library', '')}".strip(),
        "client": ", ".join(f"{k} {v}" for k, v in lib.get("versions", {}).items()
                            if k != "library") or MISSING,
        "rows measured": "; ".join(f"**{f}**: {v['note'] or v['settings']}"
                                   + (f" ([docs]({v['source']}))" if v.get("source") else "")
                                   + (f"; measured: {v['only']}" if v.get("only") else "")
                                   for f, v in lib["flavors"].items()),
        "stored per finished job": lib["retention"],
        "status": "measured" if lib["measured"] else f"not measured: {lib['reason']}"}
        for name, lib in peers["libraries"].items()]))


@peers_section
def peers_speed(peers: dict[str, Any], frame: pd.DataFrame, prefix: str) -> str:
    """Per server: the figures, the ratios to Conveyor and the process chart."""
    sizes = peers["method"].get("sizes")
    parts = [] if sizes is None else [sizes_line(sizes, peers["method"].get("repetitions"))
                                      + (f" {peers['method']['producer_rows'].capitalize()}."
                                         if peers["method"].get("producer_rows") else "")]
    parts.append(servers_line(peers.get("servers", [])))
    for server, rows in frame.groupby("server", sort=False):
        parts.append(f"### {server}")
        tables = COLUMNS.groupby("table", sort=False).column
        parts += [f"{title}:\n\n{table(rows, 'library (row)', 'shown', c)}" for title, c in tables]
        parts.append("How many times Conveyor's best row beats each library's best row "
                     "(throughput: Conveyor / peer; latency and memory: peer / Conveyor); each cell "
                     "names the peer's row, the first line Conveyor's; *noise* marks a ratio within "
                     f"{THRESHOLD:.0%} of 1 or whose repetitions overlap (no difference to call out):")
        top = best(rows)
        ratios = named_ratios(top)
        parts += [table(ratios, "library", "cell", columns) for _, columns in tables]
        parts.append(behind(top))
        process = rows[rows.table == "Process (jobs/s)"]
        log = process.value.max() / process.value.min() >= 10
        title = f"process: jobs/s by concurrency on {server}"  # a log axis is named on the axis
        fig = plot(process.assign(median=process.value, min=process.lo, max=process.hi,
                                  x=process.column.str.split("=").str[1]), "x",
                   "library (row)", str, title=title, x_title="concurrency", y_title="jobs/s", sort=False,
                   log_y=log, category_x=True)
        parts.append(chart(fig, f"peers-process-{server}"))
    return "\n\n".join(parts)


WHY_BEHIND = {  # by column kind: why Conveyor can trail there, from how its worker gets a job
    "latency": "an idle Conveyor worker is woken by a marker (a blocking `BZPOPMIN`) and then leases "
               "the job with a script, two round trips between the enqueue and the handler, where a "
               "library whose blocking pop hands over the job itself needs one (and, without a lease, "
               "cannot bring the job back if its worker dies: see the crash table)",
}


def behind(top: pd.DataFrame) -> str:
    """Every column where a library's best row beats Conveyor's beyond noise, and why."""
    found = top[(top.library != REF) & (top.ratio < 1) & ~top.noise.astype(bool)]
    if found.empty:
        return "Conveyor is not behind any library beyond noise in any column of this server."
    flavor = found["library (row)"].str.extract(r"\((.*)\)$", expand=False)
    cells = "; ".join(f"{c.replace(' (ms)', '').replace(' (B/job)', '')} against {lib} ({times(r)}, {f})"
                      for c, lib, r, f in zip(found.column, found.library, found.ratio, flavor, strict=True))
    kinds = dict.fromkeys(k for c in found.column for k in WHY_BEHIND if c.startswith(k))
    why = " ".join(f"Why: {WHY_BEHIND[k]}." for k in kinds) or "No per-job cost explains it in this run."
    return f"Conveyor is behind beyond noise in {cells}. {why}"


def servers_line(servers: list[dict[str, Any]]) -> str:
    """Which servers the run shown covers (with each version from INFO) and which it could not."""
    def name(server: dict[str, Any]) -> str:
        family, version = str(server.get("family") or "").capitalize(), server.get("version")
        return f"`{server['id']}`" + (f" ({family} {version})" if family and version else "")

    measured = [name(s) for s in servers if s.get("measured")]
    missing = [f"{name(s)}: {s.get('reason') or 'no reason recorded'}"
               for s in servers if not s.get("measured")]
    line = (f"Servers in this run: {and_list(measured)}." if measured
            else "No server was measured in this run.")
    return line + (f" Not measured: {'; '.join(missing)}." if missing else "")


def sizes_line(sizes: dict[str, Any], reps: int | None) -> str:
    """The sizes of the run shown: fixed job counts (older runs) or drains sized by time."""
    if "process" in sizes:
        return (f"Sizes in this run: {sizes['enqueue']} jobs per enqueue row, {sizes['bulk']} per bulk row, "
                f"a backlog of {sizes['process']} jobs per process case, {sizes['latency']} latency samples; "
                "small sizes time short drains, so a fast library's rate is the least certain figure.")
    return (f"Sizes in this run: each enqueue case calls for {fmt(sizes['enqueue_s'])} s; each process "
            f"backlog is sized from the library's own rate so that its drain lasts at least "
            f"{fmt(sizes['process_s'])} s (between {fmt(sizes['process_floor'])} and "
            f"{fmt(sizes['process_cap'])} jobs; a drain shorter than {fmt(sizes['min_drain_s'])} s is "
            f"discarded and rerun once, resized); up to {sizes['latency']} latency samples, none sent after "
            f"{fmt(sizes['latency_s'])} s; {reps or 1} repetition{'s' * ((reps or 1) > 1)} per case, "
            "the same for every library. The jobs and seconds of each drain are in the result file.")


def crash_row(rec: dict[str, Any]) -> dict[str, str]:
    ok, done = rec["status"] == "ok", rec.get("seconds_to_done")
    idle = f", or {fmt(rec['idle_s'])} s without progress" if rec.get("idle_s") else ""
    after = fmt(done) if done is not None else f"never (limit {fmt(rec['limit_s'])} s{idle})"
    return {"library": rec["library"], "fault": FAULTS.get(rec["fault"], rec["fault"]),
            "lost / twice / stuck": f"{rec['lost']} / {rec['run_twice']} / {rec['stuck']}" if ok else MISSING,
            "all done after (s)": after if ok else f"failed: {rec.get('error', '')[:80]}",
            "worker alive": {True: "yes", False: "no (exited)"}.get(rec.get("worker_alive"), MISSING)}


@peers_section
def peers_crash(peers: dict[str, Any], frame: pd.DataFrame, prefix: str) -> str:
    """The crash table per server and each library's recovery settings."""
    m = peers["method"]["crash"]
    crash = pd.DataFrame([crash_row(r) for r in peers["crash"]])
    tables = [f"**{s}**\n\n" + md_table(part) for s, part in
              crash.groupby([r["server"] for r in peers["crash"]], sort=False)]
    settings = pd.DataFrame([{"library": n, "recovery settings used": str(lib["recovery_settings"])}
                             for n, lib in peers["libraries"].items()])
    return "\n\n".join([f"{m['jobs']} jobs, each sleeping {m['sleep_s']} s, a worker at concurrency "
                        f"{m['concurrency']}, the fault strikes once a quarter are done; server with AOF "
                        f"({m['server_config']}); connections cut for {m['cut_s']} s" + limits(m) + ".",
                        *tables,
                        md_table(settings)])


def limits(m: dict[str, Any]) -> str:
    """How long the crash table waited for every job (older files: the limit per row only)."""
    return ((f"; then every job is waited for up to {m['limit_s']} s" if m.get("limit_s") else "")
            + (f", giving up once none has completed for {m['idle_s']} s" if m.get("idle_s") else "")
            + ("; each library and fault once per server" if m.get("limit_s") else ""))


def concurrency_news(lib: dict[str, Any]) -> bool:
    """Whether a library's concurrency note says something its caveat does not already (rq's
    caveat is about its concurrency, and repeating it read as a duplicate)."""
    return bool(lib.get("concurrency_note")) and "concurrency" not in lib.get("caveats", "").lower()


def caveats(peers: dict[str, Any], frame: pd.DataFrame, prefix: str) -> str:
    """What each library does per job that Conveyor does not, and what could not be measured."""
    lines = [f"- **{n}**: {lib['caveats']}" + (f" Concurrency: {lib['concurrency_note']}."
                                               if concurrency_news(lib) else "")
             for n, lib in peers["libraries"].items()]
    failed = [f"- {r['server']} {r['library']} ({r['flavor']}) {r['scenario']} {r['params']}: {r['status']}: "
              f"{r.get('error', '')[:160]}" for r in peers["rows"] if r["status"] in ("failed", "timeout")]
    return "\n".join(lines + (["\n" + admonition("warning", "Rows without a figure", "\n".join(failed))]
                              if failed else []))


peers_caveats = peers_section(caveats, source=False)
WORKERS = ("Worker", "AsyncWorker")  # Conveyor's two workers at their defaults, a row each
CPU = "per_job_client_cpu_us"  # in a process case: the worker process's CPU per job it ran


def row_stats(row: dict[str, Any], metric: str) -> pd.Series:
    """A peers row's ``metric`` as the median/min/max/n that ``compare.ratio`` takes."""
    got = row["metrics"][metric]
    return pd.Series({"median": got["median"], "min": got["min"], "max": got["max"], "n": got["count"]})


def worker_cpu(peers: dict[str, Any], frame: pd.DataFrame, prefix: str) -> str:
    """Conveyor's sync ``Worker`` against its ``AsyncWorker``: worker CPU per job in each process
    case of the run, with the ratio, its whiskers and the site's noise rule, and a sentence saying
    where the AsyncWorker spent less, more, or no difference to call out."""
    rows = {(r["server"], r["flavor"], r["params"].get("concurrency")): r for r in peers["rows"]
            if r["library"] == REF and r["scenario"] == "process" and r["status"] == "ok"
            and CPU in (r.get("metrics") or {})}
    table, said = [], {}
    for server, flavor, concurrency in rows:
        if flavor != WORKERS[0] or (server, WORKERS[1], concurrency) not in rows:
            continue
        sync, aio = (row_stats(rows[server, f, concurrency], CPU) for f in WORKERS)
        found = ratio(sync, aio)  # above 1: the AsyncWorker spent less
        word = "no difference to call out" if found["noise"] else "less" if found["ratio"] > 1 else "more"
        said.setdefault(word, {}).setdefault(concurrency, []).append(server)
        table.append({"server": server, "concurrency": concurrency,
                      **{f"{f} (µs/job)": fmt_stat(s["median"], 0.0, int(s["n"]), s["min"], s["max"])
                         for f, s in zip(WORKERS, (sync, aio), strict=True)},
                      "Worker ÷ AsyncWorker": ratio_text(found)})
    if not table:
        return ("Worker CPU per job was not recorded for both of Conveyor's workers in this run: a run "
                "with the current suite records it.")
    parts = []
    for word in ("less", "more", "no difference to call out"):
        where: dict[tuple[str, ...], list[str]] = {}
        for concurrency, servers in said.get(word, {}).items():
            where.setdefault(tuple(servers), []).append(str(concurrency))
        if where:
            parts.append(f"{word} at " + " and at ".join(
                f"concurrency {and_list(cs)} on {and_list(list(servers))}" for servers, cs in where.items()))
    return (f"Worker CPU per job in this run, the `AsyncWorker` against the sync `Worker`: "
            f"{'; '.join(parts)} (the ratio's range runs from the worst to the best pairing of the two "
            "rows' repetitions):\n\n" + md_table(pd.DataFrame(table)))


def and_list(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


peers_worker_cpu = peers_section(worker_cpu, source=False)


def peers_reproduce(ds: Dataset, prefix: str = "") -> str:
    """The command that made the shown peers run, as a user types it (``nox -s bench -- ...``)."""
    run = peers_run(ds)
    default = "nox -s bench -- --libraries all --servers valkey-9.1,redis-8.2"
    if run is None:
        return f"`{default}`"
    command = list(run.doc.get("command") or [])
    args = command[3:] if command[1:3] == ["-m", "bench"] else command[1:]
    if not args:
        return f"`{default}`"
    return f"`nox -s bench -- {shlex.join(args)}` (the command of run `{run.run_id}`)"


SECTIONS = {"peers_reproduce": peers_reproduce, "peers_libraries": peers_libraries,
            "peers_speed": peers_speed,
            "peers_crash": peers_crash, "peers_caveats": peers_caveats, "peers_worker_cpu": peers_worker_cpu}
