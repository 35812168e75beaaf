"""Store records -> the analysis's view of a sweep (pure: records in, SweepView out)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.analysis.inputs import CellOutcome, SweepView
from orchestrator.matrix.flags import canonical_name
from orchestrator.model import Category, Status
from orchestrator.store.records import SweepRecord
from orchestrator.store.results import CellResult


def _warnings(result: CellResult) -> tuple[str, ...]:
    """Distinct warning texts of the cell's finished runs (the latest failing run's first)."""
    seen: dict[str, None] = {}
    for run in reversed(result.runs):
        evidence: dict[str, Any] = run.evidence or {}
        for warning in evidence.get("warnings", []):
            text = warning.get("text") if isinstance(warning, dict) else str(warning)
            if text:
                seen.setdefault(text, None)
    return tuple(seen)


def cell_outcome(result: CellResult) -> CellOutcome:
    """One cell's final verdict as the analysis reads it."""
    finished = [r for r in result.runs if r.state == "done"]
    return CellOutcome(
        cell_id=result.cell.cell_id,
        flags=dict(result.cell.flags),
        axes=result.cell.axes,
        install=result.cell.install,
        status=result.status or Status.SKIPPED,
        phase=result.phase,
        category=result.category or Category.UNKNOWN,
        root_cause_line=result.root_cause_line,
        ready_s=result.ready_s,
        warnings=_warnings(result),
        attempts=len(finished),
        passes=result.passes,
        host=result.cell.host or result.host,
        lane=result.cell.host,
        passes_on=result.passes_on,
        fails_on=result.fails_on,
        drift={
            canonical_name(flag): (str(seen.get("asked", "")), str(seen.get("used", "")))
            for flag, seen in result.drift.items()
        },
    )


def sweep_view(record: SweepRecord, results: Sequence[CellResult]) -> SweepView:
    """A stored sweep as the analysis reads it."""
    versions = {str(k): str(v) for k, v in (record.versions or {}).items() if v is not None}
    sglang = versions.pop("sglang", None)
    return SweepView(
        sweep_id=record.sweep_id,
        host=record.host,
        sglang_version=sglang,
        packages=versions,
        host_facts={str(k): str(v) for k, v in (record.host_facts or {}).items()},
        cells=tuple(cell_outcome(r) for r in results),
        strategy=str(record.settings.get("strategy") or "full"),
        plan_stop=(record.settings.get("adaptive") or {}).get("stop"),
    )
