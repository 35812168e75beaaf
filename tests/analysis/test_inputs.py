"""Hand-built sweep views shared by the compare and explain tests, and checks that they are what they claim."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping
from itertools import product

from orchestrator.analysis.inputs import CellOutcome, SweepView
from orchestrator.model import Category, FlagValue, Phase, Status

DEEPGEMM_WARNING = (
    "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0. "
    "This might cause accuracy degradation on Blackwell."
)
NAN_LINE = "[2026-01-10 03:12:44 TP0] RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"
UNSUPPORTED_LINE = "[2026-01-10 03:02:11 TP0] ValueError: triton attention backend does not support fp8_e4m3 KV cache"

Verdict = tuple[Status, Phase | None, Category, str | None]
PASS: Verdict = (Status.PASS, None, Category.HEALTHY, None)


def cell(
    flags: Mapping[str, FlagValue],
    verdict: Verdict = PASS,
    *,
    warnings: tuple[str, ...] = (),
    axes: tuple[str, ...] | None = None,
    install: str | None = None,
    ready_s: float | None = 30.0,
    attempts: int = 1,
    passes: int | None = None,
) -> CellOutcome:
    """One cell; its id hashes its flags, as the real cell ids do."""
    status, phase, category, line = verdict
    digest = hashlib.sha1(repr(sorted(flags.items())).encode()).hexdigest()[:10]
    return CellOutcome(
        cell_id=digest,
        flags=dict(flags),
        axes=tuple(flags) if axes is None else axes,
        install=install,
        status=status,
        phase=phase,
        category=category,
        root_cause_line=line,
        ready_s=ready_s,
        warnings=warnings,
        attempts=attempts,
        passes=(attempts if status is Status.PASS else 0) if passes is None else passes,
    )


def view(
    cells: list[CellOutcome],
    *,
    sweep_id: str = "s1",
    version: str | None = "0.5.9",
    packages: dict[str, str] | None = None,
    host_facts: dict[str, str] | None = None,
) -> SweepView:
    """A view with default packages and host facts."""
    return SweepView(
        sweep_id,
        "gpu-host",
        version,
        {"torch": "2.9.1", "flashinfer-python": "0.5.3"} if packages is None else packages,
        {"gpu": "RTX PRO 6000 Blackwell", "driver": "580.65"} if host_facts is None else host_facts,
        tuple(cells),
    )


Rule = Callable[[dict[str, str]], tuple[Verdict, tuple[str, ...]]]


def matrix(axes: Mapping[str, list[str]], rule: Rule, base: Mapping[str, FlagValue] | None = None) -> list[CellOutcome]:
    """The full product of `axes` over `base` flags, each cell's verdict and warnings decided by `rule`."""
    cells = []
    for values in product(*axes.values()):
        flags = dict(zip(axes, values, strict=True))
        verdict, warnings = rule(flags)
        all_flags = {"model-path": "zai-org/GLM-5-NVFP4", **(base or {}), **flags}
        cells.append(cell(all_flags, verdict, warnings=warnings, axes=tuple(axes)))
    return cells


INCIDENT_AXES = {
    "attention-backend": ["dsa", "triton"],
    "dsa-decode-backend": ["flashmla_sparse", "tilelang"],
    "kv-cache-dtype": ["fp8_e4m3", "bf16"],
    "fp8-gemm-backend": ["auto", "deep_gemm", "cutlass"],
}


def incident_rule(flags: dict[str, str]) -> tuple[Verdict, tuple[str, ...]]:
    """The incident: DeepGEMM scales give NaN at the first sampled decode; triton rejects fp8 KV earlier."""
    deep_gemm = flags["fp8-gemm-backend"] in ("auto", "deep_gemm")
    warnings = (DEEPGEMM_WARNING,) if deep_gemm else ()
    if flags["attention-backend"] == "triton" and flags["kv-cache-dtype"] == "fp8_e4m3":
        return (Status.FAIL, Phase.MEMORY_ALLOC, Category.UNSUPPORTED_CONFIG, UNSUPPORTED_LINE), warnings
    if deep_gemm:
        return (Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, NAN_LINE), warnings
    return PASS, warnings


def incident_view() -> SweepView:
    """The 24-cell incident matrix: 12 nan_in_probs, 6 unsupported_config, 6 passing."""
    return view(matrix(INCIDENT_AXES, incident_rule))


def test_incident_view_has_the_intended_shape() -> None:
    counts = Counter(c.category for c in incident_view().cells)
    assert counts == {Category.NAN_IN_PROBS: 12, Category.UNSUPPORTED_CONFIG: 6, Category.HEALTHY: 6}
    assert len({c.cell_id for c in incident_view().cells}) == 24


def test_a_cell_passes_every_attempt_unless_told_otherwise() -> None:
    assert cell({"a": "x"}).passes == 1
    assert cell({"a": "x"}, attempts=3, passes=2).flaky
