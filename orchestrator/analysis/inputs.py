"""What `compare` and `explain` read: one sweep's verdicts, flattened per cell.

The store adapts its records into these; the analysis never touches the store, so it can be
tested on hand-built views and reused on any source of verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.matrix.flags import canonical_name, canonicalize
from orchestrator.model import Category, FlagValue, Phase, Status

FAILED: frozenset[Status] = frozenset({Status.FAIL, Status.INVALID})
"""Statuses that count as SGLang failing; infra and skipped say nothing about SGLang."""


@dataclass(frozen=True)
class CellOutcome:
    """The final verdict of one cell of a sweep plus the evidence the analysis weighs."""

    cell_id: str
    flags: dict[str, FlagValue]
    """Canonical flag names without dashes (`attention-backend`); False/None mean omitted."""
    axes: tuple[str, ...]
    install: str | None
    status: Status
    phase: Phase | None
    category: Category
    root_cause_line: str | None
    ready_s: float | None
    warnings: tuple[str, ...]
    """Distinct normalised warning texts seen in the cell's log."""
    attempts: int
    passes: int
    host: str | None = None
    """The host of the verdict shown (a pool's host axis lane, or the host its run ran on)."""
    lane: str | None = None
    """The cell's own host when the host is an axis of its sweep (hosts that differ); part of what it is."""
    passes_on: tuple[str, ...] = ()
    fails_on: tuple[str, ...] = ()
    """Set when the outcome depends on the host: it passed on these hosts and failed on those, every time."""
    drift: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Flags the server ran otherwise than asked: canonical name -> (asked, used). `flags` hold what ran."""

    @property
    def flaky(self) -> bool:
        """Passed some attempts and failed others on the same host: neither a clean pass nor a clean failure."""
        return self.attempts > self.passes > 0 and not self.passes_on

    @property
    def canonical_flags(self) -> dict[str, FlagValue]:
        """Flags under canonical names and values, omitted flags dropped."""
        return {k: v for k, v in canonicalize(self.flags).items() if v is not None and v is not False}

    @property
    def ran_flags(self) -> dict[str, FlagValue]:
        """Canonical flags as the server ran them: a flag it changed at start takes the value it ran with."""
        flags = self.canonical_flags
        for name, (_asked, used) in self.drift.items():
            flags[name] = used
        return flags

    @property
    def label(self) -> str:
        """A human signature built from the axes: `install=x, attention-backend=triton`."""
        flags = self.canonical_flags
        parts = [f"{name}={flags.get(name)}" for name in map(canonical_name, self.axes)]
        if self.install:
            parts.insert(0, f"install={self.install}")
        if self.lane:
            parts.insert(0, f"host={self.lane}")
        return ", ".join(parts) or self.cell_id


@dataclass(frozen=True)
class SweepView:
    """One sweep (or one install's share of it) as the analysis sees it."""

    sweep_id: str
    host: str
    sglang_version: str | None
    packages: dict[str, str]
    host_facts: dict[str, str]
    cells: tuple[CellOutcome, ...]
    strategy: str = "full"
    """How the sweep chose its cells: `full`, `pairwise` or `adaptive`."""
    plan_stop: str | None = None
    """Adaptive: why localisation stopped (`explained`, `budget`, `stuck`, `stopped`); None if it never ended."""

    @property
    def installs(self) -> tuple[str | None, ...]:
        """The distinct installs of this view's cells, in first-seen order."""
        return tuple(dict.fromkeys(cell.install for cell in self.cells))
