"""One line taken apart: every prefix form of SGLang, vLLM, Ray, uvicorn, Python logging and torchrun."""

from __future__ import annotations

import pytest

from orchestrator.knowledge.lines import EXCEPTION_START_RE, looks_like_exception, parse, strip_ansi, ts_key


@pytest.mark.parametrize(
    ("line", "ts", "level", "key", "body"),
    [
        (
            "[2025-05-09 19:11:16 TP0] Load weight begin. avail mem=9 GB",
            "2025-05-09 19:11:16",
            None,
            "",
            "Load weight begin. avail mem=9 GB",
        ),
        ("[2025-05-09 19:11:16.123 DP1 TP3 EP3] Decode batch.", "2025-05-09 19:11:16.123", None, "", "Decode batch."),
        ("[11:19:46 TP0] Capture cuda graph begin.", "11:19:46", None, "", "Capture cuda graph begin."),
        (
            "[2025-11-30 11:18:05] INFO:     Uvicorn running on http://127.0.0.1:30000",
            "2025-11-30 11:18:05",
            "INFO",
            "",
            "Uvicorn running on http://127.0.0.1:30000",
        ),
        (
            "[2025-11-30 11:18:05] INFO server_args.py:1974: Attention backend not specified.",
            "2025-11-30 11:18:05",
            "INFO",
            "",
            "Attention backend not specified.",
        ),
        (
            'INFO:     127.0.0.1:55504 - "GET / HTTP/1.1" 404 Not Found',
            None,
            "INFO",
            "",
            '127.0.0.1:55504 - "GET / HTTP/1.1" 404 Not Found',
        ),
        (
            "(EngineCore_DP0 pid=6106) ERROR 09-27 11:31:49 [core.py:718] KeyError: 'x'",
            "09-27 11:31:49",
            "ERROR",
            "EngineCore_DP0 pid=6106",
            "KeyError: 'x'",
        ),
        (
            "(RayWorkerWrapper pid=1054, ip=10.96.62.52) ERROR 01-02 02:39:17 worker_base.py:467] torch.OOM",
            "01-02 02:39:17",
            "ERROR",
            "RayWorkerWrapper pid=1054, ip=10.96.62.52",
            "torch.OOM",
        ),
        ("ERROR 12-05 20:24:46 engine.py:366] KeyError: 'w'", "12-05 20:24:46", "ERROR", "", "KeyError: 'w'"),
        ("RROR 12-18 19:47:34 engine.py:366] ValueError: v", "12-18 19:47:34", "RROR", "", "ValueError: v"),
        (
            "(EngineCore_DP0 pid=6106) Process EngineCore_DP0:",
            None,
            None,
            "EngineCore_DP0 pid=6106",
            "Process EngineCore_DP0:",
        ),
        (
            "2025-03-27 21:33:31,320 - INFO - flashinfer.jit: Prebuilt kernels not found",
            "2025-03-27 21:33:31,320",
            "INFO",
            "",
            "flashinfer.jit: Prebuilt kernels not found",
        ),
        (
            "[rank0]:[W1102 12:00:00.123456 42 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy",
            "1102 12:00:00.123456",
            "WARNING",
            "rank0",
            "Warning: WARNING: destroy",
        ),
        (
            "[sgl_kernel] CRITICAL: Could not load any common_ops library!",
            None,
            "CRITICAL",
            "",
            "Could not load any common_ops library!",
        ),
        (
            "WARNING: destroy_process_group() was not called",
            None,
            "WARNING",
            "",
            "destroy_process_group() was not called",
        ),
        ("Traceback (most recent call last):", None, None, "", "Traceback (most recent call last):"),
        ("Killed", None, None, "", "Killed"),
        (
            "[gpu_id=1] Load weight end. type=Qwen2ForCausalLM",
            None,
            None,
            "gpu_id=1",
            "Load weight end. type=Qwen2ForCausalLM",
        ),
    ],
)
def test_prefix_forms(line: str, ts: str | None, level: str | None, key: str, body: str) -> None:
    p = parse(line)
    assert (p.ts, p.level, p.key, p.body) == (ts, level, key, body)


def test_prefix_style_names_the_engine() -> None:
    assert parse("[2025-05-09 19:11:16 TP0] x").style == "sglang"
    assert parse("INFO 07-07 20:12:44 metrics.py:295] Avg prompt throughput").style == "vllm"
    assert parse("plain text").style is None


def test_ansi_codes_are_removed() -> None:
    coloured = "\x1b[1;33m'--nsa-decode-backend' is deprecated and will be removed.\x1b[0m"
    assert strip_ansi(coloured) == "'--nsa-decode-backend' is deprecated and will be removed."
    assert strip_ansi("\x1b]0;title\x07plain") == "plain"
    assert strip_ansi("no codes") == "no codes"


def test_timestamp_keys_order_each_form() -> None:
    assert ts_key("2025-05-09 19:11:16") < ts_key("2025-05-09 19:11:17") < ts_key("2025-05-10 00:00:00")
    assert ts_key("2025-03-27 21:33:31,320") > ts_key("2025-03-27 21:33:31,100")
    assert ts_key("01-02 02:39:17") < ts_key("01-02 02:40:00")
    assert ts_key("11:19:46") < ts_key("11:19:47")
    assert ts_key(None) == ()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("KeyError: 'layers.0.weight'", True),
        ("AssertionError", True),
        ("torch.OutOfMemoryError: CUDA out of memory.", True),
        ("triton.runtime.errors.OutOfResources: out of resource", True),
        ("StopIteration", True),
        ("Killed", False),
        ("Load weight begin. avail mem=3 GB", False),
    ],
)
def test_exception_line_after_frames(body: str, expected: bool) -> None:
    assert looks_like_exception(body) is expected


def test_exception_start_needs_an_exception_name() -> None:
    assert EXCEPTION_START_RE.match("RuntimeError: CUDA error")
    assert EXCEPTION_START_RE.match("OutOfMemoryError('CUDA out of memory')")
    assert EXCEPTION_START_RE.match("Exception: Capture cuda graph failed")
    assert not EXCEPTION_START_RE.match("Error rate is low")
    assert not EXCEPTION_START_RE.match("Process SpawnProcess-1:")


@pytest.mark.parametrize(
    ("line", "body", "level"),
    [
        # A container runtime's own log format (CRI): ISO time, stream, partial/full tag.
        ("2026-06-24T17:38:03.765654176+02:00 stderr F RuntimeError: shape '[620, -1, 64]' is invalid",
         "RuntimeError: shape '[620, -1, 64]' is invalid", None),
        ("2026-06-24T17:38:03.7+02:00 stdout F [2026-06-24 15:38:03 TP0] Load weight begin.",
         "Load weight begin.", None),
        # A compose service gutter, before the server's own prefix.
        ("sglang-1  | [2025-05-09 19:11:16 TP0] Scheduler hit an exception: Traceback (most recent call last):",
         "Scheduler hit an exception: Traceback (most recent call last):", None),
        ("vllm_server    | ERROR 12-05 20:24:46 engine.py:366] KeyError: 'w'", "KeyError: 'w'", "ERROR"),
        # Quoted in an issue, in markdown.
        ("> torch.OutOfMemoryError: CUDA out of memory.", "torch.OutOfMemoryError: CUDA out of memory.", None),
        ("`ValueError: max_model_len (8192) is too large`", "ValueError: max_model_len (8192) is too large", None),
        ("**RuntimeError: NCCL error**", "RuntimeError: NCCL error", None),
        # Tags in front of a recognisable start: a Ray component, a pod, a glog-style level tag.
        ("(raylet) [2025-01-02 10:00:00,000 E 123 456] Traceback (most recent call last):",
         "Traceback (most recent call last):", None),
        ("[pod/vllm-0/server] ValueError: bad", "ValueError: bad", None),
        ("[2024-04-17 20:07:13,727] [ERROR] [MainThread] KeyError: 'x'", "KeyError: 'x'", "ERROR"),
    ],
)
def test_carrier_decoration_is_stripped_wherever_it_sits(line: str, body: str, level: str | None) -> None:
    parsed = parse(line)
    assert parsed.body == body
    if level is not None:
        assert parsed.level == level


@pytest.mark.parametrize(
    "line",
    [
        "Decode batch | running 3",  # an ordinary message that holds a pipe keeps its words
        "[sgl_kernel] could not find the library",  # a tag before prose is part of the message
        "(see above) for details",
    ],
)
def test_prose_is_not_taken_for_a_prefix(line: str) -> None:
    assert parse(line).body == line


def test_stray_indentation_before_a_prefix_is_no_code() -> None:
    parsed = parse(" (SGLangEngine pid=12589) torch.AcceleratorError: CUDA error: device-side assert triggered")
    assert (parsed.key, parsed.body) == ("SGLangEngine pid=12589", "torch.AcceleratorError: CUDA error: device-side "
                                                                   "assert triggered")
    assert parse("    raise ValueError(x)").body == "    raise ValueError(x)"


def test_colour_codes_that_lost_their_escape_byte_are_decoration() -> None:
    parsed = parse(" [36m(RayWorkerVllm pid=5085) [0m [E ProcessGroupNCCL.cpp:475] Watchdog caught collective timeout")
    assert parsed.key == "RayWorkerVllm pid=5085"
    assert parsed.body.startswith("[E ProcessGroupNCCL.cpp:475]")


@pytest.mark.parametrize(
    ("line", "ts", "level", "key", "body"),
    [
        # journalctl / syslog: time, host, program[pid], then the server's own prefix.
        ("Aug 19 18:34:27 vllm vllm[8727]: (EngineCore pid=8727) ERROR 08-19 18:34:27 [core.py:1349] KeyError: 'x'",
         "08-19 18:34:27", "ERROR", "EngineCore pid=8727", "KeyError: 'x'"),
        ("Aug  9 08:04:27 gpu-node-3 python3[12]: Traceback (most recent call last):",
         "Aug  9 08:04:27", None, "", "Traceback (most recent call last):"),
        # rsyslog's precise form: an ISO time, then host and program[pid].
        ("2025-08-19T18:34:27.123456+00:00 node7 vllm[8727]: INFO:     Application startup complete.",
         "2025-08-19 18:34:27.123456+00:00", "INFO", "", "Application startup complete."),
    ],
)
def test_syslog_and_journal_prefixes(line: str, ts: str | None, level: str | None, key: str, body: str) -> None:
    parsed = parse(line)
    assert (parsed.ts, parsed.level, parsed.key, parsed.body) == (ts, level, key, body)


def test_a_sentence_that_starts_like_a_date_is_no_syslog_prefix() -> None:
    assert parse("Error 19 18:34:27 x y: z").body == "Error 19 18:34:27 x y: z"


@pytest.mark.parametrize(
    ("line", "body"),
    [
        # srun --label's task number, a parallel shell's host, an MPI launcher's stream tag.
        ("3: [rank3]: KeyError: 'x'", "KeyError: 'x'"),
        ("gpu-node-3: Traceback (most recent call last):", "Traceback (most recent call last):"),
        ("node0:     param = params_dict[name]", "    param = params_dict[name]"),
        ("[1,0]<stderr>:KeyError: 'x'", "KeyError: 'x'"),
        # A log store's export: its timestamp, a tab, the stream's label set.
        ('2025-01-01 10:00:00.000\t{pod="vllm-0", container="vllm"}\tKeyError: \'x\'', "KeyError: 'x'"),
        # A JSON record (docker's json-file, a cloud export) carries the line in a field, colour codes and all.
        ('{"log":"\\u001b[36m(RayWorkerWrapper pid=9)\\u001b[0m KeyError: \'x\'\\n","stream":"stderr"}',
         "KeyError: 'x'"),
        ('{"severity":"ERROR","jsonPayload":{"message":"KeyError: \'x\'"}}', "KeyError: 'x'"),
        # A log viewer's export: its timestamp, the source pod, `>>`, then the line as the process wrote it.
        ("[2025-12-18T16:24:02+08:00] rl-job-3da56-cfcd2 >> (SGLangEngine pid=3111) [2025-12-18 08:24:01 TP7] "
         "Scheduler hit an exception: Traceback (most recent call last):",
         "Scheduler hit an exception: Traceback (most recent call last):"),
        # A pod and its container as the label (`kubectl logs --prefix` style without the brackets).
        ("vllm-0/server: KeyError: 'x'", "KeyError: 'x'"),
    ],
)
def test_launcher_and_log_store_carriers(line: str, body: str) -> None:
    assert parse(line).body == body


@pytest.mark.parametrize(
    "line",
    [
        # Lower-case exception names and words before a colon are the message, not a host.
        "socket.gaierror: [Errno -2] Name or service not known",
        "socket.timeout: timed out",
        "warning: the cache is cold",
        "max_model_len: 4096",
        "usr/lib: not found",
        "a >> b",
        '{"not a log": 1}',
    ],
)
def test_what_looks_like_a_label_but_is_the_message(line: str) -> None:
    assert parse(line).body == line


def test_a_task_label_is_a_prefix_only_where_a_line_or_a_layer_starts() -> None:
    assert parse("[2025-01-01 10:00:00] node-1: KeyError: 'x'").body == "KeyError: 'x'"
    # After indentation it is code or a listing (a Rust backtrace's frame number).
    assert parse("    0: rust_begin_unwind").body == "    0: rust_begin_unwind"


def test_a_traceback_whose_line_breaks_a_paste_lost_states_its_exception() -> None:
    flat = (
        'config, ) [rank0]: ^^^^^^ [rank0]: File "/x/worker.py", line 203, in load_model [rank0]: self.load() '
        "[rank0]: RuntimeError: HIP error: invalid device function [rank0]: HIP kernel errors might be "
        "asynchronously reported at some other API call"
    )
    assert parse(flat).body == "RuntimeError: HIP error: invalid device function"
    # A line with a rank tag or two inside is an ordinary message.
    line = "loaded [rank0]: ok and [rank1]: ValueError: x"
    assert parse(line).body == line


def test_an_exception_after_a_frame_on_the_same_line_is_the_message() -> None:
    flat = (
        "ray.exceptions.RayTaskError(ValueError): ray::W.init() (pid=1, ip=10.0.0.1) "
        'File "/x/y.py", line 3, in f ValueError: The max seq len (32768) is larger than the KV cache (16384).'
    )
    assert parse(flat).body == "ValueError: The max seq len (32768) is larger than the KV cache (16384)."
    # A frame alone, or a frame and its code, stays what it is.
    frame = '  File "/x/y.py", line 3, in f'
    assert parse(frame).body == frame
    code = 'File "/x/y.py", line 3, in f raise ValueError(msg)'
    assert parse(code).body == code
