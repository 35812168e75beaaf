"""Benchmark `orchestrator classify` on a realistic 1 GB SGLang log: wall time and peak memory.

Writes the log to a temporary directory (an 8-rank startup with warnings and tqdm redraws, then decode,
prefill and access-log lines from several ranks with a periodic warning, then a NaN crash near the end
with its kernel asserts, traceback and follow-ups), classifies it with the CLI in a child process (the
same code path users run), and prints `seconds: X` and `peak_rss_mb: Y` (the child's ru_maxrss).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 30.0
TARGET_RSS_MB = 200.0
RANKS = 8
_BLOCK_LINES = 8000

_STARTUP = [
    "/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py:71: UserWarning: 'python -m "
    "sglang.launch_server' is still supported, but 'sglang serve' is the recommended entrypoint.",
    "  warnings.warn(",
    "[{ts}] server_args=ServerArgs(model_path='/models/GLM-5-NVFP4', tokenizer_path='/models/GLM-5-NVFP4', "
    "tp_size=8, attention_backend=None, kv_cache_dtype='auto', fp8_gemm_runner_backend='auto', "
    "mem_fraction_static=0.85, port=30000, host='127.0.0.1', sampling_backend=None, cuda_graph_max_bs=256)",
    "[{ts}] Attention backend not specified. Use flashinfer backend by default.",
    "[{ts}] Set DSA backends for fp8_e4m3 KV Cache: prefill=flashmla_auto, decode=flashmla_kv.",
    "[{ts}] DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0. This might cause accuracy "
    "degradation on Blackwell.",
]
_RANK_STARTUP = [
    "[{ts} TP{r}] Init torch distributed begin.",
    "[{ts} TP{r}] Init torch distributed ends. mem usage=0.59 GB",
    "[{ts} TP{r}] Load weight begin. avail mem=94.02 GB",
    "[{ts} TP{r}] Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem=44.10 GB, "
    "mem usage=49.92 GB.",
    "[{ts} TP{r}] Using KV cache dtype: torch.float8_e4m3fn",
    "[{ts} TP{r}] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 903439, K size: 16.2 GB",
    "[{ts} TP{r}] Memory pool end. avail mem=12.31 GB",
    "[{ts} TP{r}] Capture cuda graph begin. This can take up to several minutes. avail mem=12.31 GB",
]
_SERVING = [
    "[{ts} TP{r}] Decode batch. #running-req: 36, #token: 14473, token usage: 0.03, cuda graph: True, "
    "gen throughput (token/s): 2283.73, #queue-req: 0",
    "[{ts} TP{r}] Decode batch. #running-req: 35, #token: 14102, token usage: 0.03, cuda graph: True, "
    "gen throughput (token/s): 2251.10, #queue-req: 1",
    "[{ts} TP{r}] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 128, token usage: 0.03, "
    "#running-req: 35, #queue-req: 0",
    '[{ts}] INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]
_CRASH = [
    "/pytorch/aten/src/ATen/native/cuda/MultinomialKernel.cu:112: binarySearchForMultinomial: block: [0,31,0], "
    "thread: [{t},0,0] Assertion `cumdist[size - 1] > static_cast<scalar_t>(0)` failed.",
]
_TRACEBACK = [
    "[{ts} TP2] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2871, in '
    "run_scheduler_process",
    "    scheduler.event_loop_overlap()",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 1012, in '
    "event_loop_overlap",
    "    batch_result = self.run_batch(batch)",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/sampler.py", line 318, in '
    "top_k_top_p_min_p_sampling_from_probs_torch",
    "    sampled_index = torch.multinomial(probs_sort, num_samples=1)",
    "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
    "",
    "[{ts}] Received sigquit from a child process. It usually means the child failed.",
    "Killed",
]


def _fill(lines: list[str], ts: str, **extra: object) -> str:
    return "".join(line.format(ts=ts, **extra) + "\n" for line in lines)


def _stamp(second: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_767_000_000 + second))


def write_log(path: Path, size: int) -> None:
    """A log of about `size` bytes, in SGLang's format."""
    with path.open("w", encoding="utf-8") as f:
        f.write(_fill(_STARTUP, _stamp(0)))
        for r in range(RANKS):
            f.write(_fill(_RANK_STARTUP, _stamp(1), r=r))
        bars = "".join(
            f"Capturing batches (bs={bs} avail_mem=11.9 GB): {i * 4}%|{'#' * i}|\r"
            for i, bs in enumerate(range(256, 0, -8))
        )
        f.write(bars + "Capturing batches (bs=1 avail_mem=11.80 GB): 100%|##########| 32/32\n")
        f.write(
            _fill(
                [
                    "[{ts} TP0] Capture cuda graph end. Time elapsed: 30.2 s. mem usage=0.5 GB. avail mem=11.8 GB.",
                    "[{ts}] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
                    "[{ts}] The server is fired up and ready to roll!",
                ],
                _stamp(2),
            )
        )
        block = "".join(
            _SERVING[i % len(_SERVING)].replace("{r}", str(i % RANKS)).replace("{port}", str(40000 + i % 9000)) + "\n"
            for i in range(_BLOCK_LINES)
        )
        block += (
            "[{ts} TP3] Token indices sequence length is longer than the specified maximum sequence length "
            "for this model (140000 > 131072). Running this sequence through the model will result in "
            "indexing errors\n"
        )
        second = 3
        while f.tell() < size - 64 * 1024:
            f.write(block.replace("{ts}", _stamp(second)))
            second += 1
        f.write("".join(_CRASH[0].format(t=t) + "\n" for t in range(32)))
        f.write(_fill(_TRACEBACK, _stamp(second)))
        f.write(block.replace("{ts}", _stamp(second))[: 32 * 1024].rsplit("\n", 1)[0] + "\n")


def main() -> int:
    """Generate, classify in a child process, report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_classify.") as tmp:
        log = Path(tmp) / "server.log"
        write_log(log, args.size_mb << 20)
        size_mb = log.stat().st_size / (1 << 20)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "classify", "--json", str(log)],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return 1
    result = json.loads(done.stdout)
    print(f"log_mb: {size_mb:.0f}")
    print(f"category: {result['category']}  phase: {result['phase']}")
    print(f"root_cause_line: {result['root_cause_line']}")
    print(f"warnings: {len(result['warnings'])}  lines: {result['lines']}")
    print(f"seconds: {seconds:.2f}")
    print(f"peak_rss_mb: {peak_mb:.1f}")
    ok = result["category"] == "nan_in_probs" and seconds < TARGET_SECONDS and peak_mb < TARGET_RSS_MB
    print(f"targets (< {TARGET_SECONDS:.0f} s, < {TARGET_RSS_MB:.0f} MB, nan_in_probs): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
