"""Evidence from messy logs: interleaved ranks, colour codes, tqdm redraws, bad bytes, cut tracebacks, any chunking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import MAX_CARRY, EvidenceBuilder, extract_evidence
from orchestrator.harvest.records import Evidence
from orchestrator.harvest.tracebacks import MAX_TRACEBACKS
from orchestrator.model import Category, Phase

TS = "2025-05-09 19:11:16"


def feed(data: bytes, sizes: list[int] | None = None) -> Evidence:
    builder = EvidenceBuilder()
    pos = 0
    for size in sizes or []:
        builder.feed(data[pos : pos + size])
        pos += size
    builder.feed(data[pos:])
    return builder.finish()


def test_interleaved_rank_tracebacks_are_reassembled() -> None:
    log = [
        "(VllmWorker TP0 pid=10) ERROR 08-30 01:28:29 [multiproc_executor.py:611] Traceback (most recent call last):",
        "(VllmWorker TP1 pid=11) ERROR 08-30 01:28:29 [multiproc_executor.py:611] Traceback (most recent call last):",
        '(VllmWorker TP0 pid=10) ERROR 08-30 01:28:29 [multiproc_executor.py:611]   File "/v/w.py", line 1, in run',
        '(VllmWorker TP1 pid=11) ERROR 08-30 01:28:29 [multiproc_executor.py:611]   File "/v/w.py", line 1, in run',
        "(VllmWorker TP0 pid=10) ERROR 08-30 01:28:29 [multiproc_executor.py:611]     self.step()",
        "(VllmWorker TP1 pid=11) ERROR 08-30 01:28:29 [multiproc_executor.py:611]     self.step()",
        "(VllmWorker TP1 pid=11) ERROR 08-30 01:28:29 [multiproc_executor.py:611] ValueError: rank one",
        "(VllmWorker TP0 pid=10) ERROR 08-30 01:28:29 [multiproc_executor.py:611] ValueError: rank zero",
    ]
    ev = extract_evidence(log)
    assert sorted(t.exception for t in ev.tracebacks if t.exception) == [
        "ValueError: rank one",
        "ValueError: rank zero",
    ]
    assert all(len(t.lines) == 4 for t in ev.tracebacks)


def test_identical_tracebacks_of_ranks_are_counted_once() -> None:
    block = [
        f"[{TS} TP{{r}}] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/s/scheduler.py", line 10, in event_loop_normal',
        "    self.run_batch(batch)",
        "RuntimeError: NCCL error: unhandled system error",
    ]
    log = [line.replace("{r}", str(r)) for r in range(4) for line in block]
    ev = extract_evidence(log)
    assert len(ev.tracebacks) == 1
    assert ev.tracebacks[0].count == 4
    assert classify(ev).category is Category.NCCL_ERROR


def test_ansi_colour_codes_do_not_hide_markers_or_warnings() -> None:
    log = [
        f"\x1b[32m[{TS} TP0] Load weight begin. avail mem=90 GB\x1b[0m",
        "\x1b[1;33m'--nsa-decode-backend' is deprecated and will be removed in a future release.\x1b[0m",
    ]
    ev = extract_evidence(log)
    assert [m.name for m in ev.markers] == ["load_weight_begin"]
    assert ev.deprecations[0].text.startswith("'--nsa-decode-backend' is deprecated")


def test_progress_redraws_split_on_carriage_return_and_glued_fatal_text_is_found() -> None:
    bar = "Capturing batches (avail_mem=13.48 GB):  {p}%|####| {n}/23 [00:39<00:01]"
    redraws = "\r".join(bar.format(p=i * 4, n=i) for i in range(22))
    fatal = bar.format(p=96, n=22) + "[host:1:0:1] Caught signal 11 (Segmentation fault: address not mapped)"
    begin = f"[{TS} TP0] Capture cuda graph begin. avail mem=14 GB"
    data = f"{begin}\n{redraws}\r{fatal}\nFatal Python error: Segmentation fault\n"
    ev = feed(data.encode())
    verdict = classify(ev)
    assert verdict.category is Category.CUDA_GRAPH_CAPTURE_FAILED
    assert verdict.phase is Phase.CUDA_GRAPH_CAPTURE
    assert verdict.root_cause_line == fatal
    assert verdict.root_cause_line in data.splitlines()
    assert ev.lines == 3


def test_bytes_that_are_not_utf8_are_replaced_not_fatal() -> None:
    data = (
        b"[2025-05-09 19:11:16 TP0] Load weight begin.\n\xff\xfe garbage \xc3\n"
        + b"RuntimeError: CUDA error: an illegal memory access was encountered \xe9\n"
    )
    ev = feed(data)
    verdict = classify(ev)
    assert verdict.category is Category.ILLEGAL_MEMORY_ACCESS
    assert verdict.root_cause_line is not None and "\ufffd" in verdict.root_cause_line


def test_log_that_starts_inside_a_traceback() -> None:
    log = [
        "    topk_weights, topk_ids = biased_grouped_topk(",
        '  File "/s/topk.py", line 322, in biased_grouped_topk_gpu',
        "    return moe_fused_gate(",
        "KeyError: 'model.layers.3.mlp.experts.w13_weight_scale'",
    ]
    ev = extract_evidence(log)
    (tb,) = ev.tracebacks
    assert tb.truncated and tb.exception == "KeyError: 'model.layers.3.mlp.experts.w13_weight_scale'"
    assert tb.line_no == 2 and tb.last_line_no == 4


def test_unprefixed_message_continues_after_the_exception_line() -> None:
    log = [
        f"[{TS} TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/s/cuda_graph_runner.py", line 381, in __init__',
        "    raise Exception(",
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "Possible solutions:",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        "",
        f"[{TS}] Received sigquit from a child process. It usually means the child failed.",
    ]
    ev = extract_evidence(log)
    assert ev.tracebacks[0].lines[-1].startswith("1. set --mem-fraction-static")
    verdict = classify(ev)
    assert verdict.category is Category.CUDA_OOM
    assert verdict.phase is Phase.CUDA_GRAPH_CAPTURE


def test_warnings_are_deduplicated_across_ranks_with_count_and_first_time() -> None:
    warning = "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0. This might cause accuracy degradation."
    log = [f"[2025-05-09 19:11:{s:02d} TP{r}] {warning}" for s, r in ((10, 0), (11, 1), (12, 2))]
    log += ["WARNING 07-07 20:12:44 config.py:1] Casting torch.bfloat16 to torch.float16."] * 2
    log += ["/site/x.py:71: UserWarning: 'python -m sglang.launch_server' is still supported"]
    ev = extract_evidence(log)
    by_text = {w.text: w for w in ev.warnings}
    assert by_text[warning].count == 3
    assert by_text[warning].first_seen == "2025-05-09 19:11:10"
    assert by_text["Casting torch.bfloat16 to torch.float16."].count == 2
    assert any("UserWarning" in w for w in by_text)
    assert classify(ev).category is Category.HEALTHY


def test_auto_resolution_versions_and_server_args() -> None:
    log = [
        f"[{TS}] server_args=ServerArgs(model_path='/m', tp_size=8, kv_cache_dtype='auto', "
        "cuda_graph_bs=[1, 2, 4], json_model_override_args='{\"a\": 1}', attention_backend=None)",
        f"[{TS}] Attention backend not specified. Use fa3 backend by default.",
        f"[{TS}] Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM120 device.",
        f"[{TS}] Set DSA backends for fp8_e4m3 KV Cache: prefill=flashmla_auto, decode=flashmla_kv.",
        f"[{TS} TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 903439, K size: 16.2 GB",
        f"[{TS}] FlashAttention3 only supports fp8_e4m3 if using FP8; Setting attention backend to triton.",
        "sglang version: 0.5.9",
        "INFO 07-07 20:12:44 api_server.py:1] vLLM API server version 0.6.4",
        "flashinfer-python==0.5.3",
    ]
    ev = extract_evidence(log)
    assert ev.resolved["attention_backend"] == "triton"
    assert ev.resolved["kv_cache_dtype"] == "fp8_e4m3"
    assert (ev.resolved["dsa_prefill_backend"], ev.resolved["dsa_decode_backend"]) == ("flashmla_auto", "flashmla_kv")
    assert ev.resolved["kv_cache_allocated_dtype"] == "torch.float8_e4m3fn"
    assert ev.versions == {"sglang": "0.5.9", "vllm": "0.6.4", "flashinfer_python": "0.5.3"}
    assert ev.server_args["cuda_graph_bs"] == "[1, 2, 4]"
    assert ev.server_args["json_model_override_args"] == '{"a": 1}'
    assert ev.server_args["kv_cache_dtype"] == "auto"


def test_first_error_is_the_earliest_by_time_not_by_position() -> None:
    log = [
        "[2025-05-09 19:11:20 TP1] ValueError: second",
        "[2025-05-09 19:11:18 TP0] ValueError: first",
    ]
    ev = extract_evidence(log)
    assert ev.first_error is not None and ev.first_error.text.endswith("first")


def test_state_stays_bounded_on_pathological_logs() -> None:
    tracebacks = [
        line
        for i in range(200)
        for line in ("Traceback (most recent call last):", f'  File "/x.py", line {i}, in f{i}', f"ValueError: {i}")
    ]
    ev = extract_evidence(tracebacks + [f"[{TS}] WARNING: distinct warning {i}" for i in range(5000)])
    assert len(ev.tracebacks) == MAX_TRACEBACKS and ev.tracebacks_dropped == 200 - MAX_TRACEBACKS
    assert len(ev.warnings) <= 200
    assert all(sum(1 for h in ev.hits if h.signature == s) <= 5 for s in {h.signature for h in ev.hits})
    huge = feed(b"x" * (3 * MAX_CARRY) + b"\nKilled\n", [MAX_CARRY // 2] * 7)
    assert classify(huge).category is Category.PROCESS_KILLED


def test_feed_line_numbers_and_tail() -> None:
    builder = EvidenceBuilder()
    builder.feed_line(b"Load weight begin", line_no=41)
    builder.feed_line("RuntimeError: NCCL error: remote process exited")
    ev = builder.finish()
    assert [h.line.line_no for h in ev.hits if h.signature == "nccl_error"] == [42]
    assert ev.tail == ["Load weight begin", "RuntimeError: NCCL error: remote process exited"]


def test_evidence_round_trips_through_dict(tmp_path: object) -> None:
    from tests.paths import CRASH_LOGS, require_fixtures

    require_fixtures()

    for log in sorted(CRASH_LOGS.glob("*.log")):
        ev = feed(log.read_bytes())
        assert Evidence.from_dict(ev.to_dict()) == ev


LINES = st.sampled_from(
    [
        b"[2025-05-09 19:11:16 TP0] Load weight begin. avail mem=9 GB",
        b"Traceback (most recent call last):",
        b'  File "/s/x.py", line 3, in load_weights',
        b"    param = params_dict[name]",
        b"KeyError: 'layers.0.weight'",
        b"\x1b[33mWARNING: something\x1b[0m",
        b"Capturing batches 50%|##|\rCapturing batches 100%|####| Fatal Python error: Aborted",
        b"torch.AcceleratorError: CUDA error: device-side assert triggered",
        b"\xff\xfe\x00",
        b"",
        b"Killed",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.lists(st.integers(min_value=1, max_value=300), max_size=8))
def test_arbitrary_bytes_never_crash_and_chunking_does_not_matter(data: bytes, sizes: list[int]) -> None:
    whole = feed(data)
    assert feed(data, sizes).to_dict() == whole.to_dict()
    classify(whole)


@settings(max_examples=200, deadline=None)
@given(st.lists(LINES, max_size=40), st.sampled_from([b"\n", b"\r\n"]), st.lists(st.integers(1, 64), max_size=10))
def test_log_like_input_is_chunking_invariant(lines: list[bytes], eol: bytes, sizes: list[int]) -> None:
    data = eol.join(lines) + eol
    whole = feed(data)
    assert feed(data, sizes).to_dict() == whole.to_dict()
    assert Evidence.from_dict(whole.to_dict()) == whole
    verdict = classify(whole)
    if verdict.root_cause_line is not None:
        assert any(
            verdict.root_cause_line in line.split(b"\r")[-1].decode("utf-8", "replace")
            or verdict.root_cause_line in line.decode("utf-8", "replace")
            for line in lines
        )


def test_a_lagging_rank_does_not_move_the_phase_back() -> None:
    log = [
        f"[{TS} TP0] Load weight begin. avail mem=95.04 GB",
        f"[{TS} TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=91.04 GB",
        f"[{TS} TP1] Init torch distributed begin.",
        f"[{TS} TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/s/model_runner.py", line 1702, in init_memory_pool',
        "    raise RuntimeError(",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    ]
    ev = extract_evidence(log)
    assert ev.last_marker is not None and ev.last_marker.name == "load_weight_end"
    verdict = classify(ev)
    assert (verdict.category, verdict.phase) == (Category.KV_CACHE_TOO_SMALL, Phase.MEMORY_ALLOC)


@settings(max_examples=150, deadline=None)
@given(st.lists(LINES, max_size=40))
def test_feed_line_matches_feeding_the_joined_bytes(lines: list[bytes]) -> None:
    by_line = EvidenceBuilder()
    for line in lines:
        by_line.feed_line(line)
    assert by_line.finish().to_dict() == feed(b"".join(line + b"\n" for line in lines)).to_dict()


def test_a_launcher_that_relogs_sglang_output_keeps_tracebacks_whole() -> None:
    outer = "2025-03-08 02:04:48,693 - __main__ - INFO - "
    log = [
        outer + "[2025-03-08 02:04:48 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        outer + '  File "/env/sglang/srt/managers/scheduler.py", line 239, in __init__',
        outer + "    self.tp_worker = TpWorkerClass(",
        outer + "                     ^^^^^^^^^^^^^^",
        outer + '  File "/env/sglang/srt/model_executor/model_runner.py", line 893, in load_model',
        outer + "    self.model = get_model(",
        outer + "ValueError: Unsupported architectures: Qwen2VLForConditionalGeneration",
    ]
    ev = extract_evidence(log)
    (tb,) = ev.tracebacks
    assert tb.exception == "ValueError: Unsupported architectures: Qwen2VLForConditionalGeneration"
    assert len(tb.lines) == 7
    verdict = classify(ev)
    assert (verdict.category, verdict.root_cause_line) == (Category.UNSUPPORTED_CONFIG, log[-1])
