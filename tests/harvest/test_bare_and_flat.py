"""Lines and tracebacks a paste or a kernel printed bare: no prefix, no level, no indentation (issue 32)."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import EvidenceBuilder, extract_evidence
from orchestrator.harvest.prefilter import PREFILTER
from orchestrator.model import Category

C = Category


def _live(lines: list[str]) -> dict[str, object]:
    builder = EvidenceBuilder()
    for line in lines:
        builder.feed_line(line)
    return builder.finish().to_dict()


@pytest.mark.parametrize(
    "refusal",
    ["This kernel only supports sm100", "This kernel only supports sm120.",
     "FP8 PER_BLOCK SM120 kernel only supports sm120f."],
)
def test_a_kernels_bare_refusal_of_the_architecture_is_read_before_the_trap_it_raises(refusal: str) -> None:
    lines = [refusal, "cudaErrorLaunchFailure: unspecified launch failure"]
    assert PREFILTER.interesting(refusal) and PREFILTER.interesting_bytes(refusal.encode())
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, refusal)
    assert _live(lines) == extract_evidence(lines).to_dict()


_FLAT = [
    "Traceback (most recent call last):",
    'File "<frozen runpy>", line 198, in _run_module_as_main',
    'File "/env/lib/python3.12/site-packages/engine/loader.py", line 40, in load_model',
    "model = build(config,",
    "        dtype)",
    'File "/env/lib/python3.12/site-packages/transformers/models/auto/configuration_auto.py", line 1048, in '
    "__getitem__",
    "raise KeyError(key)",
    "~~~~~~~~~~~~~~^^^^^",
    "KeyError: 'new_model_type'",
]


def test_a_traceback_pasted_without_its_indentation_keeps_its_frames_code_and_exception() -> None:
    evidence = extract_evidence(_FLAT)
    (tb,) = evidence.tracebacks
    assert tb.exception == "KeyError: 'new_model_type'" and len(tb.lines) == len(_FLAT)
    assert evidence.hits and all(h.line.text != "raise KeyError(key)" for h in evidence.hits)
    # The frames place it: Transformers' auto mapping has no such model type.
    verdict = classify(evidence)
    assert (verdict.category, verdict.root_cause_line) == (C.UNSUPPORTED_CONFIG, _FLAT[-1])
    assert _live(_FLAT) == evidence.to_dict()


def test_a_flat_traceback_ends_at_its_exception_and_a_chain_starts_the_next() -> None:
    lines = [*_FLAT, "During handling of the above exception, another exception occurred:", *_FLAT[:3],
             "ValueError: model type not understood"]
    first, second = extract_evidence(lines).tracebacks
    assert first.exception == _FLAT[-1]
    assert second.exception == lines[-1] and second.chained


def test_a_flat_frames_code_is_a_few_lines_and_frames_under_an_indented_header_stay_read_by_depth() -> None:
    prose = ["Traceback (most recent call last):", 'File "/app/x.py", line 3, in main', "run()",
             "then I restarted the container", "and tried a smaller batch", "and then a third thing",
             "and a fourth thing", "ValueError: bad"]
    (cut, *_) = extract_evidence(prose).tracebacks
    assert cut.exception is None and len(cut.lines) == 6  # four code lines at most after one frame
    indented = ["  Traceback (most recent call last):", '  File "/app/x.py", line 3, in main', "    run()",
                "  ValueError: bad"]
    (tb,) = extract_evidence(indented).tracebacks
    assert tb.exception == "ValueError: bad" and len(tb.lines) == 4


_RAISED = ["Traceback (most recent call last):", '  File "/srv/engine/warmup.py", line 136, in warm_up_kernels',
           "    block = alignment()[0]", '  File "/srv/engine/utils/kernels.py", line 266, in alignment',
           "    return _missing()"]


@pytest.mark.parametrize(
    ("statement", "advice"),
    [
        ("RuntimeError: FooGEMM backend is not available or outdated.",
         "Please install or update the `foo_gemm` package to a newer version to enable FP8 kernels."),
        ("RuntimeError: The fused MoE kernels could not be set up.",
         "Please install it with: pip install fused-moe-kernels"),
    ],
)
def test_install_advice_that_goes_on_an_exceptions_message_is_the_exceptions(statement: str, advice: str) -> None:
    lines = [*_RAISED, statement, advice]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.IMPORT_ERROR, statement)
    assert _live(lines) == extract_evidence(lines).to_dict()


def test_a_line_after_an_exception_that_states_its_own_failure_keeps_it() -> None:
    lines = [*_RAISED, "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
             "  Value error, max_model_len (513) is greater than the derived max_model_len (512). Please set a smaller "
             "value. [type=value_error]"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.INVALID_ARGUMENT, lines[-1])


@pytest.mark.parametrize(
    "lines",
    [
        ['1756144013378,"(APIServer pid=1) ERROR 08-25 10:46:53 [core.py:1]   File ""/x/utils.py"", line 759, in w"',
         '1756144013378,"(APIServer pid=1) ERROR 08-25 10:46:53 [core.py:1]     raise RuntimeError(""failed. """',
         "1756144014882,(APIServer pid=1) ERROR 08-25 10:46:53 [core.py:1] RuntimeError: failed. See the cause above."],
        ["[19:08:34.164951][GC          ][error][tid:44F8A] Failed to load the kernel for node 12: GLUE_FAILED",
         "[19:08:34.165002][SYN_RECIPE  ][info][tid:44F8A] compileGraph: done"],
    ],
)
def test_the_live_feed_reads_exported_and_spdlog_lines_as_a_file_read_does(lines: list[str]) -> None:
    assert _live(lines) == extract_evidence(lines).to_dict()
