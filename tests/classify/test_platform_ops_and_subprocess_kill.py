"""vLLM's caught failure to import its CUDA ops on a platform that runs on a plugin's kernels is no cause; a child
that Python's subprocess says died of a kill signal was killed; transformers' note that weights were newly initialized
is no failure (issue 32)."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.knowledge.benign import is_benign
from orchestrator.knowledge.platforms import engine_ops_unneeded
from orchestrator.model import Category

C = Category

_OPS_WARNING = ("(APIServer pid=17) WARNING 06-27 01:25:56 [interface.py:225] Failed to import from vllm._C: "
                "ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')")
_OLD_OPS_WARNING = ("WARNING 01-02 03:04:05 _custom_ops.py:19] Failed to import from vllm._C with "
                    "ModuleNotFoundError(\"No module named 'vllm._C'\")")
_KEY_ERROR_TB = [
    "(EngineCore_DP0 pid=263) ERROR 06-27 01:37:15 [core.py:1006] EngineCore failed to start.",
    "(EngineCore_DP0 pid=263) ERROR 06-27 01:37:15 [core.py:1006] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=263) ERROR 06-27 01:37:15 [core.py:1006]   File "/x/plugin/model_loader.py", line 601, in '
    "load_weights",
    "(EngineCore_DP0 pid=263) ERROR 06-27 01:37:15 [core.py:1006]     w = state_dict[name]",
    "(EngineCore_DP0 pid=263) ERROR 06-27 01:37:15 [core.py:1006] KeyError: 'layers.3.mlp.up_proj.weight'",
]


def _platform(line: str) -> list[str]:
    return ["INFO 06-27 01:25:34 [__init__.py:43] Available plugins for group vllm.platform_plugins:", line]


@pytest.mark.parametrize("platform_line", [
    "INFO 06-27 01:25:34 [__init__.py:212] Platform plugin neuron is activated",
    "INFO 06-27 01:25:34 [__init__.py:212] Platform plugin ascend is activated",
    "INFO 06-27 01:25:34 [__init__.py:230] Automatically detected platform tpu.",
])
@pytest.mark.parametrize("warning", [_OPS_WARNING, _OLD_OPS_WARNING])
def test_ops_import_warning_on_a_plugin_platform_is_no_cause(platform_line: str, warning: str) -> None:
    lines = [*_platform(platform_line), warning, *_KEY_ERROR_TB]
    evidence = extract_evidence(lines)
    verdict = classify(evidence)
    assert evidence.resolved["platform"] in {"neuron", "ascend", "tpu"}
    assert verdict.category is C.WEIGHTS_LOAD_ERROR
    assert verdict.root_cause_line is not None and "KeyError" in verdict.root_cause_line


def test_ops_import_warning_alone_on_a_plugin_platform_names_no_import_error() -> None:
    lines = [*_platform("INFO 06-27 01:25:34 [__init__.py:212] Platform plugin neuron is activated"), _OPS_WARNING,
             "(EngineCore_DP0 pid=263) ERROR 06-27 01:37:15 [core.py:1006] EngineCore failed to start."]
    assert classify(extract_evidence(lines)).category is C.UNKNOWN


@pytest.mark.parametrize("platform_line", [
    "INFO 06-27 01:25:34 [__init__.py:230] Automatically detected platform cuda.",
    "INFO 06-27 01:25:34 [__init__.py:230] Automatically detected platform rocm.",
    None,
])
def test_ops_import_failure_on_a_cuda_build_stays_an_import_error(platform_line: str | None) -> None:
    """The counter-case: where vLLM's kernels are its compiled ops, their failed import is the cause of the death."""
    lines = [*(_platform(platform_line) if platform_line else []),
             "WARNING 05-30 10:51:41 [_custom_ops.py:21] Failed to import from vllm._C with ImportError(\"/x/vllm/"
             "_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi\")",
             "(EngineCore_DP0 pid=263) ERROR 06-27 01:37:15 [core.py:1006] EngineCore failed to start."]
    verdict = classify(extract_evidence(lines))
    assert verdict.category is C.IMPORT_ERROR
    assert verdict.root_cause_line is not None and "Failed to import from vllm._C" in verdict.root_cause_line


def test_engine_ops_unneeded_reads_the_platform() -> None:
    assert engine_ops_unneeded("Failed to import from vllm._C: ImportError('x')", "neuron")
    assert engine_ops_unneeded("Failed to import from vllm._moe_C: ImportError('x')", "hpu")
    assert not engine_ops_unneeded("Failed to import from vllm._C: ImportError('x')", "cuda")
    assert not engine_ops_unneeded("Failed to import from vllm._C: ImportError('x')", None)
    assert not engine_ops_unneeded("ImportError: libcuda.so.1: cannot open shared object file", "neuron")


@pytest.mark.parametrize("signal", ["SIGHUP: 1", "SIGKILL: 9", "SIGTERM: 15"])
def test_a_child_that_died_of_a_kill_signal_was_killed(signal: str) -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/libneuronxla/neuron_cc_wrapper.py", line 181, in compile_cache_entry',
        '    raise (subprocess.CalledProcessError(-1, "", stderr=error_log))',
        f"subprocess.CalledProcessError: Command '' died with <Signals.{signal}>.",
    ]
    verdict = classify(extract_evidence(lines))
    assert verdict.category is C.PROCESS_KILLED
    assert verdict.root_cause_line is not None and "died with" in verdict.root_cause_line


def test_a_child_that_crashed_on_a_segfault_is_not_a_kill() -> None:
    lines = ["Traceback (most recent call last):", '  File "/x/run.py", line 3, in main',
             "    subprocess.check_call(cmd)",
             "subprocess.CalledProcessError: Command 'nvcc' died with <Signals.SIGSEGV: 11>."]
    assert classify(extract_evidence(lines)).category is not C.PROCESS_KILLED


def test_weights_newly_initialized_is_no_failure() -> None:
    message = ("Some weights of LlavaForConditionalGeneration were not initialized from the model checkpoint at "
               "org/model and are newly initialized: ['lm_head.weight']")
    assert is_benign(message)
    assert classify(extract_evidence(["INFO 01-01 00:00:00 loader.py:1] Loading weights", message])).category \
        is C.HEALTHY
    assert not is_benign("ValueError: weights were not initialized from the model checkpoint")
