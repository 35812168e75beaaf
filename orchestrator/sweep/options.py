"""What one `orchestrator sweep` asks of the engine (options, hooks) and gets back, and what it checks first."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.config.model import HostConfig, Matrix, OnInfra
from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.matrix.cost import Strategy
from orchestrator.model import Cell
from orchestrator.planning.cells import check_flag_secrets
from orchestrator.planning.strategy import LaunchCost
from orchestrator.settings import RetryPolicy
from orchestrator.store.records import RunRecord
from orchestrator.sweep.cell_run import AttemptResult, launch_env
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.hostdown import Announce
from orchestrator.sweep.preflight import Preflight
from orchestrator.sweep.scheduler import EventSink


@dataclass
class SweepHooks:
    """How a sweep reports progress (the CLI's live display plugs in here)."""

    on_plan: Callable[[Preflight], None] = lambda _p: None
    on_event: EventSink | None = None
    on_result: Callable[[AttemptResult], None] | None = None
    on_reattach: Callable[[RunRecord, bool], None] = lambda _r, _alive: None
    on_start: Callable[[str], None] = lambda _sweep_id: None
    """The sweep's record exists (new or reopened): its id can be printed, and a signal stops its runs."""
    on_cost: Callable[[LaunchCost], None] = lambda _c: None
    """The plan's cost, before anything is launched or stored; raising (CostRefused) cancels the sweep."""
    on_grow: Callable[[list[Cell], str], None] = lambda _cells, _why: None
    """The plan grew (localisation picked cells, or a fuller resume added the rest)."""
    on_host: Announce = lambda _host, _line: None
    """A host went down or came back, or left the pool: one line, said once (not per cell)."""
    on_signal: Callable[[str], None] = lambda _text: None
    """SIGINT/SIGTERM arrived: what the sweep does about it, one line."""


@dataclass
class SweepOptions:
    """Choices of one `orchestrator sweep` invocation."""

    packed: bool = True
    settings: RunSettings = field(default_factory=RunSettings)
    retries: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Retries by failure class; `retries` is the default of a class it leaves open (retries.py)."""
    on_infra: OnInfra = "continue"
    """After an infra verdict (host or orchestrator failed): go on, or stop and skip the cells left."""
    strategy: Strategy | None = None
    """`full`: every cell; `pairwise`: a strength-2 covering subset of the valid cells (the rest not run);
    `adaptive`: that subset, then the cells that localise each failure. None: by the matrix's size when
    starting, the sweep's own when resuming."""
    budget: int | None = None
    """Adaptive: the most cells launched in all, per lane (None: strategy.default_budget)."""
    retry_known_bad: bool = False
    """Launch cells that past sweeps proved bad on this host, version and GPU (else they are skipped)."""
    wait_for_host_s: float = 0.0
    """How long to wait for a host that went down before its remaining cells are infra (0: not at all)."""
    max_queued: int | None = None
    """On a Slurm host: jobs submitted ahead at most (None: every cell at once; Slurm queues them)."""


@dataclass
class SweepOutcome:
    """How a sweep ended: its id, and the hosts whose servers could not be stopped or checked (down)."""

    sweep_id: str
    unchecked: dict[str, str] = field(default_factory=dict)
    """Host -> why its leftover servers could not be stopped or its GPUs checked (`--resume` does it)."""
    saved_launches: int = 0
    """Launches `retries:` alone would have spent on failures a relaunch cannot change (retry policy)."""


def sweep_settings(matrix: Matrix, host: HostConfig, options: SweepOptions, scenario: str | None) -> dict[str, Any]:
    """What a sweep stores to be resumed with the same behaviour."""
    return {
        "deadlines": options.settings.deadlines.to_dict(),
        "probes": options.settings.probes.to_dict(),
        "retries": options.retries,
        "retry": options.retry.to_dict(),
        "stall": options.settings.stall.to_dict(),
        "packed": options.packed,
        "on_infra": options.on_infra,
        "host": host.to_dict(),
        "scenario": scenario,
        "strategy": options.strategy,
        "retry_known_bad": options.retry_known_bad,
    }


def check_launch_secrets(
    hosts: Sequence[HostConfig], matrix: Matrix | None, cells: Sequence[Cell], environ: Mapping[str, str]
) -> None:
    """ConfigErrors naming every secret a launch of these cells would need and `environ` lacks.

    Asked before any host is touched, by a new sweep and a resume alike: a resume that re-attached
    without its API key would probe its servers unauthenticated and store their 401s as verdicts.
    """
    problems: list[ConfigError] = []
    for host in hosts:
        for install in sorted({c.install for c in cells}, key=lambda i: i or ""):
            try:
                launch_env(host, matrix, install, environ=environ)
            except ConfigErrors as exc:
                problems += [e for e in exc.errors if str(e) not in map(str, problems)]
    try:
        check_flag_secrets(cells, environ)
    except ConfigErrors as exc:
        problems += exc.errors
    if problems:
        raise ConfigErrors(problems)
