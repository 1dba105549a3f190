"""``python -m bench.compare BASE HEAD``: is HEAD faster, slower, or within noise of BASE?

BASE and HEAD are two git revisions (each built in its own venv and run interleaved on the same
fresh servers, with an A/A pair for the noise floor) or two result files / directories.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import scenarios
from bench.compare import CompareError
from bench.compare.build import build, export, resolve, suite_changes
from bench.compare.render import Report, describe_side, to_json, to_markdown
from bench.compare.rows import build_rows
from bench.compare.samples import check_same_schema, load_pair, side_from_docs
from bench.compare.session import SessionPlan, run_session
from bench.compare.verdict import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT, MIN_RUNS

DEFAULT_SCENARIOS = ("reference", "enqueue-single", "process", "memory")
# Memory per job is nearly deterministic: two payloads and counts to 30,000 keep a run short.
DEFAULT_PARAMS = ("memory.payloads=[64,1024]", "memory.counts=[1000,10000,30000]")
EPILOG = """\
examples:
  nox -s compare -- main~1 main                 head against its parent, 5 runs each + A/A
  nox -s compare -- v0.1.0 HEAD --scenarios process,lifecycle --runs 7
  nox -s compare -- old.json new.json --format json   two result files, no new runs
"""


def parser() -> argparse.ArgumentParser:
    """The argparse parser."""
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base", help="git revision, or a result file / directory")
    p.add_argument("head", help="git revision, or a result file / directory")
    p.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS),
                   help="scenarios to run (default: %(default)s)")
    p.add_argument("--servers", default="valkey-9.1", help="local server kinds (default: %(default)s)")
    p.add_argument("--runs", type=int, default=5,
                   help="independent processes per side (default %(default)s; at least 3)")
    p.add_argument("--quick", action="store_true", help="the suite's smoke sizes (for CI, not evidence)")
    p.add_argument("--param", action="append", default=[], metavar="SCENARIO.KEY=VALUE",
                   help="size override passed to both sides' suite (default: "
                        f"{' '.join(DEFAULT_PARAMS)})")
    p.add_argument("--suite", choices=("own", "head"), default="own",
                   help="benchmark suite each side runs: its own revision's (default), or the head's "
                        "for both (same measurement code, only the library differs)")
    p.add_argument("--aa", type=Path, metavar="PATH",
                   help="with result files: a second set of base runs, for the A/A noise floor")
    p.add_argument("--no-aa", action="store_true", help="skip the A/A (base against base) runs")
    p.add_argument("--min-effect", type=float, default=100 * DEFAULT_MIN_EFFECT,
                   help="smallest difference in %% that can be flagged (default %(default)g)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                   help="significance level of the Mann-Whitney U test (default %(default)g)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    p.add_argument("--output", type=Path, help="write the report here instead of stdout")
    p.add_argument("--workdir", type=Path,
                   help="keep each run's result file here (default: a new temp directory)")
    return p


def _progress(text: str) -> None:
    print(f"compare: {text}", file=sys.stderr, flush=True)


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _check_args(args: argparse.Namespace) -> None:
    if args.runs < MIN_RUNS:
        raise CompareError(f"--runs {args.runs}: at least {MIN_RUNS} runs per side are needed")
    unknown = [s for s in _csv(args.scenarios) if s not in scenarios.ORDER]
    if unknown or not _csv(args.scenarios):
        raise CompareError(f"unknown scenario(s) {unknown}; choose from {', '.join(scenarios.ORDER)}")
    if not 0 < args.alpha < 1 or args.min_effect < 0:
        raise CompareError("--alpha must be between 0 and 1 and --min-effect at least 0")


def session_params(args: argparse.Namespace) -> list[str]:
    """The user's --param options, after the short defaults they do not override (none if --quick)."""
    given = {item.partition("=")[0] for item in args.param}
    chosen = set(_csv(args.scenarios))
    defaults = [] if args.quick else [d for d in DEFAULT_PARAMS if d.partition("=")[0] not in given
                                       and d.partition(".")[0] in chosen]
    return [*defaults, *args.param]


def _revisions(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Build both revisions and run the interleaved session."""
    revs = {"base": resolve(args.base), "head": resolve(args.head)}
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="conveyor-compare-"))
    workdir.mkdir(parents=True, exist_ok=True)
    _progress(f"working in {workdir}")
    envs = {}
    try:
        for side in ("head", "base"):
            rev = revs[side]
            _progress(f"building {side} {rev.label} ({rev.commit[:10]})")
            source = export(rev, workdir / "src" / side)
            suite = envs["head"] if side == "base" and args.suite == "head" else None
            envs[side] = build(rev, source, workdir / f"build-{side}.log", suite=suite)
        plan = SessionPlan(scenarios=_csv(args.scenarios), servers=_csv(args.servers), runs=args.runs,
                           quick=args.quick, params=session_params(args), aa=not args.no_aa)
        docs = run_session(envs, plan, workdir, _progress)
        again = f" --aa {workdir / 'aa'}" if plan.aa else ""
        _progress(f"result files kept; render again: python -m bench.compare {workdir / 'base'} "
                  f"{workdir / 'head'}{again}")
        return docs
    finally:
        shutil.rmtree(workdir / "src", ignore_errors=True)


def _method(args: argparse.Namespace, session: bool) -> dict[str, Any]:
    rule = (f"a verdict needs |Δ| ≥ {args.min_effect:g}% and a two-sided Mann-Whitney U "
            f"p < {args.alpha:g}; MAD is the unscaled median absolute deviation")
    if session:
        suite = "the head's suite" if args.suite == "head" else "that revision's own suite"
        text = (f"{args.runs} runs per side, each a fresh `python -m bench` process of {suite} with the "
                "revision installed in its own venv (1 repetition, no warm-up), rounds interleaved "
                "(base, head, base again for A/A, order rotated each round) on the same fresh servers; "
                f"scenarios {args.scenarios}{' (--quick sizes)' if args.quick else ''}; {rule}.")
    else:
        text = ("values are the repetitions stored in each side's result files; unless the files come "
                "from one `compare` session, the sides were not measured interleaved, so drift between "
                f"them counts as a difference; {rule}.")
    return {"description": text, "runs": args.runs if session else None, "interleaved": session,
            "suite": args.suite if session else None,
            "min_effect_pct": args.min_effect, "alpha": args.alpha, "scenarios": _csv(args.scenarios)}


def _notes(args: argparse.Namespace, session: bool, base: list[dict[str, Any]],
           head: list[dict[str, Any]]) -> list[str]:
    """Warnings that change how the report reads: other machines, a changed benchmark suite."""
    notes = []
    keys = ("cpu_model", "cores", "machine_label", "memory_bytes")
    machines = {tuple(d["environment"].get(k) for k in keys) for d in [*base, *head]}
    if len(machines) > 1:
        notes.append("The runs come from different machines: differences may not be the code's.")
    changed = suite_changes(resolve(args.base), resolve(args.head)) if session else 0
    if changed and args.suite == "own":
        notes.append(f"The benchmark suite differs between base and head ({changed} file(s) under "
                     "bench/): each side ran its own, so a difference may come from the measurement. "
                     "`--suite head` runs the head's suite against both libraries.")
    elif args.suite == "head":
        notes.append("Both sides ran the head's benchmark suite; only the library differs.")
    return notes


def compare_main(args: argparse.Namespace) -> str:
    """Run or load both sides and render the report."""
    _check_args(args)
    exists = [Path(args.base).exists(), Path(args.head).exists()]
    if exists[0] != exists[1]:
        raise CompareError("BASE and HEAD must both be result files (or directories) or both git "
                           f"revisions; only {args.base if exists[0] else args.head!r} is a path")
    session = not exists[0]
    if session and args.aa:
        raise CompareError("--aa takes a result file or directory and goes with result files, "
                           "not revisions (revisions get their A/A runs by default)")
    if session:
        docs = _revisions(args)
        base, head, aa = docs["base"], docs["head"], docs.get("aa")
    else:
        base, head = load_pair(Path(args.base), Path(args.head))
        aa = load_pair(Path(args.base), args.aa)[1] if args.aa else None
    check_same_schema(base, head)
    rows = build_rows(side_from_docs(base), side_from_docs(head), side_from_docs(aa) if aa else None,
                      min_effect=args.min_effect / 100, alpha=args.alpha)
    report = Report(base=describe_side(args.base, base), head=describe_side(args.head, head),
                    machine=base[0]["environment"], method=_method(args, session), rows=rows,
                    notes=_notes(args, session, base, head))
    return to_json(report) if args.format == "json" else to_markdown(report)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: 0 on success, 2 with a one-line message on bad input or a failed step."""
    args = parser().parse_args(argv)
    try:
        text = compare_main(args)
    except CompareError as exc:
        print(f"compare: error: {exc}", file=sys.stderr)
        return 2
    if args.output:
        args.output.write_text(text)
        _progress(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0
