"""Single-line judgements used live (phase markers, fatal lines) and the host-side grep of huge logs."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from orchestrator.harvest.evidence import EvidenceBuilder
from orchestrator.harvest.needles import HOST_GREP_REGEX
from orchestrator.harvest.prefilter import PREFILTER, Prefilter
from orchestrator.knowledge.fatal import is_fatal_line
from orchestrator.knowledge.markers import MARKERS, phase_of_line
from orchestrator.knowledge.signatures import SIGNATURES
from orchestrator.model import Phase
from tests.paths import CRASH_LOGS, require_fixtures

require_fixtures()

TS = "[2025-05-09 19:11:16 TP0] "


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        ("[2025-05-09 19:11:15] server_args=ServerArgs(model_path='/m')", Phase.IMPORT),
        (TS + "Init torch distributed begin.", Phase.MODEL_LOAD),
        ("INFO 05-03 20:21:10 [parallel_state.py:1004] rank 3 in world size 4 is assigned as DP rank 0, PP rank 0, "
         "TP rank 3", Phase.MODEL_LOAD),
        (TS + "Load weight begin. avail mem=94.02 GB", Phase.MODEL_LOAD),
        (TS + "Load weight end. type=X, dtype=torch.bfloat16, avail mem=44 GB, mem usage=50 GB.", Phase.MEMORY_ALLOC),
        (TS + "KV Cache is allocated. #tokens: 903439, K size: 16.2 GB", Phase.MEMORY_ALLOC),
        (
            TS + "Capture cuda graph begin. This can take up to several minutes. avail mem=12 GB",
            Phase.CUDA_GRAPH_CAPTURE,
        ),
        ("Capturing batches (bs=1 avail_mem=37.08 GB): 100%|####| 52/52", Phase.CUDA_GRAPH_CAPTURE),
        (TS + "Capture cuda graph end. Time elapsed: 5.92 s.", Phase.WARMUP),
        (
            "[2025-05-09 19:11:16] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
            Phase.WARMUP,
        ),
        ("[2025-05-09 19:11:16] The server is fired up and ready to roll!", Phase.READY),
        ("INFO 01-01 00:00:00 model_runner.py:1] Loading model weights took 14.9888 GB", Phase.MEMORY_ALLOC),
        (TS + "Decode batch. #running-req: 36, #token: 14473", None),
        ("RuntimeError: NCCL error", None),
    ],
)
def test_phase_of_line(line: str, phase: Phase | None) -> None:
    assert phase_of_line(line) is phase


def test_markers_are_in_launch_order() -> None:
    orders = [m.phase.order for m in MARKERS]
    assert orders == sorted(orders)


@pytest.mark.parametrize(
    "line",
    [
        "[2025-04-22 15:12:46 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "[2025-04-22 15:12:46] Received sigquit from a child process. It usually means the child failed.",
        "Killed",
        "/bin/sh: line 1: 4242 Killed                  python3 -m sglang.launch_server",
        "Fatal Python error: Segmentation fault",
        "Capturing batches 96%|###| 22/23 [host:1:0:1] Caught signal 11 (Segmentation fault: address not mapped)",
        "torch.AcceleratorError: CUDA error: device-side assert triggered",
        "[2025-10-22 10:29:28] Initialization failed. warmup error: Traceback (most recent call last):",
        "sglang serve: error: unrecognized arguments: --bogus 1",
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
        "(EngineCore_DP0 pid=1) ERROR 09-27 11:31:49 [core.py:1] EngineCore failed to start.",
    ],
)
def test_fatal_lines(line: str) -> None:
    assert is_fatal_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "[2025-05-09 19:11:16 TP0] Decode batch. #running-req: 36, #token: 14473, gen throughput (token/s): 2283.73",
        'INFO:     127.0.0.1:55504 - "GET / HTTP/1.1" 404 Not Found',
        "[2025-11-30 11:18:06] Endpoint '/get_model_info' is deprecated and will be removed in a future version.",
        "Traceback (most recent call last):",
        "[2025-05-09 19:11:16] Killing local vLLM worker processes",
        "WARNING: destroy_process_group() was not called before program exit",
    ],
)
def test_not_fatal_lines(line: str) -> None:
    assert not is_fatal_line(line)


def test_every_signature_example_and_marker_passes_the_prefilter() -> None:
    for sig in SIGNATURES:
        assert PREFILTER.interesting(sig.example), sig.id
    for marker in MARKERS:
        assert PREFILTER.interesting(f"[2025-05-09 19:11:16] {marker.needle} ..."), marker.name


def test_prefilter_skips_the_bulk_lines_of_a_huge_log() -> None:
    bulk = [
        "[2025-05-09 19:11:16 TP3] Decode batch. #running-req: 36, #token: 14473, token usage: 0.03, "
        "cuda graph: True, gen throughput (token/s): 2283.73, #queue-req: 0",
        "[2025-05-09 19:11:16 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00",
        '[2025-05-09 19:11:16] INFO:     127.0.0.1:41234 - "POST /generate HTTP/1.1" 200 OK',
    ]
    assert not any(PREFILTER.interesting(line) for line in bulk)


def test_cursor_finds_needles_in_order_across_both_searches() -> None:
    pre = Prefilter(("Traceback", "error"), lower=("error",))
    buf = b"ok\nan error here\nok\nTraceback (most\n"
    cursor = pre.cursor(buf, len(buf))
    first = cursor.next_hit(0)
    second = cursor.next_hit(buf.index(b"\n", first) + 1)
    assert (buf[first : first + 5], buf[second : second + 9]) == (b"error", b"Traceback")
    assert cursor.next_hit(len(buf) - 1) == -1


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
def test_host_grep_regex_keeps_every_line_the_classifier_uses() -> None:
    for log in sorted(CRASH_LOGS.glob("*.log")):
        done = subprocess.run(
            ["grep", "-a", "-n", "-E", "-e", HOST_GREP_REGEX, str(log)],
            capture_output=True,
            check=False,
            env={"LC_ALL": "C"},
        )
        assert done.returncode in (0, 1), done.stderr
        grepped = {int(line.split(b":", 1)[0]) for line in done.stdout.splitlines()}
        builder = EvidenceBuilder()
        builder.feed(log.read_bytes())
        ev = builder.finish()
        used = {h.line.line_no for h in ev.hits} | {m.line.line_no for m in ev.markers}
        used |= {w.line_no for w in ev.warnings}
        assert used <= grepped, (log.name, sorted(used - grepped))
