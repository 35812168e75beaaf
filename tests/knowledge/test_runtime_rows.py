"""Families stated in a runtime's own terms: CUDA result numbers, compiler diagnostics, Ray's placement wait, Ascend's
CANN error codes, Python's built-in error messages without their type, an NPU extension never imported, a scheduler's
or platform's own statements."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category


@pytest.mark.parametrize(
    ("lines", "category"),
    [
        (["```", "[memory_saver.cpp] CUresult error  result=2 file=csrc/memory_saver.cpp func=cu_mem_create line=9 (5)",
          "```"], C.CUDA_OOM),
        (["INFO 01-01 10:00:00 [x.py:1] cuMemCreate failed with error 2"], C.CUDA_OOM),
        (["CUDA driver error: 700 (cuMemcpyDtoH)"], C.ILLEGAL_MEMORY_ACCESS),
        (["cuModuleLoadData failed with error 209"], C.KERNEL_NOT_SUPPORTED_ON_ARCH),
        (["  kernels/activation.cuh:95:52: error: type/value mismatch at argument 1 in template parameter list",
          "    note: expected a type, got 'Kind::kSiLU'"], C.KERNEL_JIT_ERROR),
        (["(EngineCore pid=8) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of specs "
          "for 150 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]."], C.HANG_OR_TIMEOUT),
        (["[rank1]: EI0009: [PID: 22] 2025-09-24-20:59:48.119.066 Transport init error. Reason: [Create][DestLink]",
          "[rank1]:         Solution: Check other NPUs that are not reporting errors."], C.NCCL_ERROR),
        (["2024-07-01 07:28:04.488 1 modelsrv ERROR [__main__.py:<module>():254] Failed to start model server: "
          "integer division or modulo by zero"], C.PYTHON_EXCEPTION_OTHER),
        (["NameError: name 'torch_npu' is not defined"], C.IMPORT_ERROR),
        (["RuntimeError: CUDA driver error: CUDA_ERROR_OUT_OF_MEMORY"], C.CUDA_OOM),
        (["ERROR 06-23 10:51:59 [engine.py:458] EZ3002: [PID: 6] 2025-06-23-10:51:59.636.525 Optype [TransData] of "
          "Ops kernel [AIcoreEngine] is unsupported."], C.KERNEL_NOT_SUPPORTED_ON_ARCH),
        (["ValueError: Unrecognized configuration class <class 'x.MConfig'> to build an AutoTokenizer."],
         C.TOKENIZER_OR_TEMPLATE_ERROR),
        (["ValueError: Unrecognized configuration class <class 'x.MConfig'> for this kind of AutoModel: "
          "AutoModelForCausalLM."], C.UNSUPPORTED_CONFIG),
        (["zmq.error.ZMQError: Operation not supported"], C.PYTHON_EXCEPTION_OTHER),
        (["RuntimeError: checkpoint shard model-00003-of-00004.safetensors is truncated"], C.WEIGHTS_LOAD_ERROR),
        (["RuntimeError: Failed to allocate 2.00 GiB on device cuda:0"], C.CUDA_OOM),
        (["WARNING 01-01 10:00:00 [x.py:1] not enough GPU memory to create the KV cache workspace"], C.CUDA_OOM),
        (["OSError: [Errno 12] Cannot allocate memory"], C.PYTHON_EXCEPTION_OTHER),
        (["AttributeError: 'Qwen2VLProcessor' object has no attribute 'image_token'"], C.TOKENIZER_OR_TEMPLATE_ERROR),
        (["OSError: Unable to load vocabulary from file. Please check that the provided vocabulary is accessible."],
         C.TOKENIZER_OR_TEMPLATE_ERROR),
        (["TypeError: MyLogitsProcessor.__call__() takes 2 positional arguments but 3 were given"],
         C.PYTHON_EXCEPTION_OTHER),
        (["OSError: [Errno 98] Address already in use"], C.PORT_IN_USE),
        (["|CCL_ERROR| exchange_utils.cpp:202 sendmsg_fd: condition !check_msg_retval(...) failed"], C.NCCL_ERROR),
        (["[2024-06-13 16:11:51,588 E 13261 13261] core_worker.cc:228: Failed to register worker 0100ff to Raylet. "
          "IOError: [RayletClient] Unable to register worker with raylet."], C.NCCL_ERROR),
        (["RESOURCE_EXHAUSTED: Error loading program 'jit_f': Attempting to reserve 6.14G at the bottom of memory."],
         C.CUDA_OOM),
        (["requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
          "https://huggingface.co/org/model/resolve/main/config.json"], C.WEIGHTS_LOAD_ERROR),
        (["slurmstepd: error: *** JOB 42 ON gpu-3 CANCELLED AT 2025-01-01T10:00:00 DUE TO TIME LIMIT ***"],
         C.HANG_OR_TIMEOUT),
        (["slurmstepd: error: *** JOB 42 ON gpu-3 CANCELLED AT 2025-01-01T10:00:00 DUE TO PREEMPTION ***"],
         C.PROCESS_KILLED),
        (["slurmstepd: error: *** STEP 42.0 ON gpu-3 CANCELLED AT 2025-01-01T10:00:00 ***"], C.PROCESS_KILLED),
        (["Warning  Evicted  12m  kubelet  The node was low on resource: memory. Container vllm was using 60Gi."],
         C.PROCESS_KILLED),
        (["ERROR 12-06 14:25:41 client.py:250] TimeoutError('No heartbeat received from MQLLMEngine')"],
         C.HANG_OR_TIMEOUT),
        (["/usr/bin/ld: cannot find -lcuda", "collect2: error: ld returned 1 exit status"], C.KERNEL_JIT_ERROR),
        (["ValueError: Invalid repository ID or local directory specified: 'model-without-org'."], C.INVALID_ARGUMENT),
        (["  /tmp/build/kernel.cu(95): error: identifier \"foo\" is undefined"], C.KERNEL_JIT_ERROR),
        (["The actor or task with ID ffff cannot be scheduled right now. It requires {GPU: 1.0} for placement, but "
          "this node only has remaining {CPU: 8.0}."], C.HANG_OR_TIMEOUT),
        # A compiled extension that is there but does not load stays a failure, caught or not.
        (["WARNING 01-05 10:00:06 [_custom_ops.py:20] Failed to import from vllm._C with ImportError(\"/x/vllm/_C.abi3"
          ".so: undefined symbol: _ZN3c104cuda9SetDeviceEi\")"], C.IMPORT_ERROR),
        # A class of a package's exceptions module is an exception whatever its name.
        (["torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped"], C.PYTHON_EXCEPTION_OTHER),
        (["ray.exceptions.RayTaskError(KeyError): ray::Worker.run() (pid=7, ip=10.0.0.2)"], C.PYTHON_EXCEPTION_OTHER),
    ],
)
def test_a_runtime_statement_names_its_family(lines: list[str], category: Category) -> None:
    assert classify(extract_evidence(lines)).category is category


@pytest.mark.parametrize(
    "line",
    [
        "CUresult error  result=20 func=cuCtxCreate",  # 20 is not a number these rows name
        "CUDA driver version: 12.2",
        "INFO 01-01 10:00:00 [ray_utils.py:1] Created a placement group of specs [{'GPU': 1.0}]",
        "  see kernels/activation.cuh:95 for the error handling",
        "INFO 01-01 10:00:00 [x.py:1] Using torch_npu 2.1",
        "INFO 01-01 10:00:00 [x.py:1] world: errors so far 0",
        "2025-01-01 10:00:00,000\tINFO worker.py:1 -- Connecting to existing Ray cluster at 10.0.0.1:6379 (GCS)",
        "httpx.HTTPStatusError: Client error '422 Unprocessable Entity' for url 'http://127.0.0.1:30000/generate'",
        "requests.exceptions.HTTPError: 400 Client Error: Bad Request for url: http://127.0.0.1:8000/v1/completions",
        "WARNING 01-01 10:00:00 scheduler.py:1] Sequence group 3 is preempted by PreemptionMode.RECOMPUTE mode because "
        "there is not enough KV cache space.",
        "INFO 01-01 10:00:00 [x.py:1] No chat template given; using the tokenizer's own",
        "vllm.errors.handlers: 3 handlers installed",  # a module of that name, no class
        # A library that could not find out the GPU's capability goes on with a default (FlashInfer's warning).
        "Failed to get device capability: SM 12.x requires CUDA >= 12.9.",
        "Failed to get device capability: nvcc not found and PyTorch is not built with CUDA support.",
        # An optional import the server caught and logged (SGLang shows its warnings without a level).
        "[2026-01-05 10:00:06 TP3] Failed to import amdsmi with ModuleNotFoundError(\"No module named 'amdsmi'\")",
        "WARNING 01-05 10:00:06 [_custom_ops.py:20] Failed to import from vllm._moe_C with ModuleNotFoundError(\"No "
        "module named 'vllm._moe_C'\")",
    ],
)
def test_lookalikes_that_state_nothing_are_no_failure(line: str) -> None:
    assert classify(extract_evidence([line])).category is C.HEALTHY


def test_a_placement_wait_the_server_got_past_was_survived() -> None:
    lines = ["INFO 01-01 10:00:00 [ray_utils.py:464] Waiting for creating a placement group of specs for 10 seconds.",
             "INFO 01-01 10:01:00 [launcher.py:1] Starting vLLM API server on http://0.0.0.0:8000",
             "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"]
    assert classify(extract_evidence(lines)).category is C.HEALTHY


def test_an_allocation_failure_that_doubts_it_matters_gives_way_to_the_one_that_failed() -> None:
    lines = ["[memory_saver.cpp] cuMemCreate CUDA_ERROR_OUT_OF_MEMORY (may not be an issue e.g. torch allocator will "
             "free cache and retry)",
             "[memory_saver.cpp] cudaError error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, lines[1])
