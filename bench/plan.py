"""The run plan: which servers, configurations, variants and scenario cases to measure.

Variants vary one dimension at a time from a baseline (``default`` config, RESP3, hiredis):
the baseline runs every case of every scenario; other variants run the subset each
scenario module chooses in its ``cases()`` (for example one lifecycle row under AOF).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import scenarios
from bench.scenarios._common import BESIDE, DRIVER_SCENARIOS, Variant
from bench.servers import ServerUnavailable, get_kind, locate

DEFAULT_CONFIGS = ("default", "listpack-1024", "aof-everysec", "aof-always")
DRAGONFLY_GLOBAL = "global-lock"


@dataclass
class Options:
    """Everything the command line decided."""

    servers: list[str]
    configs: list[str]
    scenarios: list[str]
    protocols: list[int]
    parsers: list[str]
    quick: bool
    repetitions: int
    warmup: int
    external: dict[str, str] = field(default_factory=dict)
    force_flush: bool = False
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    timeout: float = 900.0
    output: Path | None = None
    client_variants: str = "first"  # "first": RESP2 / Python parser on the first server only
    loop: str = "asyncio"  # event loop of the asyncio parts of scenarios ("asyncio" or "uvloop")
    driver: str = "redis-py"  # Conveyor's client library (see bench.scenarios._common.DRIVERS)
    driver_missing: str = ""  # why --driver cannot run here (its servers are "not measured")
    beside: list[str] = field(default_factory=list)  # --beside: options twinned with every case


@dataclass
class CellSpec:
    """A scenario on a variant with its cases (the target URL is known only once started)."""

    scenario: str
    variant: Variant
    cases: list[dict[str, Any]]
    repetitions: int = 5
    warmup: int = 1
    beside: tuple[str, ...] = ()  # the --beside options each case is twinned with

    @property
    def label(self) -> str:
        """Human label (also the key of the cell's recorded time: a twinned cell takes longer)."""
        twins = f" beside {','.join(self.beside)}" if self.beside else ""
        return f"{self.scenario} @ {self.variant.label}{twins}"


@dataclass
class ConfigPlan:
    """One fresh server start: launcher configuration, Dragonfly mode, and its cells."""

    label: str
    launcher_config: str
    mode: str | None
    cells: list[CellSpec] = field(default_factory=list)
    not_applicable: str | None = None


@dataclass
class ServerPlan:
    """A server kind (or external URL) and its configurations, or why it is not measured."""

    id: str
    family: str
    external_url: str | None = None
    reason: str | None = None
    command: str | None = None
    configs: list[ConfigPlan] = field(default_factory=list)


@dataclass
class Plan:
    """The whole run."""

    servers: list[ServerPlan]

    @property
    def cells(self) -> list[CellSpec]:
        """Every cell, in run order."""
        return [c for s in self.servers for cfg in s.configs for c in cfg.cells]


def scenario_options(name: str, opts: Options) -> dict[str, Any]:
    """Sizes for ``name``: DEFAULTS or QUICK, then ``--param`` overrides."""
    module = scenarios.load(name)
    base = dict(module.QUICK if opts.quick else module.DEFAULTS)
    unknown = set(opts.params.get(name, {})) - set(base)
    if unknown:
        raise SystemExit(f"--param {name}: unknown key(s) {sorted(unknown)}; known: {sorted(base)}")
    base.update(opts.params.get(name, {}))
    return base


def variants(server: str, family: str, configs: list[str], opts: Options,
             client: bool = True) -> list[Variant]:
    """Baseline plus one-dimension-at-a-time variations, for the given config labels.

    ``client=False`` leaves out the client-side variations (protocol, parser), which do not
    depend on the server: by default they are measured on the run's first server only.
    """
    base_cfg = configs[0]
    base_proto = 3 if 3 in opts.protocols else opts.protocols[0]
    base_parser = "hiredis" if "hiredis" in opts.parsers else opts.parsers[0]
    combos = [(base_cfg, base_proto, base_parser)]
    combos += [(c, base_proto, base_parser) for c in configs[1:]]
    if client:
        combos += [(base_cfg, p, base_parser) for p in opts.protocols if p != base_proto]
        combos += [(base_cfg, base_proto, x) for x in opts.parsers if x != base_parser]
    return [
        Variant(server, family, c, p, x, primary=(c, p, x) == combos[0], quick=opts.quick,
                base_config=c == base_cfg, client_side=client)
        for c, p, x in combos
    ]


def _config_plans(family: str, opts: Options) -> list[ConfigPlan]:
    """Config labels to start for a local server kind (Dragonfly adds global locking)."""
    ordered = sorted(opts.configs, key=lambda c: c != "default")
    if family != "dragonfly":
        return [ConfigPlan(c, c, None) for c in ordered if c != DRAGONFLY_GLOBAL]
    plans = []
    for c in ordered:
        if c.startswith("aof-"):
            plans.append(ConfigPlan(c, c, None, not_applicable="Dragonfly has no AOF"))
        elif c == DRAGONFLY_GLOBAL:
            continue
        else:
            plans.append(ConfigPlan(c, c, "hashtag"))
    if "default" in opts.configs or DRAGONFLY_GLOBAL in opts.configs:
        plans.append(ConfigPlan(DRAGONFLY_GLOBAL, "default", "global"))
    return plans


def _fill_cells(sp: ServerPlan, opts: Options, client: bool = True) -> None:
    """Attach scenario cells to every applicable configuration of ``sp``."""
    runnable = [c for c in sp.configs if c.not_applicable is None]
    labels = [c.label for c in runnable]
    by_label = {c.label: c for c in runnable}
    sizes = {name: scenario_options(name, opts) for name in opts.scenarios}
    for variant in variants(sp.id, sp.family, labels, opts, client) if labels else []:
        for name in opts.scenarios:
            module = scenarios.load(name)
            cases = module.cases(variant, sizes[name])
            if opts.loop != "asyncio":  # recorded per result; default-loop rows stay as before
                cases = [{**case, "loop": opts.loop} for case in cases]
            if opts.driver != "redis-py":  # likewise for the driver
                cases = [{**case, "driver": opts.driver} for case in cases]
            beside = twinned(name, opts.beside) if variant.primary else ()
            cases = [twin for case in cases for twin in [case, *({**case, **BESIDE[b]} for b in beside)]]
            if cases:
                reps = min(opts.repetitions, getattr(module, "MAX_REPETITIONS", opts.repetitions))
                warm = min(opts.warmup, getattr(module, "WARMUP", opts.warmup))
                spec = CellSpec(name, variant, cases, reps, warm, beside)
                by_label[variant.config].cells.append(spec)


def twinned(scenario: str, beside: list[str]) -> tuple[str, ...]:
    """The --beside options that apply to ``scenario`` (glide runs only the driver scenarios).
    Each case is followed by its twin on each: run back to back, they compare like for like."""
    return tuple(b for b in beside if b != "glide" or scenario in DRIVER_SCENARIOS)


def unavailable_command(kind_id: str) -> str:
    """The command that would measure a server that is not available here."""
    if kind_id == "dragonfly":
        return ("DRAGONFLY_BIN=/path/to/dragonfly nox -s bench -- --servers dragonfly   "
                "# or: nox -s bench -- --server-url dragonfly=redis://HOST:PORT/0")
    return f"nox -s bench -- --servers {kind_id}"


def _server_plan(kind_id: str, opts: Options, client: bool = True) -> ServerPlan:
    """Plan one local server kind, or record why it cannot be measured."""
    kind = get_kind(kind_id)
    sp = ServerPlan(kind.id, kind.family)
    if opts.driver_missing:
        sp.reason, sp.command = opts.driver_missing, "pip install 'conveyor[glide]'  # then re-run"
        return sp
    try:
        locate(kind)
    except ServerUnavailable as exc:
        sp.reason, sp.command = exc.reason, unavailable_command(kind.id)
        return sp
    sp.configs = _config_plans(kind.family, opts)
    _fill_cells(sp, opts, client)
    return sp


def build_plan(opts: Options) -> Plan:
    """Plan every requested server (local kinds first, then external URLs)."""
    plans: list[ServerPlan] = []
    for s in opts.servers:
        client = opts.client_variants == "all" or not any(p.reason is None for p in plans)
        plans.append(_server_plan(s, opts, client))
    for name, url in opts.external.items():
        sp = ServerPlan(name, "unknown", external_url=url)
        sp.configs = [ConfigPlan("external", "external", None)]
        plans.append(sp)
    return Plan(plans)


def client_variants_server(plan: Plan, opts: Options) -> str | None:
    """The server the client-side variations run on (None: every server, or none)."""
    if opts.client_variants == "all":
        return None
    measured = [s.id for s in plan.servers if s.reason is None]
    return measured[0] if measured else None


def fill_external(sp: ServerPlan, family: str, opts: Options, client: bool = True) -> None:
    """Once an external server's family is known (from INFO), attach its cells."""
    sp.family = family
    sp.configs[0].cells.clear()
    _fill_cells(sp, opts, client)
