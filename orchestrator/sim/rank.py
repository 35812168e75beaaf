"""One scheduler rank of the simulated server: a child process holding one GPU, like SGLang's schedulers.

Forked by the main process (ranks.py) with a socketpair for control. It walks through the startup phases,
logging SGLang's markers with its ` TPi` tag, holds its GPU in the state directory, says `ready`, then waits
for commands. A failure prints the kind's text as `Scheduler hit an exception: Traceback ...` and sends
SIGQUIT to the main process, as SGLang's `run_scheduler_process` does. When the main process goes away the
rank follows it (SGLang sets PR_SET_PDEATHSIG), unless it is meant to linger after a shutdown that hangs.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any, NoReturn

from orchestrator.sim import gpu_state
from orchestrator.sim.failures import SCHEDULER_EXCEPTION, Context, scheduler_failure
from orchestrator.sim.logfmt import LogWriter, fmt, rank_tag
from orchestrator.sim.memory import CONTEXT_GIB, MemoryPlan
from orchestrator.sim.scenario import Timing

STARTUP_PHASES = ("import", "model_load", "memory_alloc", "cuda_graph_capture")
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGQUIT})


@dataclass(frozen=True)
class RankConfig:
    """Everything one rank needs to play its part."""

    rank: int
    tp_size: int
    gpu: int | None
    """The physical GPU it holds (None: nothing visible for it; it fails before holding anything)."""
    server_pid: int
    state_dir: str
    timing: Timing
    began: float
    """time.monotonic() when the server's process started: each startup phase ends at its offset from then
    in the scenario's timing, so the simulator's own work (its imports, the forks, the log lines) is absorbed
    by the phases, as a real server's interpreter start and imports are part of its import phase."""
    memory: MemoryPlan
    arch: str
    context_len: int
    cuda_graph_bs: list[int]
    """Empty when CUDA graphs are disabled."""
    chunked_prefill_size: int
    failure: StartupFailure | None
    linger: bool = False
    slow: dict[str, float] = field(default_factory=dict)
    """Startup phase -> how many times its timing it takes (printing its progress throughout)."""


@dataclass(frozen=True)
class StartupFailure:
    """How startup ends: at which phase, how, which rank reports it (the others stall), and what it says."""

    phase: str
    kind: str
    rank: int
    context: Context
    after_progress: float | None = None
    """A hang: the share of the phase's progress printed before it stops."""


class Rank:
    """The running rank."""

    def __init__(self, config: RankConfig, control: socket.socket) -> None:
        self.config = config
        self.control = control
        self.memory = config.memory
        self.log = LogWriter(rank_tag(config.rank, config.tp_size))
        self.state = config.state_dir
        self._send_lock = threading.Lock()
        self._schedule = 0.0
        """Seconds of the startup's schedule passed so far, from `config.began`."""

    def run(self, commands: Iterable[str]) -> NoReturn:
        """Start up, report ready, then serve commands until told to fail or the main process goes."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN if self.config.linger else self._on_sigterm)
        # Forked with stop signals blocked (ranks.py); now that they are handled, let them in.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        self._hold(CONTEXT_GIB)
        threading.Thread(target=self._read_commands, args=(commands,), daemon=True).start()
        self._startup()
        self._send({"event": "ready"})
        _block()

    def _startup(self) -> None:
        timing, mem, log = self.config.timing, self.memory, self.log
        self._phase_for(self._slowed("import", timing.import_s))
        self._checkpoint("import")
        log.info("Init torch distributed begin.")
        self._phase_for(timing.init_s)
        log.info(f"Init torch distributed ends. mem usage={CONTEXT_GIB:.2f} GB")
        avail = mem.total_gib - CONTEXT_GIB
        log.info(f"Load weight begin. avail mem={avail:.2f} GB")
        self._progress("model_load", self._slowed("model_load", timing.load_weights_s), _shard_bar)
        self._checkpoint("model_load")
        self._hold(CONTEXT_GIB + mem.weights_gib)
        avail -= mem.weights_gib
        log.info(
            f"Load weight end. type={self.config.arch}, dtype=torch.bfloat16, avail mem={avail:.2f} GB, "
            f"mem usage={mem.weights_gib:.2f} GB."
        )
        self._phase_for(self._slowed("memory_alloc", timing.memory_alloc_s))
        self._checkpoint("memory_alloc")
        self._hold(CONTEXT_GIB + mem.weights_gib + mem.kv_gib)
        avail -= mem.kv_gib
        log.info(
            f"Using KV cache dtype: {mem.kv_dtype}",
            f"KV Cache is allocated. #tokens: {mem.tokens}, K size: {mem.kv_gib / 2:.2f} GB, "
            f"V size: {mem.kv_gib / 2:.2f} GB",
            f"Memory pool end. avail mem={avail:.2f} GB",
        )
        if self.config.cuda_graph_bs:
            self._capture_graphs(avail)
            avail -= mem.graph_gib
        if self.config.rank == 0:
            log.info(
                f"max_total_num_tokens={mem.tokens}, chunked_prefill_size={self.config.chunked_prefill_size}, "
                f"max_prefill_tokens=16384, max_running_requests={min(4096, max(1, mem.tokens // 256))}, "
                f"context_len={self.config.context_len}, available_gpu_mem={avail:.2f} GB"
            )

    def _capture_graphs(self, avail: float) -> None:
        sizes = self.config.cuda_graph_bs
        self.log.info(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB")
        self.log.info(f"Capture cuda graph bs {sizes}")
        seconds = self._slowed("cuda_graph_capture", self.config.timing.capture_cuda_graph_s)
        left = avail - self.memory.graph_gib
        biggest_first = sorted(sizes, reverse=True)

        def capture_bar(done: int, total: int, elapsed: float) -> str:
            bs = biggest_first[min(done, total - 1)] if total else 1
            return _tqdm(f"Capturing batches (bs={bs} avail_mem={left:.2f} GB)", done, total, elapsed)

        self._progress("cuda_graph_capture", seconds, capture_bar, steps=len(sizes))
        self._checkpoint("cuda_graph_capture")
        self._hold(CONTEXT_GIB + self.memory.weights_gib + self.memory.kv_gib + self.memory.graph_gib)
        self.log.info(
            f"Capture cuda graph end. Time elapsed: {seconds:.2f} s. mem usage={self.memory.graph_gib:.2f} GB. "
            f"avail mem={left:.2f} GB."
        )

    def _slowed(self, phase: str, seconds: float) -> float:
        return seconds * self.config.slow.get(phase, 1.0)

    def _progress(self, phase: str, seconds: float, bar: Callable[[int, int, float], str], steps: int = 0) -> None:
        """Let the phase's `seconds` pass in steps, rank 0 printing its tqdm bar at each, as SGLang's loaders do.

        A bar line at least every second of the phase (a 400B checkpoint has ~160 shards), so a phase made slow
        shows progress throughout; a hang with `after_progress` prints that share of the bar, then nothing.
        """
        steps = steps or max(8, min(200, math.ceil(seconds)))
        failure = self.config.failure
        stop = None
        if failure is not None and failure.phase == phase and failure.kind == "hang":
            stop = failure.after_progress
        started = self._schedule
        for done in range(steps + 1):
            if stop is not None and done > stop * steps:
                _block()  # stuck: no line, no bar moving, until killed
            if done:
                self._phase_for(seconds / steps)
            if self.config.rank == 0:
                self.log.raw(bar(done, steps, self._schedule - started))

    def _phase_for(self, seconds: float) -> None:
        """Let the next `seconds` of the startup's schedule pass (less when this rank started late, never more)."""
        self._schedule += seconds
        time.sleep(max(0.0, self.config.began + self._schedule - time.monotonic()))

    def _checkpoint(self, phase: str) -> None:
        failure = self.config.failure
        if failure is None or failure.phase != phase:
            return
        if failure.rank != self.config.rank:
            _block()  # the other ranks wait in a collective that never completes
        self.fail(failure.kind, phase, failure.context)

    def fail(self, kind: str, phase: str, ctx: Context) -> NoReturn:
        """Die the way `kind` dies; the main process brings the rest of the server down."""
        if kind == "hang":
            _block()
        if kind == "process_killed":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "unknown":
            self._exit(1)
        text = scheduler_failure(kind, phase, replace(ctx, pid=os.getpid()))
        head = fmt(f"{SCHEDULER_EXCEPTION}{text.traceback[0]}", self.log.tag)
        self.log.raw(*text.before, head, *text.traceback[1:])
        try:
            os.kill(self.config.server_pid, signal.SIGQUIT)
        except ProcessLookupError:
            self._exit(1)
        time.sleep(10)  # the main process kills every rank on SIGQUIT; this only bounds a lost signal
        self._exit(1)

    def _read_commands(self, commands: Iterable[str]) -> None:
        try:
            for line in commands:
                command = json.loads(line)
                if command.get("op") == "fail":
                    self.fail(command["kind"], command["phase"], Context.from_dict(command["ctx"]))
        except OSError:
            pass  # the main process is gone, which is what end-of-file means too
        if not self.config.linger:
            self._exit(0)

    def _send(self, message: dict[str, Any]) -> None:
        with self._send_lock:
            try:
                self.control.sendall(json.dumps(message).encode() + b"\n")
            except OSError:
                self._exit(0)

    def _hold(self, gib: float) -> None:
        if self.config.gpu is None:
            return
        name = f"sglang::scheduler_TP{self.config.rank}"
        gpu_state.hold(self.state, {self.config.gpu: int(gib * 1024)}, server_pid=self.config.server_pid, name=name)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self._exit(0)

    def _exit(self, code: int) -> NoReturn:
        gpu_state.release(self.state)
        os._exit(code)


def _shard_bar(done: int, total: int, elapsed: float) -> str:
    return _tqdm("Loading safetensors checkpoint shards", done, total, elapsed, completed=True)


def _tqdm(label: str, done: int, total: int, elapsed: float, *, completed: bool = False) -> str:
    """A tqdm line as SGLang's logs show it: `label: 47% Completed | 7/15 [00:20<00:23,  2.93s/it]`."""
    percent = int(100 * done / total) if total else 100
    rate = f"{elapsed / done:5.2f}s/it" if done else "?it/s"
    left = elapsed / done * (total - done) if done else None

    def clock(seconds: float | None) -> str:
        return "?" if seconds is None else f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"

    if completed:
        return f"{label}: {percent:3d}% Completed | {done}/{total} [{clock(elapsed)}<{clock(left)}, {rate}]"
    bar = "\u2588" * (percent * 40 // 100)
    return f"{label}: {percent:3d}%|{bar:<40}| {done}/{total} [{clock(elapsed)}<{clock(left)}, {rate}]"


def _block() -> NoReturn:
    while True:
        time.sleep(3600)


def run_rank(config: RankConfig, control: socket.socket) -> NoReturn:
    """Run one rank in this (freshly forked) process; it ends only by exiting."""
    # The main process handles Ctrl-C for the whole server and stops the ranks itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    Rank(config, control).run(control.makefile("r", encoding="utf-8"))
