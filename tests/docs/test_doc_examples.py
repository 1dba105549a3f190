"""The documentation's examples, run as a new user would run them.

Every fenced block of the pages a user copies from is either run against a real server (a fresh
process each, in a scratch directory, as a user's script or shell would) or named in RULES with
the reason it is not run here. A block no rule names fails the collection test below, so a new
example is run (or its reason written) from the day it is added.

Placeholders are filled only where the text leaves them to the user: the server address
(``redis://localhost:6379/0``), ``CONVEYOR_URL``, and the names a fragment takes from the text
around it (``queue``, ``url``, ``tenant``...). A block's own imports are never supplied: a
fragment that uses a name of ``conveyor`` must import it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import conveyor
import pytest
import redis
from conveyor import AsyncWorker, Worker
from conveyor._dispatch import WorkerOptions

from bench.servers import KINDS

REPO = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/index.md", "docs/api.md", "docs/production.md", "docs/connections.md",
         "docs/high-availability.md", "docs/tuning.md", "docs/runtimes.md")  # fmt: skip
SCRIPT = Path(sys.executable).parent / "conveyor"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "conveyor"]
DB = 7  # the examples' own database, emptied before each: their queue names ("emails") are the docs'
PLACEHOLDER_URLS = ("redis://localhost:6379/0", "redis://127.0.0.1:6379/0")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str

    @property
    def id(self) -> str:
        return f"{Path(self.page).name}:{self.line}"


@dataclass(frozen=True)
class Rule:
    """How one block is run. ``marker``: text only that block of its page holds."""

    page: str
    marker: str
    run: str = ""  # "python", "app" (the page's myapp/tasks.py), "shell"; "" = not run (reason)
    reason: str = ""
    context: str = ""  # run first: what the page's text gives the fragment (never a name it imports)
    app: bool = False  # the page's app module is in place (myapp/tasks.py)
    worker: str = ""  # a worker that serves the fragment's jobs, started in the same process
    expect: tuple[str, ...] = ()  # what the text says the block prints


PROD = "docs/production.md"
HA = "docs/high-availability.md"
RESULTS_WORKER = '''
import threading
from conveyor import Queue as _Q, Worker as _W
_handlers = {"render": lambda job: {"rendered": job.payload["id"]}}
_w = _W(_Q.from_url(url, "reports", store_results=True), _handlers, install_signal_handlers=False)
threading.Thread(target=_w.run, daemon=True).start()
'''
RULES = (
    Rule("README.md", "nox -s bench", reason="runs the benchmarks and the whole suite (nox)"),
    Rule("README.md", "AsyncWorker(queue", "python",
         expect=("sending to ada@example.com", "sending to bob@example.com", "'total_completed': 2")),
    Rule("README.md", "# myapp/tasks.py", "app"),
    Rule("docs/index.md", "pip install", reason="installs a package"),
    Rule("docs/index.md", "Worker(queue", "python", expect=("sending to ada@example.com",)),
    Rule(PROD, "pip install \"conveyor", reason="installs a package"),
    Rule(PROD, "# myapp/tasks.py", "app"),
    Rule(PROD, "await fetch.aenqueue", "python", app=True,
         context="from myapp.tasks import fetch, send_email"),
    Rule(PROD, "@app.task(priority=5)", "python", app=True,
         context="from myapp.tasks import app\nqueue = app.queue('reports')"),
    Rule(PROD, "Limit(\"smtp\"", "python", app=True,
         context="from myapp.tasks import app\nqueue = app.queue('crm')\ntenant, rows = 'acme', [1, 2]"),
    Rule(PROD, "conveyor worker --help", "shell", app=True),
    Rule(PROD, "store_results=True)", "python", context="import os\nurl = os.environ['CONVEYOR_URL']",
         worker=RESULTS_WORKER, expect=("{'rendered': 42}\n{'rendered': 42}",)),
    Rule(PROD, "@app.before", "python", app=True, context="from myapp.tasks import app"),
    Rule(PROD, "[Unit]", reason="a systemd unit file"),
    Rule(PROD, "systemctl enable", reason="systemd commands"),
    Rule(PROD, "FROM python", reason="a Dockerfile (no docker here)"),
    Rule(PROD, "docker run", reason="docker"),
    Rule(PROD, "kind: Deployment", reason="a Kubernetes manifest"),
    Rule(HA, "redis+sentinel://s1", reason="needs Sentinel and Cluster topologies: tests/ha run them"),
    Rule(HA, "enqueue_many_to", "python",
         context=("import os\nfrom conveyor import Queue as _Queue\n"
                  "queue = _Queue.from_url(os.environ['CONVEYOR_URL'], 'emails')\n"
                  "batch = [[f'user{i}@example.com'] for i in range(8)]\n"), expect=()),
    Rule(HA, "rediss://cache.internal",
         reason="a TLS server at a host of the user's: tests/integration/test_tls.py runs TLS"),
    Rule("docs/tuning.md", "CONFIG SET hash-max-listpack-value", reason="server configuration"),
    Rule("docs/tuning.md", "maxmemory-policy noeviction", reason="server configuration"),
    Rule("docs/tuning.md", "dragonfly --lock_on_hashtags", reason="no Dragonfly binary here"),
    Rule("docs/runtimes.md", "pip install", reason="installs a package"),
    Rule("docs/runtimes.md", 'driver="glide"', "python"),
)
# A command the text runs on a queue with no such failed jobs: it names them and exits 1 (the
# exit code table of production.md); every other command exits 0.
EXIT_CODES = {"conveyor retry myapp.tasks:app -q default 17 42": 1}


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = (REPO / page).read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(page, line, match.group(1), match.group(2)))
    return found


def rule_of(block: Block) -> Rule | None:
    rules = [rule for rule in RULES if rule.page == block.page and rule.marker in block.code]
    return rules[0] if len(rules) == 1 else None


def test_every_block_is_run_or_says_why_not() -> None:
    unnamed = [block.id for block in blocks() if rule_of(block) is None]
    assert unnamed == [], f"blocks no rule (or several) names: add one to RULES: {unnamed}"
    stale = [(r.page, r.marker) for r in RULES if not any(rule_of(b) is r for b in blocks())]
    assert stale == [], f"rules that name no block: {stale}"


@pytest.fixture(scope="module")
def doc_url(server_pool) -> str:  # type: ignore[no-untyped-def]
    """One standalone server for every example (the first kind this run may start), database DB."""
    for kind in KINDS:
        try:
            server = server_pool.get(kind.id)
        except pytest.skip.Exception:
            continue
        return f"{server.url.rsplit('/', 1)[0]}/{DB}"
    pytest.skip("no server available")


@pytest.fixture
def workspace(tmp_path: Path, doc_url: str) -> Iterator[tuple[Path, dict[str, str]]]:
    """A scratch directory and a user's environment; the examples' database starts empty (their
    queue names are the docs' own, and a printed count must not depend on the examples before)."""
    client = redis.Redis.from_url(doc_url)
    client.flushdb()
    client.close()
    env = {**os.environ, "CONVEYOR_URL": doc_url, "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)  # a user's shell: the installed package, the current directory
    yield tmp_path, env


def fill(code: str, url: str) -> str:
    for placeholder in PLACEHOLDER_URLS:
        code = code.replace(placeholder, url)
    return code


def page_app(page: str) -> str:
    [app] = [block.code for block in blocks() if block.page == page and "# myapp/tasks.py" in block.code]
    return app


def write_app(root: Path, page: str, url: str) -> None:
    (root / "myapp").mkdir(exist_ok=True)
    (root / "myapp" / "__init__.py").write_text("")
    (root / "myapp" / "tasks.py").write_text(fill(page_app(page), url))


# Runs a fragment as a user's script would, and top-level `await` as asyncio code around it would.
RUNNER = '''
import ast, asyncio, sys, types
namespace = {"__name__": "__main__"}
for path in sys.argv[1:]:
    code = compile(open(path).read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if isinstance(result, types.CoroutineType):
        asyncio.run(result)
'''


def run_python(block: Block, rule: Rule, root: Path, env: dict[str, str]) -> str:
    parts = [rule.context, rule.worker, fill(block.code, env["CONVEYOR_URL"])]
    paths = []
    for i, part in enumerate(parts):
        (root / f"part{i}.py").write_text(part)
        paths.append(f"part{i}.py")
    (root / "runner.py").write_text(RUNNER)
    proc = subprocess.run([sys.executable, "runner.py", *paths], cwd=root, env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, f"{block.id} failed:\n{proc.stderr}"
    return proc.stdout


def run_command(line: str, root: Path, env: dict[str, str]) -> None:
    args = line.split()
    assert args[0] == "conveyor", line
    if args[1] == "worker" and "--help" not in args and "--burst" not in args:
        proc = subprocess.Popen(COMMAND + args[1:], cwd=root, env=env, stderr=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        stop_worker(line, proc, env["CONVEYOR_URL"])
        return
    proc = subprocess.run(COMMAND + args[1:], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert proc.returncode == EXIT_CODES.get(line, 0), f"{line}: exit {proc.returncode}\n{proc.stderr}"


def stop_worker(line: str, proc: subprocess.Popen[str], url: str) -> None:
    """A worker runs until SIGTERM, then exits 0 (production.md, Exit codes). SIGTERM is sent once
    it serves (its pump connections are open): before, the process has no handler for it yet."""
    deadline = time.monotonic() + 30
    with redis.Redis.from_url(url) as admin:
        while not any(c["name"].endswith(":pump") and int(c["db"]) == DB for c in admin.client_list()):
            assert proc.poll() is None, f"{line}: exited {proc.returncode}\n{proc.communicate()[1]}"
            assert time.monotonic() < deadline, f"{line}: not serving after 30 s"
            time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, f"{line}: exit {proc.returncode}\n{stderr}"
    assert "stopped" in stderr, stderr


def commands(code: str) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in code.splitlines())
    return [line for line in lines if line]


@pytest.mark.parametrize("block", blocks(), ids=lambda block: block.id)
def test_example(block: Block, workspace: tuple[Path, dict[str, str]]) -> None:
    rule = rule_of(block)
    assert rule is not None, "see test_every_block_is_run_or_says_why_not"
    if not rule.run:
        pytest.skip(f"not run: {rule.reason}")
    root, env = workspace
    if rule.app or rule.run in ("app", "shell"):
        write_app(root, block.page, env["CONVEYOR_URL"])
    if rule.run == "app":
        proc = subprocess.run([sys.executable, "-c", "import myapp.tasks"], cwd=root, env=env,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    elif rule.run == "shell":
        for line in commands(block.code):
            run_command(line, root, env)
    else:
        if "glide" in block.code:
            pytest.importorskip("glide")
        out = run_python(block, rule, root, env)
        for claim in rule.expect:
            assert claim in out, f"{block.id} printed:\n{out}"


def test_the_readme_worker_command_runs_the_readme_app(workspace: tuple[Path, dict[str, str]]) -> None:
    """README.md: the app of "An app and the `conveyor` command", the job its text enqueues, then
    its `conveyor worker ...` line until SIGTERM: the job is completed and the exit code is 0."""
    root, env = workspace
    write_app(root, "README.md", env["CONVEYOR_URL"])
    readme = (REPO / "README.md").read_text()
    [enqueue] = re.findall(r"`(send_email\.enqueue\([^`]*\))`", readme)
    [command] = re.findall(r"`(conveyor worker myapp\.tasks:app[^`]*)`", readme)
    before = emails_counts(root, env)
    script = f"from myapp.tasks import send_email\n{enqueue}"
    subprocess.run([sys.executable, "-c", script], cwd=root, env=env, check=True, timeout=60)
    args = command.split()
    proc = subprocess.Popen(COMMAND + args[1:], cwd=root, env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 30
    # SIGTERM only once the job is done: sent as soon as the worker serves (stop_worker alone), a
    # loaded machine could stop it before its first claim, and the job was still waiting.
    while (after := emails_counts(root, env))["total_completed"] == before["total_completed"]:
        assert proc.poll() is None, f"{command}: exited {proc.returncode}\n{proc.communicate()[1]}"
        assert time.monotonic() < deadline, f"{command}: the job was not completed within 30 s: {after}"
        time.sleep(0.1)
    stop_worker(command, proc, env["CONVEYOR_URL"])
    after = emails_counts(root, env)
    assert (after["waiting"], after["total_completed"] - before["total_completed"]) == (0, 1), after


def emails_counts(root: Path, env: dict[str, str]) -> dict[str, int]:
    """The README app's queue "emails", as `conveyor info --json` shows it."""
    info = subprocess.run([*COMMAND, "info", "myapp.tasks:app", "--json"], cwd=root, env=env,
                          capture_output=True, text=True, check=True, timeout=60).stdout  # fmt: skip
    return next(row for row in map(json.loads, info.splitlines()) if row["queue"] == "emails")  # type: ignore[no-any-return]


def test_the_container_image_installs_what_its_commands_use() -> None:
    """production.md: the Kubernetes Deployment runs the Dockerfile's image with --metrics-port (the
    prometheus extra), its app has cron schedules (cron), its entry point is `conveyor` (cli).
    Failed before: the image ran `pip install ".[hiredis,cli,cron]"`, the extras of the user's own
    project (which has none of them: pip only warns), and no prometheus: the Deployment's worker
    exited 2 ("--metrics-port needs the 'prometheus' extra")."""
    [dockerfile] = [block.code for block in blocks() if block.lang == "dockerfile"]
    [manifest] = [block.code for block in blocks() if "kind: Deployment" in block.code]
    [install] = [line for line in dockerfile.splitlines() if "pip install" in line]
    extras = re.search(r"conveyor\[([\w,]+)\]", install)
    assert extras is not None, f"the image does not install conveyor's extras: {install}"
    needed = {"cli"} | ({"cron"} if "cron=" in page_app(PROD) else set())
    needed |= {"prometheus"} if "--metrics-port" in manifest else set()
    assert needed <= set(extras.group(1).split(",")), install


@pytest.mark.parametrize("worker", [Worker, AsyncWorker], ids=lambda cls: cls.__name__)
def test_the_api_reference_names_every_worker_option(worker: type) -> None:
    """api.md renders the docstrings; a worker takes its options as ``**options``, so its signature
    there lists none. Failed before: prefetch, burst (README's quick start uses it), block_timeout
    and install_signal_handlers (off, for a worker in a program with its own SIGTERM handler) were
    named nowhere in the reference, nor concurrency's default of 1."""
    doc = worker.__doc__ or ""
    missing = [f.name for f in dataclasses.fields(WorkerOptions) if f"``{f.name}``" not in doc]
    assert missing == [], f"{worker.__name__}'s docstring does not name the options {missing}"
    assert "default 1" in doc


def test_the_pages_use_only_exported_names_and_the_reference_documents_every_export() -> None:
    """Every name a page imports from conveyor (or calls as conveyor.X) is in ``__all__``, and
    api.md (``::: conveyor``, members from ``__all__``) shows a docstring of its own for each."""
    used: set[str] = set()
    for page in ("README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))):
        text = (REPO / page).read_text()
        for names in re.findall(r"from conveyor import \(?([\w, ]+)", text):
            used |= {name.strip() for name in names.split(",") if name.strip()}
        used |= set(re.findall(r"`conveyor\.(\w+)\(", text)) | set(re.findall(r"\bconveyor\.(\w+)\(", text))
    assert used - set(conveyor.__all__) == set()
    undocumented = [name for name in conveyor.__all__ if name != "__version__"
                    and not (getattr(conveyor, name).__doc__ or "").strip()]  # fmt: skip
    assert undocumented == []


def test_the_api_reference_describes_every_queue_setting() -> None:
    """QueueSettings is how every page configures a queue (lease, backoff, pool_size, dedup_window...),
    and api.md shows its docstring. Failed before: 12 of its 28 fields (prefix, lease, max_attempts,
    backoff, max_payload_bytes, maintenance_batch, maintenance_interval, pool_size, pool_timeout,
    connect_timeout, protocol, dedup_window) were described nowhere in it."""
    doc = conveyor.QueueSettings.__doc__ or ""
    fields = [f.name for f in dataclasses.fields(conveyor.QueueSettings)]
    missing = [name for name in fields if not re.search(rf"\b{name}\b", doc)]
    assert missing == [], f"QueueSettings' docstring does not describe {missing}"


def test_the_readme_quick_start_enqueue_marked_idempotent_is(workspace: tuple[Path, dict[str, str]]) -> None:
    """README's quick start marks the enqueue with job_id="welcome-bob" `# idempotent`: run again,
    it sends nothing new to bob. Failed before: with the default dedup_window (an id is kept only
    while its job is retained, and a completed job is dropped at its ack) the second run sent bob's
    welcome again."""
    root, env = workspace
    [block] = [b for b in blocks() if b.page == "README.md" and "AsyncWorker(queue" in b.code]
    assert "# idempotent" in block.code
    rule = rule_of(block)
    assert rule is not None
    out = run_python(block, rule, root, env) + run_python(block, rule, root, env)
    assert (out.count("sending to ada@example.com"), out.count("sending to bob@example.com")) == (2, 1), out


def test_the_metrics_section_states_the_library_defaults() -> None:
    """production.md spells out instrument()'s default histogram buckets and scrape timeout in
    prose (a table cell and a sentence): this keeps them equal to the library's, which nothing
    checked."""
    from conveyor._metrics import DURATION_BUCKETS, SCRAPE_TIMEOUT  # noqa: PLC0415

    text = (REPO / PROD).read_text()
    buckets = ", ".join(f"{b:g}" for b in DURATION_BUCKETS)
    assert f"({buckets} s, +Inf)" in text
    assert f"scrape_timeout={SCRAPE_TIMEOUT!r})`, the default" in text
