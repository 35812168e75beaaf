"""What the store keeps: a sweep, the cells it was given, each run of a cell, and a cell's runs summed up.

Rows are plain dicts keyed by column name; dict-valued fields travel as JSON text. Every value is
scrubbed of secrets on its way into a row (store/secrets.py), and a cell keeps only the *names* of
its environment variables: the values a run used, masked, are on the run (`env_masked`).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from orchestrator.errors import StoreError
from orchestrator.model import Cell, ProbeOutcome, Verdict
from orchestrator.secret import MASK, parse_ref, scrub, scrub_text

SweepStatus = Literal["running", "done", "interrupted"]
RunState = Literal["pending", "launched", "done", "abandoned"]
SWEEP_STATUSES: tuple[SweepStatus, ...] = ("running", "done", "interrupted")
RUN_STATES: tuple[RunState, ...] = ("pending", "launched", "done", "abandoned")
UNFINISHED_STATES: tuple[RunState, ...] = ("pending", "launched")
_T = TypeVar("_T")


REPRO_OF = "repro_of"
"""The settings key of a sweep `orchestrator repro` made: the run it reproduces."""
COMMAND_LINE = "<command line>"
"""The matrix path of the one-cell sweep `orchestrator run` makes from its command line."""
SweepKind = Literal["sweep", "run", "repro"]


def sweep_kind(record: SweepRecord) -> SweepKind:
    """`repro` for `orchestrator repro`'s one-cell sweep, `run` for `orchestrator run`'s, else `sweep` (a matrix)."""
    if record.settings.get(REPRO_OF):
        return "repro"
    return "run" if record.matrix_path == COMMAND_LINE else "sweep"


def new_sweep_id(now: float | None = None) -> str:
    """A readable id that sorts by start time (UTC): `s-20261202-153012-ab12`."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"s-{stamp}-{secrets.token_hex(2)}"


def new_run_id() -> str:
    """A short unique run id: `r-` and 10 hex digits."""
    return f"r-{secrets.token_hex(5)}"


def _to_json(value: Any) -> str:
    return json.dumps(scrub(value), separators=(",", ":"))


class DamagedRecord(StoreError):
    """A stored value that no longer reads back (a store cut short by a full disk passes SQLite's own check).

    The store adds its path and the fix; `table` and `ids` (key column -> value) say which record it is.
    """

    def __init__(self, table: str, ids: Mapping[str, str], column: str, detail: str) -> None:
        named = " ".join(str(v) for v in ids.values())
        super().__init__(f"the {column} of {table} {named} is damaged ({detail})")
        self.table, self.ids, self.column = table, dict(ids), column

    def fix(self, path: object) -> str:
        """The whole message: the store, the record, and how to get past it (a copy, or sqlite3 dropping it)."""
        where = " AND ".join(f"{k} = '{v.replace(chr(39), chr(39) * 2)}'" for k, v in self.ids.items())
        tables = {"run": ("runs",), "cell": ("runs", "cells"), "sweep": ("runs", "cells", "sweeps")}[self.table]
        drop = "; ".join(f"DELETE FROM {t} WHERE {where}" for t in tables)
        then = {"run": "its cell then counts as not run", "cell": "that cell is then gone from its sweep"}
        return (
            f"{path}: {self} (the store was cut short or overwritten; fix: restore {path} from a copy, or drop "
            f'that record ({then.get(self.table, "that sweep is then gone")}): sqlite3 {path} "{drop}")'
        )


_KEYS = {"sweep": ("sweep_id",), "cell": ("sweep_id", "cell_id"), "run": ("run_id",)}
"""What names a record of each kind in the store."""


def _ids(table: str, row: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(row[k]) for k in _KEYS[table] if row.get(k) is not None}


def _from_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _column(row: Mapping[str, Any], column: str, table: str) -> Any:
    """One JSON column of a row, decoded; DamagedRecord naming it when it does not decode."""
    try:
        return _from_json(row[column])
    except (ValueError, TypeError) as exc:
        raise DamagedRecord(table, _ids(table, row), column, f"not JSON: {exc}") from exc


def _rebuilt(table: str, row: Mapping[str, Any], build: Callable[[], _T]) -> _T:
    """`build()`, its failure on a value of the wrong shape reported as the record it came from."""
    try:
        return build()
    except DamagedRecord:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DamagedRecord(table, _ids(table, row), "content", f"{type(exc).__name__}: {exc}") from exc


def _checked(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise StoreError(f"unexpected {what} {value!r} in the store (expected one of {', '.join(allowed)})")
    return value


@dataclass(frozen=True, kw_only=True)
class SweepRecord:
    """One run of a matrix on a host: the matrix as given, the host's facts and versions, the settings used."""

    sweep_id: str
    name: str
    host: str
    matrix_yaml: str
    """The matrix file's text as given (secret-looking values masked)."""
    matrix_path: str | None = None
    started_at: float
    ended_at: float | None = None
    status: SweepStatus = "running"
    host_facts: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    """`sglang` and the installed packages: name -> version."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The merged configuration the sweep ran with (deadlines, retries, packing, ...)."""

    def to_row(self) -> dict[str, Any]:
        """Column name -> SQL value."""
        return {
            "sweep_id": self.sweep_id,
            "name": self.name,
            "host": self.host,
            "matrix_yaml": scrub_text(self.matrix_yaml),
            "matrix_path": self.matrix_path,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "status": _checked(self.status, SWEEP_STATUSES, "sweep status"),
            "host_facts": _to_json(self.host_facts),
            "versions": _to_json(self.versions),
            "settings": _to_json(self.settings),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SweepRecord:
        """Rebuild from a `sweeps` row (DamagedRecord when a value does not read back)."""

        def build() -> SweepRecord:
            return cls(
                sweep_id=row["sweep_id"],
                name=row["name"],
                host=row["host"],
                matrix_yaml=row["matrix_yaml"],
                matrix_path=row["matrix_path"],
                started_at=row["started_at"],
                ended_at=row["ended_at"],
                status=cast(SweepStatus, _checked(row["status"], SWEEP_STATUSES, "sweep status")),
                host_facts=_column(row, "host_facts", "sweep"),
                versions=_column(row, "versions", "sweep"),
                settings=_column(row, "settings", "sweep"),
            )

        return _rebuilt("sweep", row, build)


def cell_to_row(sweep_id: str, position: int, cell: Cell, origin: str | None = None) -> dict[str, Any]:
    """A `cells` row; of the cell's environment only the variable names are kept.

    `origin` says which step of the sweep's plan added the cell (`matrix`, `covering`, `localise`, `fill`).
    """
    return {
        "sweep_id": sweep_id,
        "position": position,
        "cell_id": cell.cell_id,
        "flags": _to_json(cell.flags),
        "axes": json.dumps(list(cell.axes)),
        "env_names": json.dumps(sorted(cell.env)),
        "install": cell.install,
        "origin": origin,
        "host": cell.host,
    }


def cell_from_row(row: Mapping[str, Any]) -> Cell:
    """Rebuild a cell; its environment comes back as names with masked values."""

    def build() -> Cell:
        flags = _column(row, "flags", "cell")
        return Cell(
            cell_id=row["cell_id"],
            flags={k: (parse_ref(v) or v) if isinstance(v, str) else v for k, v in flags.items()},
            axes=tuple(_column(row, "axes", "cell")),
            env=dict.fromkeys(_column(row, "env_names", "cell"), MASK),
            install=row["install"],
            host=row.get("host"),
        )

    return _rebuilt("cell", row, build)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One launch of a cell, written before the launch and completed after its verdict."""

    run_id: str
    sweep_id: str
    cell_id: str
    attempt: int
    """1 for the first launch of the cell in this sweep, 2 for its first retry, ..."""
    state: RunState = "pending"
    host: str
    run_dir: str | None = None
    pgid: int | None = None
    port: int | None = None
    gpus: tuple[int, ...] = ()
    command: str = ""
    """The launch command as shown to humans (secrets masked)."""
    env_masked: dict[str, str] = field(default_factory=dict)
    started_at: float
    ended_at: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent per phase, keyed by phase name."""
    outcome: ProbeOutcome | None = None
    evidence: dict[str, Any] | None = None
    """The classifier's evidence, as JSON."""
    verdict: Verdict | None = None
    install: str | None = None
    job_id: str | None = None
    """The Slurm job of the run (hosts with `transport: slurm`)."""
    node: str | None = None
    """The node the run's job ran on."""

    def to_row(self) -> dict[str, Any]:
        """Column name -> SQL value."""
        return {
            "run_id": self.run_id,
            "sweep_id": self.sweep_id,
            "cell_id": self.cell_id,
            "attempt": self.attempt,
            "state": _checked(self.state, RUN_STATES, "run state"),
            "host": self.host,
            "run_dir": self.run_dir,
            "pgid": self.pgid,
            "port": self.port,
            "gpus": json.dumps(list(self.gpus)),
            "command": scrub_text(self.command),
            "env_masked": _to_json(self.env_masked),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "timings": _to_json(self.timings),
            "outcome": None if self.outcome is None else _to_json(self.outcome.to_dict()),
            "evidence": None if self.evidence is None else _to_json(self.evidence),
            "verdict": None if self.verdict is None else _to_json(self.verdict.to_dict()),
            "install": self.install,
            "job_id": self.job_id,
            "node": self.node,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunRecord:
        """Rebuild from a `runs` row (DamagedRecord when a value does not read back)."""

        def column(name: str) -> Any:
            return _column(row, name, "run")

        def build() -> RunRecord:
            outcome, verdict = column("outcome"), column("verdict")
            return cls(
                run_id=row["run_id"],
                sweep_id=row["sweep_id"],
                cell_id=row["cell_id"],
                attempt=row["attempt"],
                state=cast(RunState, _checked(row["state"], RUN_STATES, "run state")),
                host=row["host"],
                run_dir=row["run_dir"],
                pgid=row["pgid"],
                port=row["port"],
                gpus=tuple(column("gpus")),
                command=row["command"],
                env_masked=column("env_masked"),
                started_at=row["started_at"],
                ended_at=row["ended_at"],
                timings=column("timings"),
                outcome=None if outcome is None else ProbeOutcome.from_dict(outcome),
                evidence=column("evidence"),
                verdict=None if verdict is None else Verdict.from_dict(verdict),
                install=row["install"],
                job_id=row.get("job_id"),
                node=row.get("node"),
            )

        return _rebuilt("run", row, build)

    @property
    def pending_s(self) -> float | None:
        """Seconds the run's job waited in the batch queue (not part of its launch time)."""
        return self.timings.get("pending_s")

    @property
    def ready_s(self) -> float | None:
        """Seconds from launch to ready, when the server got there."""
        return None if self.outcome is None else self.outcome.ready_s


@dataclass(frozen=True)
class PastRun:
    """A finished run from the store's history, with its cell and what its sweep knew of the host."""

    cell: Cell
    run: RunRecord
    versions: dict[str, Any]
    host_facts: dict[str, Any]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PastRun:
        """Rebuild from a `runs` row joined with its cell's columns (`c_*`) and its sweep's (`s_*`)."""
        cell = {"sweep_id": row["sweep_id"], "cell_id": row["cell_id"], "install": row["c_install"]}
        cell |= {k: row[f"c_{k}"] for k in ("flags", "axes", "env_names")}
        sweep = {"sweep_id": row["sweep_id"], "versions": row["s_versions"], "host_facts": row["s_host_facts"]}
        return cls(
            cell_from_row(cell),
            RunRecord.from_row(row),
            _column(sweep, "versions", "sweep"),
            _column(sweep, "host_facts", "sweep"),
        )
