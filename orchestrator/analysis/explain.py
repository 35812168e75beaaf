"""What separates failing cells from passing ones, per failure category.

Each group is the cells that failed with one category (all `invalid` cells form the group
`invalid_argument`). A group is set against the cells that passed cleanly; cells failing for
other reasons sit on neither side, because a crash at memory allocation says nothing about a
sampler that never ran. Flaky cells (some attempts passed) are neither a clean pass nor a clean
failure: they are left out of both sides and listed apart. Infra and skipped cells never tested
SGLang and are left out entirely.

Findings are ranked by group (the largest failing group first), then by score within a group;
see `predicates` for the score. A group with one failing cell, no passing cell to compare with,
or no predicate that separates it gets a note saying so instead of a finding that overclaims.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.analysis.inputs import CellOutcome, SweepView
from orchestrator.analysis.localised import Localisation, localisation
from orchestrator.analysis.predicates import (
    Predicate,
    Row,
    Scored,
    flag_text,
    rank,
    same_cells_flags,
    score,
    shown_value,
)
from orchestrator.analysis.speed import SpeedEffect, Speeds, speed_effects
from orchestrator.matrix.flags import canonical_name
from orchestrator.model import Category, FlagValue, Phase, Status
from orchestrator.planning.localise import cause_text

MIN_LISTED = 0.5
"""Below this separation a predicate is as much noise as signal, so it is not listed."""
CLEAR = 0.8
"""From this separation on, a finding counts as separating its group (near-perfect)."""
THIN = 3
"""Fewer failing or passing cells than this make any finding a lead rather than evidence."""
INSTALL = "install"
HOST = "host"
"""Pseudo-flag under which the install takes part when a matrix has environments as an axis."""


@dataclass(frozen=True)
class Finding:
    """One predicate that separates a failure group from the passing cells, with its counts."""

    category: str
    kind: str
    """`flag` (one flag in a value set), `flags` (two flag values together) or `warning`."""
    flags: dict[str, tuple[FlagValue, ...]]
    warning: str | None
    present: bool
    """For a warning finding: False when it is the warning's absence that failing cells share."""
    fail_with: int
    fail_total: int
    pass_with: int
    pass_total: int
    separation: float
    score: float
    confirmed: bool = False
    """Adaptive sweeps: the cells it ran separate this cause from every other candidate (localised.py)."""

    @property
    def text(self) -> str:
        """`fp8-gemm-backend in {auto, deep_gemm}` or `warning <text>`."""
        if self.warning is not None:
            return f"{'' if self.present else 'no '}warning {self.warning}"
        return " and ".join(flag_text(name, values) for name, values in self.flags.items())

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of one finding."""
        return {
            "category": self.category,
            "kind": self.kind,
            "flags": {name: list(values) for name, values in self.flags.items()},
            "warning": self.warning,
            "present": self.present,
            "fail_with": self.fail_with,
            "fail_total": self.fail_total,
            "pass_with": self.pass_with,
            "pass_total": self.pass_total,
            "separation": round(self.separation, 4),
            "score": self.score,
            "confirmed": self.confirmed,
        }


@dataclass(frozen=True)
class GroupReport:
    """One failure category: its cells, its findings best first, and what to make of them."""

    category: str
    failing: tuple[str, ...]
    pass_total: int
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]
    candidates_left: tuple[str, ...] = ()
    """Adaptive sweeps: the causes still in doubt when the sweep stopped."""

    @property
    def separated(self) -> bool:
        """Whether the best finding separates the group (near-)perfectly on enough cells."""
        return bool(self.findings) and self.findings[0].separation >= CLEAR

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "category": self.category,
            "fail_total": len(self.failing),
            "pass_total": self.pass_total,
            "separated": self.separated,
            "cells": list(self.failing),
            "notes": list(self.notes),
            "confirmed": [f.text for f in self.findings if f.confirmed],
            "candidates_left": list(self.candidates_left),
        }


@dataclass(frozen=True)
class Explanation:
    """The explanation of one sweep: failure groups largest first, and the flaky cells apart."""

    sweep_id: str
    groups: tuple[GroupReport, ...]
    flaky: tuple[CellOutcome, ...]
    pass_total: int
    excluded: int
    """Infra and skipped cells, which never tested SGLang."""
    speed_effects: tuple[SpeedEffect, ...] = ()
    """Flag values that move the passing cells' throughput beyond the noise (analysis/speed.py)."""
    speed_measured: int = 0
    """Passing cells with a valid speed that `speed_effects` weighed."""

    @property
    def findings(self) -> tuple[Finding, ...]:
        """All findings: by group (largest first), then by score."""
        return tuple(f for group in self.groups for f in group.findings)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `orchestrator explain --format json`."""
        return {
            "sweep_id": self.sweep_id,
            "findings": [f.to_dict() for f in self.findings],
            "categories": [g.to_dict() for g in self.groups],
            "flaky": [
                {"cell_id": c.cell_id, "label": c.label, "attempts": c.attempts, "passes": c.passes} for c in self.flaky
            ],
            "pass_total": self.pass_total,
            "excluded": self.excluded,
            "speed_effects": [e.to_dict() for e in self.speed_effects],
            "speed_measured": self.speed_measured,
        }


def explain(view: SweepView, *, max_findings: int = 5, speeds: Speeds | None = None) -> Explanation:
    """Find, for each failure category, the flag values and warnings that separate it from passing cells.

    `speeds`: the measured passing cells; then also which flag values move throughput beyond the noise.
    """
    tested = [c for c in view.cells if c.status in (Status.PASS, Status.FAIL, Status.INVALID)]
    flaky = tuple(c for c in tested if c.flaky)
    clean = [c for c in tested if not c.flaky]
    # On a pool of hosts the host is a dimension like a flag; the install a dimension when there are several.
    with_install = (len(view.installs) > 1, len({c.host for c in view.cells}) > 1)
    passes = [_row(c, with_install) for c in clean if c.status is Status.PASS]
    # A cell that fails on one host and passes on another counts on both sides, each with its host.
    passes += [_row(c, with_install, host) for c in clean if c.status is Status.FAIL for host in c.passes_on]
    groups: dict[str, list[CellOutcome]] = defaultdict(list)
    for cell in clean:
        if cell.status is not Status.PASS:
            groups[group_of(cell)].append(cell)
    reports = [_report(name, cells, passes, flaky, with_install, max_findings) for name, cells in groups.items()]
    if view.strategy == "adaptive":
        found = localisation(view, group_of, view.plan_stop)
        reports = [_localised(r, groups[r.category], passes, with_install, found, view.sweep_id) for r in reports]
    reports.sort(key=lambda g: (-len(g.failing), g.category))
    effects = speed_effects(view, speeds) if speeds else ()
    excluded = len(view.cells) - len(tested)
    return Explanation(view.sweep_id, tuple(reports), flaky, len(passes), excluded, effects, len(speeds or {}))


def group_of(cell: CellOutcome) -> str:
    """The failure group of a failed or invalid cell: its category, or invalid_argument if invalid."""
    return Category.INVALID_ARGUMENT.value if cell.status is Status.INVALID else cell.category.value


def _row(cell: CellOutcome, dimensions: tuple[bool, bool], host: str | None = None) -> Row:
    # Weighed by what ran: a failure is never put down to a flag value the server replaced at start.
    values: dict[str, FlagValue] = dict(cell.ran_flags)
    if dimensions[0]:
        values[INSTALL] = cell.install
    label = cell.label
    if dimensions[1]:
        shown = host or (cell.fails_on[0] if cell.fails_on else cell.host)
        values[HOST] = shown
        if cell.passes_on:
            label = f"{HOST}={shown}, {label}"
    return Row(cell.cell_id, label, values, frozenset(cell.warnings))


def _report(
    category: str,
    cells: list[CellOutcome],
    passes: list[Row],
    flaky: Sequence[CellOutcome],
    with_install: tuple[bool, bool],
    max_findings: int,
) -> GroupReport:
    fails = [_row(c, with_install) for c in cells]
    # A launch that died during startup never reached the code that prints later warnings, so
    # their absence is the failure's consequence, not its cause.
    absence = all(c.phase is not None and c.phase.order >= Phase.READY.order for c in cells)
    axes = [*dict.fromkeys(canonical_name(a) for c in cells for a in c.axes), INSTALL, HOST]
    ranked = rank(fails, passes, absence=absence, prefer=axes)
    ranked = [s for s in ranked if s.separation >= MIN_LISTED][:max_findings]
    notes = _notes(category, fails, passes, ranked)
    if ranked:
        notes += _set_together(ranked[0], fails, passes)
    if ranked and ranked[0].fail_with < len(fails):
        notes += _second_cause(ranked[0], fails, passes, absence, axes)
    flaky_here = [c for c in flaky if c.status is not Status.PASS and group_of(c) == category]
    if flaky_here:
        notes.append(
            f"{len(flaky_here)} flaky cell(s) of this category (failed some attempts, passed others) are left "
            f"out of both sides: {', '.join(c.label for c in flaky_here)}"
        )
    drifted = [c for c in cells if c.drift]
    if drifted:
        changed = "; ".join(
            f"{c.label}: " + ", ".join(f"--{f} asked {a}, ran {u}" for f, (a, u) in c.drift.items()) for c in drifted
        )
        notes.append(
            f"{len(drifted)} failing cell(s) ran with flags the server changed at start (drift), and are weighed by "
            f"what ran, not what was asked: {changed}"
        )
    findings = tuple(_finding(category, s) for s in ranked)
    return GroupReport(category, tuple(c.cell_id for c in cells), len(passes), findings, tuple(notes))


def _notes(category: str, fails: list[Row], passes: list[Row], ranked: list[Scored]) -> list[str]:
    n, p = len(fails), len(passes)
    if not passes:
        return [f"no cell passed, so there is nothing to set these {n} failing cell(s) against"]
    if n == 1:
        only = fails[0]
        return [
            f"only one cell failed with {category} ({only.label}): one cell cannot tell a cause from a coincidence",
            _nearest_pass(only, passes),
        ]
    if not ranked:
        return [
            f"nothing separates these {n} failing cells from the {p} passing cells: no flag value, pair of "
            "values or warning holds in most of the failing cells and few of the passing ones"
        ]
    notes: list[str] = []
    best = ranked[0]
    if best.separation < CLEAR:
        notes.append(
            f"no clear separation: the best, {best.predicate.text}, holds in {best.fail_with} of {n} failing and "
            f"{best.pass_with} of {p} passing cells"
        )
    twins = [str(i) for i, s in enumerate(ranked[1:], 2) if _same_cells(s, best, fails, passes)]
    if twins:
        numbers = ", ".join(["1", *twins[:-1]]) + f" and {twins[-1]}"
        notes.append(f"findings {numbers} hold in exactly the same cells: this matrix cannot tell them apart")
    if n < THIN or p < THIN:
        notes.append(f"thin evidence: {n} failing and {p} passing cells; read the findings as leads")
    return notes


def _set_together(best: Scored, fails: list[Row], passes: list[Row]) -> list[str]:
    twins = same_cells_flags(best, fails, passes)
    if not twins:
        return []
    others = " and ".join(p.text for p in twins)
    return [
        f"{best.predicate.text} and {others} hold in exactly the same cells: the matrix sets them together (one "
        "bundle, or an include), so the cause may be any of them; vary them apart to tell"
    ]


def _second_cause(best: Scored, fails: list[Row], passes: list[Row], absence: bool, axes: list[str]) -> list[str]:
    """Two causes can share a category: look for what separates the failing cells the best finding misses."""
    rest = [r for r in fails if not best.predicate.holds(r)]
    found = [s for s in rank(rest, passes, absence=absence, prefer=axes) if s.separation >= CLEAR]
    if not found:
        return []
    second = found[0]
    return [
        f"a second cause? {second.predicate.text} holds in {second.fail_with} of the {len(rest)} failing cells "
        f"finding 1 does not cover, and in {second.pass_with} of {len(passes)} passing cells"
    ]


def _same_cells(a: Scored, b: Scored, fails: list[Row], passes: list[Row]) -> bool:
    return all(a.predicate.holds(r) == b.predicate.holds(r) for r in [*fails, *passes])


def _nearest_pass(failing: Row, passes: list[Row]) -> str:
    """How the failing cell differs from the passing cell most like it: flags first, then warnings."""

    def diff(p: Row) -> list[str]:
        names = sorted(set(failing.values) | set(p.values))
        return [n for n in names if failing.values.get(n) != p.values.get(n)]

    nearest = min(passes, key=lambda p: (len(diff(p)), p.cell_id))
    flags = ", ".join(
        f"{n}={shown_value(failing.values.get(n))} (passing: {shown_value(nearest.values.get(n))})"
        for n in diff(nearest)
    )
    text = f"it differs from the nearest passing cell ({nearest.label}) in: {flags or 'no flag'}"
    extra = sorted(failing.warnings - nearest.warnings)
    if extra:
        text += f"; warnings only in the failing cell: {'; '.join(extra)}"
    return text


def _finding(category: str, scored: Scored) -> Finding:
    predicate = scored.predicate
    return Finding(
        category=category,
        kind=predicate.kind,
        flags={name: tuple(sorted(values, key=str)) for name, values in predicate.flags},
        warning=predicate.warning,
        present=predicate.present,
        fail_with=scored.fail_with,
        fail_total=scored.fail_total,
        pass_with=scored.pass_with,
        pass_total=scored.pass_total,
        separation=scored.separation,
        score=scored.score,
    )


def _localised(
    report: GroupReport,
    cells: list[CellOutcome],
    passes: list[Row],
    with_install: tuple[bool, bool],
    found: Localisation,
    sweep_id: str,
) -> GroupReport:
    """An adaptive sweep's group: confirmed causes first and marked, the candidates left named."""
    causes, left = found.confirmed_flags(report.category), found.remaining.get(report.category, [])
    if not causes and not left:
        return report
    fails = [_row(c, with_install) for c in cells]
    lead: list[Finding] = []
    for wanted in causes:
        match = next((f for f in report.findings if f.warning is None and f.flags == wanted), None)
        if match is None:
            kind = "flag" if len(wanted) == 1 else "flags"
            predicate = Predicate(kind, tuple((name, frozenset(values)) for name, values in wanted.items()))
            match = _finding(report.category, score(predicate, fails, passes))
        lead.append(replace(match, confirmed=True))
    shown = {f.text for f in lead}
    findings = (*lead, *(f for f in report.findings if f.text not in shown))
    notes = [n for n in report.notes if "flaky" in n] if lead else list(report.notes)
    for f in lead:
        notes.insert(0, (
            f"confirmed: {f.text} is the only explanation left ({f.fail_with} failing cell(s) hold it): in a "
            "failing cell, every other value and value pair it holds also occurs in a passing cell"
        ))  # fmt: skip
    texts = tuple(cause_text(c) for c in left)
    if texts:
        notes.append(
            f"not confirmed ({found.why_left()}): {len(texts)} candidate(s) left: {'; '.join(texts[:5])}"
            + ("; ..." if len(texts) > 5 else "")
            + f". `orchestrator sweep MATRIX --strategy full --resume {sweep_id}` runs the rest of the matrix"
        )
    return replace(report, findings=findings, notes=tuple(notes), candidates_left=texts)
