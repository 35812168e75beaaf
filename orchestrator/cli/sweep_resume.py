"""What `orchestrator sweep` says about finishing a sweep: the exact resume command, whose servers hold the GPUs,
and what a resumed sweep already did."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from pathlib import Path

from orchestrator.config.model import Matrix
from orchestrator.errors import ConfigError, StoreError
from orchestrator.matrix.expand import expand
from orchestrator.model import Status, Verdict
from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store


def foreign_matrix(store: Store, ref: str, matrix: Matrix) -> ConfigError | None:
    """The error for resuming a sweep with a matrix it was not run from: another name and other axes.

    The engine resumes with whatever file it is given (an edited file only changes deadlines, probes and the
    like); a different matrix would show the old sweep's cells as the answer to the new file. An edited or
    renamed file keeps its name or its axes, and may resume.
    """
    record = store.resolve_sweep(ref)
    stored = store.get_cells(record.sweep_id)
    if matrix.name == record.name or not stored:
        return None
    axes = {a for cell in stored for a in cell.axes} - {"host"}
    given = {a for cell in expand(matrix) for a in cell.axes} - {"host"}
    if given == axes:
        return None
    path = record.matrix_path or "MATRIX"
    return ConfigError(
        f"sweep {record.sweep_id} is of matrix {record.name!r} ({path}), axes {', '.join(sorted(axes)) or 'none'}; "
        f"this file is matrix {matrix.name!r}, axes {', '.join(sorted(given)) or 'none'}",
        file=matrix.path,
        fix=f"resume it with its own matrix: `orchestrator sweep {path} --resume {record.sweep_id}`, or start "
        "this one without --resume (`orchestrator sweeps` lists the store's sweeps)",
    )


def finished_verdicts(store: Store, sweep_id: str) -> dict[str, list[Verdict]]:
    """Cell id -> the verdicts of its attempts that reached one, in order (for a resumed sweep's counts)."""
    verdicts: dict[str, list[Verdict]] = {}
    for run in sorted(store.runs(sweep_id), key=lambda r: r.attempt):
        if run.state == "done" and run.verdict and run.verdict.status not in (Status.INVALID, Status.SKIPPED):
            verdicts.setdefault(run.cell_id, []).append(run.verdict)
    return verdicts


def earlier_sweeps(
    store: Store,
    run_ids: tuple[str, ...],
    resume: Callable[[str, Path | None], str],
    host_pgids: Mapping[str, int] | None = None,
) -> str:
    """Which sweep left the servers holding the GPUs, and the two ways to clear them.

    `host_pgids` (run id -> process group, as the host reports it) covers a run the store has no pgid for.
    """
    host_pgids = host_pgids or {}
    by_sweep: dict[str, list[RunRecord]] = {}
    unknown = []
    for run_id in run_ids:
        try:
            run = store.get_run(run_id)
        except StoreError:
            unknown.append(run_id)
            continue
        by_sweep.setdefault(run.sweep_id, []).append(run)
    parts = []
    for sweep_id, runs in by_sweep.items():
        record = store.get_sweep(sweep_id)
        pgids = sorted({p for r in runs for p in (r.pgid, host_pgids.get(r.run_id)) if p})
        kill = " ".join(f"-{p}" for p in pgids)
        parts.append(
            f"They are servers of sweep {sweep_id} ({record.status}; runs {', '.join(r.run_id for r in runs)}): "
            f"`{resume(sweep_id, Path(record.matrix_path) if record.matrix_path else None)}` follows them to their "
            "verdicts and finishes that sweep"
            + (f", or end them on the host with `kill -TERM -- {kill}`" if kill else "")
            + "."
        )
    if unknown:
        parts.append(
            f"Runs {', '.join(unknown)} are not in {store.path}: the store of the sweep that launched them "
            "(its --db) names that sweep."
        )
    return " ".join(parts)


def resume_command(
    matrix_path: Path,
    sweep_id: str,
    *,
    matrix: Path | None = None,
    host: str | list[str] | None,
    scenario: Path | None,
    db: Path | None,
    hosts_file: Path | None,
    serial: bool,
) -> str:
    """The exact command that finishes a sweep: the same matrix (or `matrix`), hosts, store and inventory."""
    words = ["orchestrator", "sweep", str(matrix or matrix_path), "--resume", sweep_id]
    for name in [host] if isinstance(host, str) else host or []:
        words += ["--host", name]
    for option, value in (("--scenario", scenario), ("--db", db), ("--hosts", hosts_file)):
        if value is not None:
            words += [option, str(value)]
    if serial:
        words.append("--serial")
    return shlex.join(words)
