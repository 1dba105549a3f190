"""Pages whose sections read more than one run: each figure set against another must come from the
same run, or the text must say which runs (and machines) it joins; and prose must state nothing the
figures shown do not.

Result documents come from docs_synthetic; the newer run measured ``enqueue-single`` alone on
another machine, as run 3fccf3 (AMD EPYC) beside the full run 9140ad (Intel Xeon).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docs_synthetic import load_docs, make_dragonfly_run, make_run, peers_doc, render

from bench.report.load import Dataset
from bench.stats import summarize

NEWER = "20261206T170300Z-cd34ef"
OLDER = "20261129T201500Z-ab12cd"


def newer_run(speed: float = 1.0) -> dict[str, Any]:
    """An enqueue-single-only run on an AMD EPYC, its rates ``speed`` times the full run's."""
    newer = make_run(run_id=NEWER, created="2026-12-06T17:03:00Z")
    newer["results"] = [r for r in newer["results"] if r["scenario"] == "enqueue-single"]
    for row in newer["results"]:
        row["metrics"] = {k: scaled(m, speed) if k == "jobs_per_s" else m for k, m in row["metrics"].items()}
    newer["environment"]["cpu_model"] = "AMD EPYC"
    del newer["peers"]  # as run 3fccf3: no peers section
    return newer


def two_machines(tmp_path: Path, speed: float = 1.0) -> Dataset:
    """The full run (Test CPU) and the newer enqueue-single-only run (AMD EPYC)."""
    return load_docs(tmp_path, make_run(), newer_run(speed))


def scaled(record: dict[str, Any], k: float) -> dict[str, Any]:
    return summarize([v * k for v in record["values"]], record["unit"])


def test_one_job_per_call_from_another_machine_is_not_read_against_the_reference_ceilings(
        tmp_path: Path) -> None:
    """The Performance page tells the reader to read the queue figures as a fraction of the
    reference ceilings; with the one-job-per-call table from another machine (an enqueue at 9,160
    jobs/s on the AMD host against a PING at 7,870 calls/s on the Intel one) a lone enqueue read
    as faster than a bare PING, and nothing said the two came from different machines."""
    single = render(two_machines(tmp_path, speed=3.0), "enqueue_section").split("### In batches")[0]
    note = " ".join(next(p for p in single.split("\n\n") if p.startswith("Measured in run")).split())
    assert f"run `{NEWER}`" in note and "AMD EPYC" in note
    assert f"`{OLDER}`" in note and "Test CPU" in note
    assert "not against the reference ceilings" in note
    # one run behind both: no such note
    assert "reference ceilings" not in render(load_docs(tmp_path / "one", make_run()), "enqueue_section")


def test_the_batching_takeaway_says_its_single_rate_is_not_the_one_in_the_table_above(tmp_path: Path) -> None:
    """The takeaway (batches of 50 against one call at a time, both in the full run: 11.9x) sat under
    a one-job-per-call table from another run and machine, from which a reader computes another
    ratio (88,400 / 9,160 = 9.65x), with nothing saying which one-call rate the takeaway used."""
    out = render(two_machines(tmp_path, speed=3.0), "performance_takeaways")
    line = next(s for s in out.splitlines() if "enqueueing in batches" in s)
    assert "gives 10.0x the jobs/s" in line and "30,000 against 3,000 jobs/s" in line
    assert f"run `{OLDER}`" in line and f"run `{NEWER}`" in line and "AMD EPYC" in line
    one = render(load_docs(tmp_path / "one", make_run()), "performance_takeaways")
    assert "30,000 against 3,000 jobs/s" in one and "table above" not in one


def test_methodology_says_which_pages_read_a_newer_run_than_the_baseline(tmp_path: Path) -> None:
    """Run 3fccf3 feeds the Performance page's one-job-per-call table, yet the runs table called
    it 'Tuning: the goals for batching' (here, without the sweep: 'History only'), the full run
    'the figures on every page', and the baseline paragraph listed Dragonfly, peers, runtimes and
    history as the only sections reading another run."""
    out = render(two_machines(tmp_path), "runs_section")
    rows = {line.split("`")[1]: line for line in out.splitlines() if line.startswith("| [`")}
    assert "Performance: one job per call" in rows[NEWER] and "History only" not in rows[NEWER]
    assert "the figures on every page" not in rows[OLDER]
    baseline = " ".join(out.split("\n\n")[0].split())
    assert f"run `{NEWER}`" in baseline and "Performance: one job per call" in baseline
    one = render(load_docs(tmp_path / "one", make_run()), "runs_section")
    assert "the figures on every page" in one and "Performance: one job per call" not in one


def slow_reference(doc: dict[str, Any], k: float) -> dict[str, Any]:
    """``doc`` with its reference ceilings at ``k`` times their synthetic value."""
    for row in doc["results"]:
        if row["scenario"] == "reference":
            row["metrics"] = {n: scaled(m, k) for n, m in row["metrics"].items()}
    return doc


def dragonfly_machine_run(k: float) -> dict[str, Any]:
    """A full run on the Dragonfly run's machine, its reference ceilings at ``k`` times the main
    run's."""
    doc = make_run("20261129T100000Z-aa0001", "2026-11-29T10:00:00Z")
    doc["environment"]["machine_label"] = "dragonfly-host"
    return slow_reference(doc, k)


def test_a_dragonfly_hosts_speed_is_judged_against_its_own_machine(tmp_path: Path) -> None:
    """The Dragonfly run (AMD EPYC, method A) was called 'a slower or busier host' from its Valkey's
    EVALSHA rate against the main run's, measured on another machine (Intel Xeon) with another
    method: a figure of one run set against another's that is not like for like, and nothing said
    the machines differed. Runs of the same method on its own machine are the yardstick; with none,
    the main run is, named as another machine."""
    ds = load_docs(tmp_path, make_run(), dragonfly_machine_run(0.4), make_dragonfly_run(host_speed=0.4))
    assert "slower or busier" not in render(ds, "dragonfly_section") + render(ds, "headline")
    # its machine's other run twice as fast: flagged, and on Home, whose figures come from another
    # machine, the yardstick is not called 'this machine'
    runs = (make_run(), dragonfly_machine_run(0.8), make_dragonfly_run(host_speed=0.4))
    ds = load_docs(tmp_path / "fast", *runs)
    line = next(li for li in render(ds, "headline").splitlines() if "Dragonfly" in li)
    assert "0.50x the EVALSHA rate of the other run of the same method on the same machine" in line
    ds = load_docs(tmp_path / "alone", make_run(), make_dragonfly_run(host_speed=0.4))
    note = " ".join(render(ds, "dragonfly_section").split("Dragonfly 1.40.0")[0].split())
    assert f"run `{OLDER}`" in note and "another machine (synthetic, Test CPU, 2 cores)" in note
    assert "another machine" in render(ds, "headline")


def test_a_headline_like_for_like_with_a_scenario_shown_from_another_run_says_so(tmp_path: Path) -> None:
    """Home's enqueue_many headline reads 'like for like with enqueue-single' (the harness's words:
    the one-job-per-call case of its own run), while the page it links to now shows the
    one-job-per-call figures of another run on another machine: the words invited that comparison."""
    older = make_run()
    bulk = next(r for r in older["results"]
                if r["scenario"] == "enqueue-bulk" and r["params"]["producers"] == 1)
    bulk["headline"] = {"metric": "jobs_per_s", "conditions": "one caller, batches of 50 jobs per call "
                        "(like for like with enqueue-single)"}
    row = next(line for line in render(load_docs(tmp_path, older, newer_run()), "headline").splitlines()
               if "Jobs enqueued per second" in line)
    assert f"like for like with enqueue-single of run `{OLDER}`" in row
    assert f"run `{NEWER}`" in row and "AMD EPYC" in row
    alone = render(load_docs(tmp_path / "one", older), "headline")
    assert "(like for like with enqueue-single)" in alone


def test_a_default_runtime_run_the_runtimes_page_pairs_with_is_named_as_read_there(tmp_path: Path) -> None:
    """Runs 69a9a6, 0abb91 and c67346 are the baselines the Runtimes page pairs its options with
    (its status table names them), yet the runs table called them 'History only: an older run,
    another method or another machine': only runs of another interpreter, loop or driver counted."""
    base = make_run("20261130T100000Z-bb0010", "2026-11-30T10:00:00Z")
    base["servers"] = [s for s in base["servers"] if s["id"] == "valkey-9.1"]  # never the main run
    base["results"] = [r for r in base["results"] if r["server"] == "valkey-9.1"]
    newer = make_run("20261130T101000Z-bb0011", "2026-11-30T10:10:00Z")
    newer["environment"]["python"] = "3.12.1"
    newer["servers"], newer["results"] = base["servers"], base["results"]
    out = render(load_docs(tmp_path, make_run(), base, newer), "runs_section")
    rows = {line.split("`")[1]: line for line in out.splitlines() if line.startswith("| [`")}
    assert "bb0010" in render(load_docs(tmp_path, make_run(), base, newer), "runtimes_table")
    assert "Runtimes and drivers" in rows["20261130T100000Z-bb0010"]


def test_the_runs_a_dragonfly_hosts_speed_is_judged_against_are_named_as_read(tmp_path: Path) -> None:
    """The runs of the Dragonfly run's method and machine are its host's yardstick on the Servers
    page: the runs table must not call them 'History only'."""
    ds = load_docs(tmp_path, make_run(), dragonfly_machine_run(1.0), make_dragonfly_run(host_speed=0.4))
    out = render(ds, "runs_section")
    row = next(line for line in out.splitlines() if line.startswith("| [`20261129T100000Z-aa0001`"))
    assert "the yardstick of the Dragonfly run's host speed" in row and "History only" not in row


def test_the_baseline_paragraph_counts_only_runs_that_feed_a_verdict(tmp_path: Path) -> None:
    """'8 other full runs of that method on that machine feed the run-to-run checks of the
    verdicts', where one of them (5a8f3b) measured failover alone and feeds none: the Servers page
    counts 7 and the AOF table 8 with the baseline itself."""
    failover = make_run("20261129T100000Z-aa0002", "2026-11-29T10:00:00Z")
    failover["results"] = [r for r in failover["results"] if r["scenario"] == "failover"]
    out = render(load_docs(tmp_path, make_run(), failover), "runs_section")
    assert "rests on this run alone" in out and "1 other full run" not in out


def test_the_methodology_page_says_a_page_can_show_several_runs() -> None:
    """'Pages show the newest full run that measured the most servers' read as one run per page,
    where each section picks its own (the Performance page shows 9140ad and 3fccf3)."""
    page = " ".join((Path(__file__).parents[2] / "docs" / "methodology.md").read_text().split())
    assert "Pages show the newest full run" not in page
    assert "Each section shows the newest full run that measured its scenario on the most servers" in page
    assert "one page can show several runs" in page


def test_home_headlines_from_two_runs_say_which_run_each_came_from(tmp_path: Path) -> None:
    """Each headline picks its scenario's newest full run: a newer memory-only run on another
    machine would put its figure in the table beside the full run's, with only the source lines
    below the table (one per run) to tell, and nothing saying which row is which."""
    newer = make_run(run_id=NEWER, created="2026-12-06T17:03:00Z")
    newer["results"] = [r for r in newer["results"] if r["scenario"] == "memory"]
    newer["environment"]["cpu_model"] = "AMD EPYC"
    del newer["peers"]
    out = render(load_docs(tmp_path, make_run(), newer), "headline")
    assert "compare rows of the same run only" in out
    rows = [line for line in out.splitlines() if line.startswith("| [")]
    assert rows and all(("`cd34ef`" in r) == ("Memory per waiting job" in r) for r in rows)
    assert all("`ab12cd`" in r for r in rows if "Memory" not in r)
    assert "| run " not in render(load_docs(tmp_path / "one", make_run()), "headline")


def test_the_tuning_page_states_no_cost_of_the_pool_that_no_figure_shows() -> None:
    """'the pool's lock, queue and metrics records, which cost a lone call more client CPU than the
    script call itself': no figure on the site measures either side, and the one measurement behind
    it (220ce2e: 129 against 72 µs per lone call) puts the pool's share below the rest of the call."""
    page = " ".join((Path(__file__).parents[2] / "docs" / "tuning.md").read_text().split())
    assert "more client CPU than the script call itself" not in page
    assert "PING table shows what a checkout costs a lone call" in page


def test_a_runtime_run_a_newer_one_replaced_is_named_only_for_what_is_still_read(tmp_path: Path) -> None:
    """The runs table called every run of another interpreter, loop or driver 'Runtimes and
    drivers', although the page reads each option's newest run only: a replaced run fed nothing,
    or at most the install size of a client package no newer run recorded."""
    base = make_run("20261130T100000Z-bb0010", "2026-11-30T10:00:00Z")
    base["servers"] = [s for s in base["servers"] if s["id"] == "valkey-9.1"]  # never the main run
    base["results"] = [r for r in base["results"] if r["server"] == "valkey-9.1"]
    replaced = make_run("20261130T101000Z-bb0011", "2026-11-30T10:10:00Z")
    newest = make_run("20261130T102000Z-bb0012", "2026-11-30T10:20:00Z")
    for doc in (replaced, newest):
        doc["environment"]["python"] = "3.12.1"
        doc["servers"], doc["results"] = base["servers"], base["results"]

    def roles(*docs: dict[str, Any]) -> dict[str, str]:
        root = tmp_path / str(len(list(tmp_path.iterdir())))  # a fresh results folder per call
        out = render(load_docs(root, make_run(), *docs), "runs_section")
        return {line.split("`")[1]: line for line in out.splitlines() if line.startswith("| [`")}

    found = roles(base, replaced, newest)
    assert "Runtimes and drivers" in found[newest["run_id"]]
    assert "Runtimes and drivers" not in found[replaced["run_id"]]
    replaced["method"]["client_install_bytes"] = {"valkey-glide": 30_000_000}
    assert "Runtimes and drivers: the install sizes only" in roles(base, replaced, newest)[replaced["run_id"]]


def test_a_replaced_peers_run_is_not_said_to_feed_history(tmp_path: Path) -> None:
    """A peers run holds no results rows (History reads those alone), yet once a newer peers run
    replaced it the runs table said 'History only'."""
    older = peers_only("20261205T164918Z-ee0001", "2026-12-05T16:49:18Z")
    newer = peers_only("20261206T212910Z-ee0002", "2026-12-06T21:29:10Z")
    out = render(load_docs(tmp_path, make_run(), older, newer), "runs_section")
    rows = {line.split("`")[1]: line for line in out.splitlines() if line.startswith("| [`")}
    assert "Peers, and its ratios on Home" in rows[newer["run_id"]]
    assert "a peers run that a newer one replaced" in rows[older["run_id"]]
    assert "History" not in rows[older["run_id"]]


def peers_only(run_id: str, created: str) -> dict[str, Any]:
    """A run of ``--libraries all``: its figures are in its peers section, none in results."""
    doc = make_run(run_id, created)
    doc["results"], doc["peers"] = [], peers_doc()
    return doc
