"""Which cells past verdicts prove bad: same host key (SGLang version of the cell's install, GPU model), last
verdict invalid or unsupported; crashes, passes since, other versions and other GPUs are launched again."""

from __future__ import annotations

from typing import Any

from orchestrator.model import Category, Phase, Status, Verdict
from orchestrator.planning.known_bad import known_bad
from orchestrator.store.records import PastRun
from tests.store.test_records import make_cell, make_run

VERSIONS = {"sglang": "0.5.9"}
FACTS = {"gpu_name": "RTX PRO 6000"}


def _past(
    backend: str, verdict: Verdict, sweep: str = "s-1", versions: dict[str, Any] | None = None, **facts: Any
) -> PastRun:
    cell = make_cell(backend)
    run = make_run(cell, sweep_id=sweep, state="done", verdict=verdict)
    return PastRun(cell, run, versions or VERSIONS, facts or FACTS)


KERNEL = Verdict(Status.FAIL, Phase.CUDA_GRAPH_CAPTURE, Category.KERNEL_NOT_SUPPORTED_ON_ARCH)
UNSUPPORTED = Verdict(Status.FAIL, Phase.MEMORY_ALLOC, Category.UNSUPPORTED_CONFIG)
INVALID = Verdict(Status.INVALID, Phase.ARG_PARSE, Category.INVALID_ARGUMENT)
CRASH = Verdict(Status.FAIL, Phase.SAMPLED_DECODE, Category.ILLEGAL_MEMORY_ACCESS)
PASS = Verdict(Status.PASS, None, Category.HEALTHY)
SKIP = Verdict(Status.SKIPPED, None, Category.KERNEL_NOT_SUPPORTED_ON_ARCH, reason="known bad: ...")
INFRA = Verdict(Status.INFRA, None, Category.UNKNOWN)


def test_proven_cells_cite_their_sweep_and_run() -> None:
    history = [_past("fa3", KERNEL), _past("triton", UNSUPPORTED), _past("cutlass", INVALID), _past("flashmla", CRASH)]
    cells = [make_cell(b) for b in ("fa3", "triton", "cutlass", "flashmla", "never-run")]
    proofs = known_bad(cells, history, VERSIONS, FACTS)
    assert set(proofs) == {"c-fa3-fp8_e4m3", "c-triton-fp8_e4m3", "c-cutlass-fp8_e4m3"}
    fa3 = proofs["c-fa3-fp8_e4m3"]
    assert fa3.reason == f"known bad: sweep s-1 run {history[0].run.run_id}, kernel_not_supported_on_arch"
    assert proofs["c-cutlass-fp8_e4m3"].what == "invalid"


def test_the_last_real_verdict_counts() -> None:
    cell = [make_cell("fa3")]
    assert not known_bad(cell, [_past("fa3", KERNEL), _past("fa3", PASS, "s-2")], VERSIONS, FACTS)
    assert not known_bad(cell, [_past("fa3", KERNEL), _past("fa3", CRASH, "s-2")], VERSIONS, FACTS)
    # Skipped and infra runs say nothing new: the proof behind them still stands, citing the sweep that ran it.
    history = [_past("fa3", KERNEL), _past("fa3", SKIP, "s-2"), _past("fa3", INFRA, "s-3")]
    assert known_bad(cell, history, VERSIONS, FACTS)["c-fa3-fp8_e4m3"].sweep_id == "s-1"
    assert not known_bad(cell, history[:1], VERSIONS, FACTS, exclude_sweep="s-1")


def test_a_new_version_or_another_gpu_runs_them_again() -> None:
    cell = [make_cell("fa3")]
    history = [_past("fa3", KERNEL)]
    assert known_bad(cell, history, {"sglang": "0.5.9"}, FACTS)
    assert not known_bad(cell, history, {"sglang": "0.5.10"}, FACTS)
    assert not known_bad(cell, history, VERSIONS, {"gpu_name": "B200"})
    assert not known_bad(cell, history, {}, FACTS)  # a host that did not say its version proves nothing


def test_the_same_version_string_of_another_build_runs_them_again() -> None:
    # A nightly wheel keeps its version string: only the build recorded by preflight tells the installs apart.
    cell = [make_cell("fa3")]
    built = {"sglang": "0.5.9", "sglang-build": "aaaa0000aaaa0000"}
    history = [_past("fa3", KERNEL, versions=built)]
    assert known_bad(cell, history, built, FACTS)["c-fa3-fp8_e4m3"].sweep_id == "s-1"
    assert not known_bad(cell, history, {**built, "sglang-build": "bbbb1111bbbb1111"}, FACTS)
    # A host that cannot say its build now proves nothing against a proof that recorded one.
    assert not known_bad(cell, history, VERSIONS, FACTS)


def test_a_proof_recorded_before_builds_were_is_judged_by_the_version_string() -> None:
    cell = [make_cell("fa3")]
    history = [_past("fa3", KERNEL, versions={"sglang": "0.5.9"})]
    assert known_bad(cell, history, {"sglang": "0.5.9", "sglang-build": "aaaa0000aaaa0000"}, FACTS)
    assert not known_bad(cell, history, {"sglang": "0.5.10", "sglang-build": "aaaa0000aaaa0000"}, FACTS)


def test_each_install_is_judged_by_its_own_build() -> None:
    cell = make_cell("fa3", install="after")
    built = {"sglang": "0.5.9", "sglang-build": "aaaa", "sglang[after]": "0.5.23", "sglang-build[after]": "cccc"}
    past = PastRun(cell, make_run(cell, sweep_id="s-1", state="done", verdict=KERNEL), built, FACTS)
    assert known_bad([cell], [past], built, FACTS)
    assert known_bad([cell], [past], {**built, "sglang-build": "dddd"}, FACTS)  # the other install's build
    assert not known_bad([cell], [past], {**built, "sglang-build[after]": "dddd"}, FACTS)
