"""Compare two sweeps cell by cell: regressions, fixes, changed failures, timing and environment.

Cells are matched on their canonical flags, never on cell ids alone: SGLang renamed flags between
releases (`--nsa-decode-backend` became `--dsa-decode-backend`), and a matrix written for each
release must still line up. Statuses `infra` and `skipped` say nothing about SGLang, so a cell
that is one of them on either side is reported as unverified rather than as a regression or fix.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.analysis.environment import EnvPairs, env_diff, env_not_recorded, not_recorded_notes
from orchestrator.analysis.inputs import FAILED, CellOutcome, SweepView
from orchestrator.analysis.speed import SpeedChange, Speeds, speed_changes
from orchestrator.matrix.flags import canonical_name, canonical_words
from orchestrator.model import FlagValue, Status

MIN_ABS_READY_S = 2.0
"""Health is polled about once a second, so each ready time can be off by ~1 s; below 2 s is noise."""

_LOG_PREFIX = re.compile(r"^\s*\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\]\s*")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_HEX_ID = re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b")
_DIGITS = re.compile(r"\d+")


def message_of(line: str) -> str:
    """A log line without SGLang's `[YYYY-MM-DD HH:MM:SS TPn]` prefix."""
    return _LOG_PREFIX.sub("", line)


def failure_signature(line: str | None) -> str | None:
    """A root-cause line with timestamps, addresses, ids and numbers masked, for comparing failures."""
    if line is None:
        return None
    # Renamed names (nsa -> dsa) in their new spelling: a rename alone is not a changed failure.
    text = canonical_words(message_of(line))
    text = _TIMESTAMP.sub("<time>", text)
    text = _ADDRESS.sub("<addr>", text)
    # Long runs of hex letters and digits are uuids, hashes or tmp-dir suffixes, never the message itself.
    text = _HEX_ID.sub("<id>", text)
    text = _DIGITS.sub("<n>", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class CellChange:
    """One matched (or unmatched) cell and its outcome on each side."""

    cell_id: str
    flags: dict[str, FlagValue]
    label: str
    before: CellOutcome | None
    after: CellOutcome | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: cell_id, flags, before/after with status and category (null when absent)."""
        return {
            "cell_id": self.cell_id,
            "flags": self.flags,
            "label": self.label,
            "before": _side(self.before),
            "after": _side(self.after),
        }


@dataclass(frozen=True)
class ReadyChange:
    """A cell whose time to ready moved beyond the thresholds."""

    cell_id: str
    label: str
    before_s: float
    after_s: float

    @property
    def delta_s(self) -> float:
        """After minus before, in seconds."""
        return self.after_s - self.before_s

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "cell_id": self.cell_id,
            "label": self.label,
            "before_s": self.before_s,
            "after_s": self.after_s,
            "delta_s": round(self.delta_s, 3),
        }


@dataclass(frozen=True)
class Comparison:
    """Everything that differs between sweep A (before) and sweep B (after)."""

    before_id: str
    after_id: str
    regressions: tuple[CellChange, ...]
    fixes: tuple[CellChange, ...]
    changed: tuple[CellChange, ...]
    added: tuple[CellChange, ...]
    removed: tuple[CellChange, ...]
    unverified: tuple[CellChange, ...]
    """Status differs but one side is infra or skipped, so SGLang was not tested there."""
    ready_changes: tuple[ReadyChange, ...]
    env_diff: EnvPairs
    matched: int
    notes: tuple[str, ...] = ()
    speed_regressions: tuple[SpeedChange, ...] = ()
    """Cells passing on both sides whose output tokens/s dropped beyond both sweeps' noise bands."""
    speed_improvements: tuple[SpeedChange, ...] = ()
    drift_changes: tuple[dict[str, Any], ...] = ()
    """Cells whose server changed a flag at start on one side and not (or otherwise) on the other."""
    env_not_recorded: EnvPairs = field(default_factory=dict)
    """An install's build or commit one sweep did not record (it predates them): not a change, and not known same."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `orchestrator compare --format json`."""
        return {
            "before": self.before_id,
            "after": self.after_id,
            "matched": self.matched,
            "regressions": [c.to_dict() for c in self.regressions],
            "fixes": [c.to_dict() for c in self.fixes],
            "changed": [c.to_dict() for c in self.changed],
            "added": [c.to_dict() for c in self.added],
            "removed": [c.to_dict() for c in self.removed],
            "unverified": [c.to_dict() for c in self.unverified],
            "ready_changes": [r.to_dict() for r in self.ready_changes],
            "env_diff": {name: list(pair) for name, pair in self.env_diff.items()},
            "notes": list(self.notes),
            "speed_regressions": [s.to_dict() for s in self.speed_regressions],
            "speed_improvements": [s.to_dict() for s in self.speed_improvements],
            "drift_changes": list(self.drift_changes),
            "env_not_recorded": {name: list(pair) for name, pair in self.env_not_recorded.items()},
        }


def compare(
    a: SweepView,
    b: SweepView,
    *,
    ready_threshold: float = 0.25,
    min_abs_s: float = MIN_ABS_READY_S,
    ignore: Iterable[str] = (),
    match_install: bool | None = None,
    speeds: tuple[Speeds, Speeds] | None = None,
) -> Comparison:
    """Match A's cells to B's by canonical flags and report what changed from A to B.

    `ignore` names flags left out of the match. `match_install=None` matches on the install only
    when either side has several installs (environments as an axis); pass False to compare two
    installs' views of one sweep, which differ by install alone. `speeds`: each side's measured
    passing cells (analysis/speed.py), for the speed regressions and improvements.
    """
    ignored = frozenset(canonical_name(name) for name in ignore)
    if match_install is None:
        match_install = len(a.installs) > 1 or len(b.installs) > 1
    # Hosts as an axis on both sides: a cell on host x is matched to the same cell on host x.
    with_lane = any(c.lane for c in a.cells) and any(c.lane for c in b.cells)
    pairs, only_a, only_b = _match(a.cells, b.cells, ignored, (match_install, with_lane))
    buckets: dict[str, list[CellChange]] = defaultdict(list)
    ready: list[ReadyChange] = []
    unrecorded = env_not_recorded(a, b)
    slower, faster = speed_changes(pairs, *speeds) if speeds else ((), ())
    for before, after in pairs:
        kind = _classify(before, after)
        if kind:
            buckets[kind].append(_change(after, before, after))
        if before.ready_s is not None and after.ready_s is not None:
            delta = abs(after.ready_s - before.ready_s)
            if delta >= min_abs_s and delta >= ready_threshold * before.ready_s:
                ready.append(ReadyChange(after.cell_id, after.label, before.ready_s, after.ready_s))
    return Comparison(
        before_id=a.sweep_id,
        after_id=b.sweep_id,
        regressions=tuple(buckets["regression"]),
        fixes=tuple(buckets["fix"]),
        changed=tuple(buckets["changed"]),
        added=tuple(_change(cell, None, cell) for cell in only_b),
        removed=tuple(_change(cell, cell, None) for cell in only_a),
        unverified=tuple(buckets["unverified"]),
        ready_changes=tuple(ready),
        speed_regressions=slower,
        speed_improvements=faster,
        env_diff=env_diff(a, b),
        env_not_recorded=unrecorded,
        matched=len(pairs),
        notes=(
            *_unmatched_hint(a, b, only_a, only_b),
            *_drift_notes(pairs, a.sweep_id, b.sweep_id),
            *not_recorded_notes(unrecorded, a.sweep_id, b.sweep_id),
        ),
        drift_changes=tuple(
            {"cell_id": after.cell_id, "label": after.label, "before": _drift_dict(before), "after": _drift_dict(after)}
            for before, after in pairs
            if before.drift != after.drift
        ),
    )


def _drift_dict(cell: CellOutcome) -> dict[str, dict[str, str]]:
    return {flag: {"asked": asked, "used": used} for flag, (asked, used) in cell.drift.items()}


def _drift_notes(pairs: Iterable[tuple[CellOutcome, CellOutcome]], a: str, b: str) -> list[str]:
    """A flag the server changed on one side only: the two verdicts are not of the same configuration."""
    notes = []
    for before, after in pairs:
        for flag in sorted(set(before.drift) | set(after.drift)):
            was, now = before.drift.get(flag), after.drift.get(flag)
            if was == now:
                continue
            notes.append(f"drift: {after.label}: --{flag} {_ran(was, a)}, {_ran(now, b)}")
    return notes


def _ran(seen: tuple[str, str] | None, sweep: str) -> str:
    return f"ran {seen[1]} (asked {seen[0]}) in {sweep}" if seen else f"ran as asked in {sweep}"


def compare_installs(
    view: SweepView,
    before: str | None,
    after: str | None,
    *,
    ready_threshold: float = 0.25,
    min_abs_s: float = MIN_ABS_READY_S,
    ignore: Iterable[str] = (),
    speeds: Speeds | None = None,
) -> Comparison:
    """Compare two installs of one sweep (environments as an axis), matching cells on flags alone."""
    parts = split_by_install(view)
    missing = [name for name in (before, after) if name not in parts]
    if missing:
        known = ", ".join(str(name) for name in parts)
        raise ValueError(f"sweep {view.sweep_id} has no install {', '.join(map(str, missing))} (it has: {known})")
    return compare(
        parts[before],
        parts[after],
        ready_threshold=ready_threshold,
        min_abs_s=min_abs_s,
        ignore=ignore,
        match_install=False,
        speeds=(speeds, speeds) if speeds is not None else None,
    )


def split_by_install(view: SweepView) -> dict[str | None, SweepView]:
    """One view per install of a sweep whose matrix has environments as an axis.

    Each part gets its install's own versions: preflight records them as `name[install]`
    (`sglang[after]`, `torch[after]`); unsuffixed packages and the host facts are shared.
    """
    parts: dict[str | None, list[CellOutcome]] = defaultdict(list)
    for cell in view.cells:
        parts[cell.install].append(cell)
    return {
        install: replace(
            view,
            sweep_id=f"{view.sweep_id}[{install}]" if install else view.sweep_id,
            cells=tuple(cells),
            **_install_versions(view, install),
        )
        for install, cells in parts.items()
    }


_PER_INSTALL = re.compile(r"^(?P<name>.+)\[(?P<install>[^\]]+)\]$")


def _install_versions(view: SweepView, install: str | None) -> dict[str, Any]:
    """`sglang_version` and `packages` of one install, from the `name[install]` keys of the sweep's versions."""
    shared: dict[str, str] = {}
    own: dict[str, str] = {}
    for key, version in view.packages.items():
        match = _PER_INSTALL.match(key)
        if match is None:
            shared[key] = version
        elif match["install"] == install:
            own[match["name"]] = version
    sglang = own.pop("sglang", view.sglang_version)
    return {"sglang_version": sglang, "packages": {**shared, **own}}


def _match_key(cell: CellOutcome, ignored: frozenset[str], dimensions: tuple[bool, bool]) -> tuple[Any, ...]:
    # Numbers may come back from the store as strings; "8" and 8 are the same launch.
    flags = tuple(
        sorted(
            (name, value if value is True else str(value))
            for name, value in cell.canonical_flags.items()
            if name not in ignored
        )
    )
    with_install, with_lane = dimensions
    return (cell.install if with_install else None, cell.lane if with_lane else None, flags)


def _match(
    a: tuple[CellOutcome, ...], b: tuple[CellOutcome, ...], ignored: frozenset[str], with_install: tuple[bool, bool]
) -> tuple[list[tuple[CellOutcome, CellOutcome]], list[CellOutcome], list[CellOutcome]]:
    pending: dict[tuple[Any, ...], list[CellOutcome]] = defaultdict(list)
    for cell in a:
        pending[_match_key(cell, ignored, with_install)].append(cell)
    pairs: list[tuple[CellOutcome, CellOutcome]] = []
    only_b: list[CellOutcome] = []
    for cell in b:
        candidates = pending.get(_match_key(cell, ignored, with_install))
        if candidates:
            pairs.append((candidates.pop(0), cell))
        else:
            only_b.append(cell)
    only_a = [cell for cells in pending.values() for cell in cells]
    order = {id(cell): i for i, cell in enumerate(a)}
    return pairs, sorted(only_a, key=lambda cell: order[id(cell)]), only_b


def _classify(before: CellOutcome, after: CellOutcome) -> str | None:
    if before.status == after.status == Status.PASS:
        return None
    if before.status == Status.PASS and after.status in FAILED:
        return "regression"
    if before.status in FAILED and after.status == Status.PASS:
        return "fix"
    if before.status in FAILED and after.status in FAILED:
        lines = failure_signature(before.root_cause_line), failure_signature(after.root_cause_line)
        # A missing root-cause line is "unknown", not evidence of a different failure.
        line_changed = None not in lines and lines[0] != lines[1]
        same = before.status == after.status and before.category == after.category and not line_changed
        return None if same else "changed"
    return None if before.status == after.status else "unverified"


def _change(cell: CellOutcome, before: CellOutcome | None, after: CellOutcome | None) -> CellChange:
    return CellChange(cell.cell_id, cell.canonical_flags, cell.label, before, after)


def _side(cell: CellOutcome | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {
        "status": cell.status.value,
        "category": cell.category.value,
        "phase": cell.phase.value if cell.phase else None,
        "root_cause_line": cell.root_cause_line,
        "cell_id": cell.cell_id,
        "attempts": cell.attempts,
        "passes": cell.passes,
    }


def _unmatched_hint(
    a: SweepView, b: SweepView, only_a: list[CellOutcome], only_b: list[CellOutcome]
) -> tuple[str, ...]:
    """When both sides have unmatched cells, name the flags set in every cell that differ between sides."""
    if not only_a or not only_b:
        return ()
    common_a, common_b = _common_flags(a.cells), _common_flags(b.cells)
    differing = sorted(n for n in set(common_a) | set(common_b) if common_a.get(n) != common_b.get(n))
    if not differing:
        return ()
    return (
        f"{len(only_a)} cells of {a.sweep_id} and {len(only_b)} of {b.sweep_id} did not match; flags set alike "
        f"in every cell differ between the sweeps: {', '.join(differing)} (ignore them to match without them)",
    )


def _common_flags(cells: tuple[CellOutcome, ...]) -> dict[str, str]:
    if not cells:
        return {}
    first = {k: str(v) for k, v in cells[0].canonical_flags.items()}
    for cell in cells[1:]:
        flags = cell.canonical_flags
        first = {k: v for k, v in first.items() if k in flags and str(flags[k]) == v}
    return first
