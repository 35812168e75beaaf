"""Pure: which cells past sweeps proved cannot work on this host, so they are not launched again.

A cell is known bad when its last verdict on the same host, with the same SGLang install and the
same GPU model, was `invalid` or a configuration the build does not support (`unsupported_config`,
`kernel_not_supported_on_arch`): nothing but a new build changes those. Crashes, hangs and wrong
answers are never skipped this way: they may be flaky, and a night's sweep is how one finds out.

The same install is the same version string and, where both sweeps recorded it, the same build (preflight's
`sglang-build`, a digest of the install's files): a nightly wheel keeps its version string from one day to
the next. A proof from a sweep recorded before builds were is judged by the version string alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.model import Category, Cell, Status
from orchestrator.store.records import PastRun

KNOWN_BAD_PREFIX = "known bad: "
PROVEN: frozenset[Category] = frozenset({Category.UNSUPPORTED_CONFIG, Category.KERNEL_NOT_SUPPORTED_ON_ARCH})
"""Failure categories that say the build cannot run this configuration at all (not that a launch went wrong)."""


@dataclass(frozen=True)
class Proof:
    """The past run that proved a cell bad."""

    sweep_id: str
    run_id: str
    what: str
    """`invalid` or the failure category."""
    past: PastRun

    @property
    def reason(self) -> str:
        """`known bad: sweep s-... run r-..., kernel_not_supported_on_arch`."""
        return f"{KNOWN_BAD_PREFIX}sweep {self.sweep_id} run {self.run_id}, {self.what}"


def install_key(cell: Cell, versions: Mapping[str, Any]) -> tuple[str, str]:
    """The SGLang version and build of a cell's install (`""` where the sweep did not record one)."""
    suffix = f"[{cell.install}]" if cell.install else ""
    return str(versions.get(f"sglang{suffix}") or ""), str(versions.get(f"sglang-build{suffix}") or "")


def same_install(then: tuple[str, str], now: tuple[str, str]) -> bool:
    """Whether a past (version, build) is the install now: the same version, and the same build when the past
    sweep recorded one (a build the host cannot say now proves nothing); never when the version is unknown."""
    if not now[0] or then[0] != now[0]:
        return False
    return not then[1] or then[1] == now[1]


def host_key(cell: Cell, versions: Mapping[str, Any], host_facts: Mapping[str, Any]) -> tuple[str, str, str]:
    """What an old verdict depends on besides the cell: the version and build of its install, and the GPU model."""
    return (*install_key(cell, versions), str(host_facts.get("gpu_name") or ""))


def known_bad(
    cells: Iterable[Cell],
    history: Sequence[PastRun],
    versions: Mapping[str, Any],
    host_facts: Mapping[str, Any],
    *,
    exclude_sweep: str | None = None,
) -> dict[str, Proof]:
    """Cell id -> the proof, for each cell whose last verdict under the same install and GPU proved it bad.

    `history` is oldest first. A cell of unknown version (the host did not say) is never skipped, nor one whose
    past sweep recorded a build the host does not match now: the proof could be from another build.
    """
    last: dict[str, PastRun] = {}
    for past in history:
        verdict = past.run.verdict
        if past.run.sweep_id == exclude_sweep or verdict is None or verdict.status is Status.SKIPPED:
            continue
        if verdict.status is Status.INFRA:
            continue  # the host failed, not SGLang: it says nothing about the cell
        last[past.cell.cell_id] = past
    proofs: dict[str, Proof] = {}
    for cell in cells:
        found = last.get(cell.cell_id)
        if found is None or found.run.verdict is None:
            continue
        then = host_key(found.cell, found.versions, found.host_facts)
        now = host_key(cell, versions, host_facts)
        if then[2] != now[2] or not same_install(then[:2], now[:2]):
            continue
        past, verdict = found, found.run.verdict
        if verdict.status is Status.INVALID:
            proofs[cell.cell_id] = Proof(past.run.sweep_id, past.run.run_id, "invalid", past)
        elif verdict.status is Status.FAIL and verdict.category in PROVEN:
            proofs[cell.cell_id] = Proof(past.run.sweep_id, past.run.run_id, verdict.category.value, past)
    return proofs
