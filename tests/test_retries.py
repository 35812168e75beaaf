"""Which failures are tried again, and which are the host's (infra) rather than the cell's (orchestrator/retries.py)."""

from __future__ import annotations

from orchestrator.model import Category, Phase, Status, Verdict
from orchestrator.retries import (
    PORT_RACE_RELAUNCHES,
    decide,
    decide_after,
    gpu_fault,
    host_failure,
    retries_owed,
    retry_class,
    retry_reason,
)
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


RACE = _fail(Category.PORT_IN_USE, "OSError: [Errno 98] Address already in use", status=Status.INFRA)
NAN = _fail(Category.NAN_IN_PROBS, "probability tensor contains either `inf`, `nan` or element < 0")
SSH_LOST = _fail(Category.UNKNOWN, "ssh: connection to the host was lost", status=Status.INFRA)
PASSED = Verdict(Status.PASS, Phase.AFTER_DECODE, Category.HEALTHY, None, "")


def test_a_port_race_is_relaunched_even_with_no_retries() -> None:
    assert decide_after([RACE], RetryPolicy(), default=0).again
    assert decide_after([RACE], RetryPolicy(transient=0), default=0).again
    assert "another port" in decide_after([RACE], RetryPolicy(), default=0).reason


def test_a_port_race_does_not_use_up_the_cells_retries() -> None:
    # The demo's incident: NaN on attempt 1 (flaky, retries: 1), the retry lost its port: the retry is still owed.
    assert decide_after([NAN, RACE], RetryPolicy(), default=1).again
    assert retries_owed([NAN, RACE], RetryPolicy(), default=1)
    # The relaunch is the cell's one retry; after it the retries are used, whatever it ended with.
    assert not decide_after([NAN, RACE, NAN], RetryPolicy(), default=1).again
    assert decide_after([RACE, NAN], RetryPolicy(), default=1).again  # the race was no attempt: NaN is attempt 1
    assert not decide_after([RACE, NAN], RetryPolicy(), default=0).again


def test_port_races_are_bounded_per_cell() -> None:
    races = [RACE] * PORT_RACE_RELAUNCHES
    assert decide_after(races, RetryPolicy(), default=0).again
    assert not decide_after([*races, RACE], RetryPolicy(), default=5).again
    # Spread over the cell's attempts, they still add up.
    spread = [RACE, NAN, RACE, NAN, RACE, NAN, RACE]
    assert not decide_after(spread, RetryPolicy(), default=9).again
    assert "port races" in decide_after(spread, RetryPolicy(), default=9).reason


def test_other_infra_counts_against_the_retries_of_its_class() -> None:
    assert not decide_after([NAN, SSH_LOST], RetryPolicy(), default=1).again
    assert decide_after([NAN, SSH_LOST], RetryPolicy(), default=2).again
    assert not decide_after([SSH_LOST], RetryPolicy(transient=0), default=3).again


def test_a_cell_that_passed_and_failed_is_measured() -> None:
    assert not decide_after([PASSED, NAN], RetryPolicy(), default=5).again
    assert not decide_after([NAN, PASSED, SSH_LOST], RetryPolicy(), default=5).again
    assert decide_after([], RetryPolicy(), default=0).again  # never run: it owes its first launch


def test_the_sentence_names_an_infra_attempt_after_a_proof_and_a_port_race() -> None:
    after = retry_reason([NAN, SSH_LOST], RetryPolicy(), 1)
    assert after.startswith("attempt 2 ended infra, which proves nothing about the flags; "), after
    raced = retry_reason([NAN, RACE, NAN], RetryPolicy(), 1)
    assert "attempt 2 lost its port to another process: relaunched, not counted" in raced, raced
    assert retry_reason([NAN, RACE, PASSED], RetryPolicy(), 1).startswith("pass on attempt 3; relaunched on")


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
