"""What differs between two sweeps' environments: SGLang's version and build, the host, packages and host facts.

Pure. A value one sweep never recorded is kept apart from the changes: the tool records an install's build
and commit (`sglang-build`, `sglang-commit`) only since it learnt to, so a sweep from before says nothing
about them, and "not recorded -> abc123" after a nightly upgrade is not something the upgrade changed.
"""

from __future__ import annotations

from orchestrator.analysis.inputs import SweepView
from orchestrator.planning.installs import RECORDED_SINCE_BUILDS

EnvPairs = dict[str, tuple[str | None, str | None]]
"""Name -> (before, after), None where that sweep has no value."""


def env_diff(a: SweepView, b: SweepView) -> EnvPairs:
    """SGLang version, host, packages and host facts that differ: name -> (before, after).

    A package installed or removed between the sweeps counts (one side None); an install's build or
    commit that one sweep did not record does not (see `env_not_recorded`).
    """
    return {name: pair for name, pair in _differing(a, b).items() if not _unrecorded(name, pair)}


def env_not_recorded(a: SweepView, b: SweepView) -> EnvPairs:
    """An install's build or commit that one sweep recorded and the other did not: whether it changed is unknown."""
    return {name: pair for name, pair in _differing(a, b).items() if _unrecorded(name, pair)}


def _unrecorded(name: str, pair: tuple[str | None, str | None]) -> bool:
    return None in pair and RECORDED_SINCE_BUILDS.match(name) is not None


def _facts(view: SweepView) -> dict[str, str | None]:
    merged: dict[str, str | None] = {"sglang": view.sglang_version, "host": view.host}
    merged.update({k: v for k, v in view.packages.items() if k != "sglang" or view.sglang_version is None})
    package_names = set(merged)
    # A host fact never overwrites a package of the same name; it moves aside instead.
    merged.update({(f"host.{k}" if k in package_names else k): v for k, v in view.host_facts.items()})
    return merged


def _differing(a: SweepView, b: SweepView) -> EnvPairs:
    before, after = _facts(a), _facts(b)
    names = sorted(set(before) | set(after), key=lambda n: (n not in ("sglang", "host"), n))
    return {n: (before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)}


def not_recorded_notes(pairs: EnvPairs, before_id: str, after_id: str) -> list[str]:
    """One note per sweep that lacks values the other recorded: which sweep, and the other's values."""
    lacking: dict[str, list[str]] = {}
    for name, (before, after) in pairs.items():
        missing_in, value, held_in = (before_id, after, after_id) if before is None else (after_id, before, before_id)
        lacking.setdefault(missing_in, []).append(f"{name} ({value} in {held_in})")
    return [
        f"not recorded in {sweep} (made by an older orchestrator, or the host could not say), so not shown as "
        f"changed: {', '.join(values)}"
        for sweep, values in lacking.items()
    ]
