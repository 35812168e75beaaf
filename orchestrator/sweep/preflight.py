"""Preflight, in seconds and before any GPU time: reachable, GPUs free, versions, every cell checked.

A cell the host's SGLang cannot accept is `invalid` here with the reason, and never launched. A host that
cannot run any launch (no nvidia-smi, or an install whose python has no SGLang) is refused here, naming what
is missing and the fix, before anything runs or is recorded.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from orchestrator.classify.unlaunched import rejected_verdict
from orchestrator.errors import HostBusy, LaunchError
from orchestrator.host.facts import (
    GpuHolder,
    InstallIdentity,
    NoGpuReading,
    install_identity_command,
    parse_install_identity,
)
from orchestrator.host.session import HostSession, python_for
from orchestrator.model import Cell, Verdict
from orchestrator.planning.cells import CellPlan, check_flag_secrets, plan_cells
from orchestrator.settings import Deadlines
from orchestrator.transport.shell import Raw, ShellCommand, quote


class HostNotReady(LaunchError):
    """The host lacks what every launch needs (nvidia-smi, an install's SGLang): refused before any launch."""


@dataclass(frozen=True)
class Preflight:
    """What preflight learned about the host and decided about each cell."""

    plans: list[CellPlan]
    versions: dict[str, Any]
    host_facts: dict[str, Any]
    foreign_holders: list[GpuHolder] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def valid(self) -> list[CellPlan]:
        """Cells that will be launched."""
        return [p for p in self.plans if p.ok]

    @property
    def invalid(self) -> list[CellPlan]:
        """Cells rejected before launch."""
        return [p for p in self.plans if not p.ok]


def invalid_verdict(plan: CellPlan) -> Verdict:
    """The verdict of a cell rejected by preflight."""
    return rejected_verdict(plan.reason)


def describe_holders(holders: Sequence[GpuHolder], runs: Mapping[int, str] | None = None) -> str:
    """`GPU 0: pid 4242 (70000 MiB), GPU 1: ...`, naming the run of a pid that is one of our launches."""
    runs = runs or {}
    return ", ".join(
        f"GPU {h.gpu_index}: pid {h.pid} ({h.used_mb} MiB" + (f", run {runs[h.pid]})" if h.pid in runs else ")")
        for h in holders
    )


_CWDS = (
    'for p in "$@"; do printf "%s %s %s\\n" "$p" "$(ps -o pgid= -p "$p" 2>/dev/null | tr -d " ")" '
    '"$(readlink "/proc/$p/cwd" 2>/dev/null)"; done; exit 0'
)
_RUN_DIR = re.compile(r"/runs/(r-[0-9a-f]+)$")


@dataclass(frozen=True)
class OurServer:
    """A GPU holder that is one of our launches: the run whose directory it works in, and its process group."""

    run_id: str
    pgid: int | None


def runs_of_holders(session: HostSession, holders: Sequence[GpuHolder]) -> dict[int, OurServer]:
    """pid -> our run, for holders working in one of our run directories (every launch starts in its own).

    The process group comes from the host, not the store: a sweep killed between a server's start and the
    store's record of it left no pgid behind, yet its server is as real as the others.
    """
    pids = sorted({h.pid for h in holders if h.pid > 1})
    if not pids:
        return {}
    out = session.sh(ShellCommand("sh", "-c", _CWDS, "cwds", *pids).raw(), timeout=30).text
    found: dict[int, OurServer] = {}
    for line in out.splitlines():
        pid, pgid, cwd = [*line.split(" ", 2), "", ""][:3]
        match = _RUN_DIR.search(cwd.strip())
        if pid.isdigit() and match:
            found[int(pid)] = OurServer(match.group(1), int(pgid) if pgid.isdigit() and int(pgid) > 1 else None)
    return found


def run_preflight(
    session: HostSession, cells: Sequence[Cell], *, our_pgids: Collection[int] = (), check_gpus: bool = True
) -> Preflight:
    """Check the host and every cell; records each install's version, build and commit in `versions`.

    Raises HostNotReady when an install's python has no SGLang, or (with `check_gpus`, on a host whose GPUs
    are not a scheduler's) nvidia-smi is missing or gives no reading; HostBusy if foreign processes hold
    GPUs (unless allowed).
    """
    started = time.monotonic()
    check_flag_secrets(cells, os.environ)  # before the host is asked anything: seconds, not minutes
    installs = sorted({c.install for c in cells}, key=lambda i: i or "")
    # Each asks the host to start SGLang's Python, pip or nvidia-smi (seconds each on a real host): all at once,
    # each on its own channel of the one connection; the answers are taken in this order, errors too.
    with ThreadPoolExecutor(max_workers=3 * len(installs) + 1, thread_name_prefix="preflight") as pool:
        asked = [(install, pool.submit(session.sglang_version, install), pool.submit(session.packages, install),
                  pool.submit(install_identity, session, install)) for install in installs]  # fmt: skip
        gpus = pool.submit(_gpu_facts, session, set(our_pgids), check_gpus)
        versions: dict[str, Any] = {}
        identities: dict[str | None, InstallIdentity] = {}
        for install, version, packages, identity in asked:
            suffix = f"[{install}]" if install else ""
            versions[f"sglang{suffix}"] = version.result()
            identities[install] = found = identity.result()
            if found.build:
                versions[f"sglang-build{suffix}"] = found.build
            if found.commit:
                versions[f"sglang-commit{suffix}"] = found.commit
            for name, number in packages.result().items():
                versions[f"{name}{suffix}"] = number
        facts, holders, gpu_problem = gpus.result()
    problems = sglang_problems(session, versions, identities)
    if gpu_problem is None and check_gpus:
        gpu_problem = session.placement.gpu_problem(facts)
    problems += [gpu_problem] if gpu_problem else []
    if problems:
        raise HostNotReady(
            f"host {session.config.name} cannot run SGLang launches: " + "; ".join(problems) + ". Nothing was launched."
        )
    host_facts: dict[str, Any] = dict(facts)
    foreign: list[GpuHolder] = []
    if check_gpus:
        foreign = [h for h in holders if not h.ours]
        if foreign and not session.config.kill_foreign_gpu_holders:
            runs = runs_of_holders(session, foreign)
            if runs:
                raise HostBusy(
                    f"GPUs on {session.config.name} are held by servers an earlier orchestrator sweep left running: "
                    f"{describe_holders(foreign, {pid: r.run_id for pid, r in runs.items()})}. "
                    "Nothing was launched and nothing was killed.",
                    run_ids=tuple(sorted({r.run_id for r in runs.values()})),
                    pgids={r.run_id: r.pgid for r in runs.values() if r.pgid},
                )
            raise HostBusy(
                f"GPUs on {session.config.name} are held by processes that are not ours: {describe_holders(foreign)}. "
                "Nothing was launched and nothing was killed; free the GPUs, or set kill_foreign_gpu_holders: true "
                "for this host in hosts.yaml to let the orchestrator end them."
            )
        if foreign:
            end_foreign_holders(session, foreign)
            host_facts["foreign_gpu_holders_killed"] = describe_holders(foreign)
    plans = plan_cells(cells, session.grammar, session.config.gpus)
    return Preflight(plans, versions, host_facts, foreign, round(time.monotonic() - started, 3))


def _gpu_facts(
    session: HostSession, our_pgids: set[int], check_gpus: bool
) -> tuple[dict[str, str], list[GpuHolder], str | None]:
    """The host's GPU facts and who holds its GPUs, or why nvidia-smi gave no reading of them.

    The GPU list the placement's facts read is the one its holders() needs next: one after the other, in one job.
    """
    facts = session.placement.facts()
    try:
        return facts, session.placement.holders(our_pgids) if check_gpus else [], None
    except NoGpuReading as exc:
        return facts, [], exc.problem


def end_foreign_holders(session: HostSession, holders: Sequence[GpuHolder]) -> None:
    """End the processes holding GPUs by pid (SIGTERM, SIGKILL after the grace), then check the GPUs are free.

    Only under the host's lock (the runner takes it first), so these are never another live sweep's launches.
    """
    deadlines = Deadlines().with_overrides(session.config.deadlines)
    pids = sorted({h.pid for h in holders if h.pid > 1})
    gpus = tuple(sorted({h.gpu_index for h in holders}))
    _signal_pids(session, "TERM", pids)
    released, left, unknown = _released(session, gpus, deadlines.stop_grace)
    if not released:
        # Only the pids found at the start: a process that took a GPU since then was never listed to the user.
        # A GPU nvidia-smi could not read is not free either: its holders get the SIGKILL too.
        _signal_pids(session, "KILL", sorted(set(pids) if unknown else {h.pid for h in left} & set(pids)))
        released, left, unknown = _released(session, gpus, deadlines.gpu_release)
    if unknown:
        raise HostNotReady(
            f"GPUs on {session.config.name} could not be checked after ending their holders: {unknown}. "
            "Nothing was launched."
        )
    if not released:
        raise HostBusy(
            f"GPUs on {session.config.name} are still held after SIGTERM and SIGKILL: {describe_holders(left)}. "
            "Nothing was launched."
        )


def _released(session: HostSession, gpus: tuple[int, ...], timeout: float) -> tuple[bool, list[GpuHolder], str | None]:
    """The placement's `wait_released`, with nvidia-smi giving no reading told apart: (False, [], why)."""
    try:
        released, left = session.placement.wait_released(gpus, timeout)
    except NoGpuReading as exc:
        return False, [], exc.problem
    return released, left, None


def _signal_pids(session: HostSession, signal_name: str, pids: Sequence[int]) -> None:
    if pids:
        session.sh(ShellCommand("kill", "-s", signal_name, "--", *pids, Raw("2>/dev/null; exit 0")).raw(), timeout=30)


def install_identity(session: HostSession, install: str | None) -> InstallIdentity:
    """Where an install's python finds SGLang and which build it is (or why it finds none)."""
    python = python_for(session.config, session.launcher_words(install))
    answer = session.sh(install_identity_command(quote(python)), timeout=120)
    return parse_install_identity(answer.exit_code, answer.text, answer.stderr_text)


def sglang_problems(
    session: HostSession, versions: Mapping[str, Any], identities: Mapping[str | None, InstallIdentity]
) -> list[str]:
    """What keeps each install from running SGLang at all, with the host's words and the fix (none: it can)."""
    problems = []
    for install, identity in identities.items():
        if versions.get(f"sglang[{install}]" if install else "sglang"):
            continue
        python = python_for(session.config, session.launcher_words(install))
        where = f"install {install!r}" if install else "the host"
        key = f"installs: {{{install}: {{launcher: ...}}}}" if install else "launcher:"
        launcher = session.config.launcher_for(install)
        if identity.missing:
            said = f"{python} (the python of {where}'s launcher `{launcher}`) has no SGLang; the host said: "
            said += identity.missing
        else:
            said = f"SGLang of {where} (at {identity.location or '?'}) does not say its version (import sglang, "
            said += "its package metadata and pip list all left it unknown)"
        fix = (
            f"point {key} of host {session.config.name} in hosts.yaml at the python of the environment SGLang is "
            "installed in (e.g. /opt/sglang/.venv/bin/python -m sglang.launch_server), or pip install sglang there"
        )
        if python == session.config.python:  # the launcher does not start with an interpreter (a wrapper, docker)
            fix += f"; or set python: of host {session.config.name} to that environment's interpreter"
        problems.append(f"{said} (fix: {fix})")
    return problems
