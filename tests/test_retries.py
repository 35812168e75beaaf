"""Which failures are tried again, and which are the host's (infra) rather than the cell's (orchestrator/retries.py)."""

from __future__ import annotations

from orchestrator.model import Category, Phase, Status, Verdict
from orchestrator.retries import decide, gpu_fault, host_failure, retry_class, retry_reason
from orchestrator.settings import RetryPolicy


def _fail(category: Category, line: str = "", status: Status = Status.FAIL) -> Verdict:
    return Verdict(status, Phase.MODEL_LOAD, category, line or None, f"{category.value}: {line}")


def test_failure_classes() -> None:
    assert retry_class(_fail(Category.INVALID_ARGUMENT)) == "deterministic"
    assert retry_class(_fail(Category.KERNEL_NOT_SUPPORTED_ON_ARCH)) == "deterministic"
    assert retry_class(_fail(Category.PORT_IN_USE)) == "transient"
    assert retry_class(_fail(Category.UNKNOWN, status=Status.INFRA)) == "transient"
    assert retry_class(_fail(Category.NAN_IN_PROBS)) == "flaky"
    assert retry_class(_fail(Category.HEALTHY, status=Status.PASS)) is None


def test_deterministic_failures_are_not_relaunched_and_the_launches_saved_are_counted() -> None:
    policy = RetryPolicy()
    decision = decide(_fail(Category.UNSUPPORTED_CONFIG), 1, policy, default=2)
    assert not decision.again and decision.saved == 2 and "deterministic" in decision.reason
    assert decide(_fail(Category.NAN_IN_PROBS), 1, policy, default=2).again
    assert not decide(_fail(Category.NAN_IN_PROBS), 3, policy, default=2).again
    assert decide(_fail(Category.UNSUPPORTED_CONFIG), 1, RetryPolicy(deterministic=1), default=0).again


def test_a_port_race_is_always_worth_one_launch_on_another_port() -> None:
    race = _fail(Category.PORT_IN_USE, "OSError: [Errno 98] Address already in use")
    assert decide(race, 1, RetryPolicy(), default=0).again
    assert not decide(race, 2, RetryPolicy(), default=0).again


def test_the_hosts_failures_are_named_and_the_cells_are_not() -> None:
    xid = host_failure(_fail(Category.UNKNOWN, "NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus"))
    assert xid is not None and "GPU failed" in xid
    disk = host_failure(_fail(Category.PYTHON_EXCEPTION_OTHER, "OSError: [Errno 28] No space left on device"))
    assert disk is not None and "disk is full" in disk
    assert host_failure(_fail(Category.PORT_IN_USE, "[Errno 98] address already in use")) is not None
    assert host_failure(_fail(Category.NAN_IN_PROBS, "probability tensor contains either `inf`, `nan`")) is None
    assert host_failure(_fail(Category.UNKNOWN, "NVRM: Xid 79", status=Status.INFRA)) is None  # already infra


def test_a_gpu_fault_anywhere_in_the_run_is_the_hosts_and_is_read_back_from_the_verdict_alone() -> None:
    nan = _fail(Category.NAN_IN_PROBS, "probability tensor contains either `inf`, `nan` or element < 0")
    ecc = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
    why = host_failure(nan, ["Capture cuda graph failed", ecc])
    assert why is not None and ecc in why
    infra = Verdict(Status.INFRA, nan.phase, nan.category, nan.root_cause_line, f"{why}: {nan.reason}")
    assert gpu_fault(infra) == ecc
    assert decide(infra, 1, RetryPolicy(flaky=0), default=0).again is False  # transient, its retries set to 0
    assert decide(infra, 1, RetryPolicy(), default=1).reason.startswith("retried: infra is transient")
    assert gpu_fault(nan) is None and gpu_fault(_fail(Category.UNKNOWN, "disk", status=Status.INFRA)) is None


def test_the_tables_sentence_says_why_a_cell_was_or_was_not_retried() -> None:
    policy = RetryPolicy(flaky=1)
    assert "not retried" in retry_reason([_fail(Category.WEIGHTS_LOAD_ERROR)], policy, 1)
    passed = Verdict(Status.PASS, Phase.AFTER_DECODE, Category.HEALTHY, None, "")
    assert retry_reason([_fail(Category.NAN_IN_PROBS), passed], policy, 0).startswith("pass on attempt 2")
    assert retry_reason([passed], policy, 0) == ""
