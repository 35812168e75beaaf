"""The main process's view of generation: scheduling requests, timing them, and setting off failures.

A serving-phase failure strikes on the first request that meets its condition: greedy_decode on a
temperature-0 request, sampled_decode on temperature > 0, concurrent_decode when two generation requests
are in flight at once, serving on any, `on_request: N` on the N-th; after_decode a little after the first
answer that succeeded. Until the server is ready, requests are its own warm-up and meet only warmup
failures. A crash hands the failure to the scheduler (rank 0), which prints it and takes the server down;
a hang leaves the request, and every later one, waiting forever.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from orchestrator.sim import answers
from orchestrator.sim.failures import HEALTH_CHECK_FAILED
from orchestrator.sim.logfmt import LogWriter
from orchestrator.sim.phases import Phase
from orchestrator.sim.plan import Failure, LaunchPlan
from orchestrator.sim.scenario import Timing

DECODE_LOG_INTERVAL = 40


@dataclass(frozen=True)
class GenRequest:
    """One generation request, whatever endpoint it came through."""

    prompt: str
    temperature: float = 1.0
    max_new_tokens: int = 128
    seed: int | None = None
    ignore_eos: bool = False


class Engine:
    """Runs generation requests against the launch plan."""

    def __init__(self, plan: LaunchPlan, timing: Timing, log: LogWriter, crash: Callable[[Failure], None]) -> None:
        self.plan = plan
        self.timing = timing
        self.log = log
        self.crash = crash
        self.ready = False
        self.stuck = False
        self.last_throughput = 0.0
        self._lock = threading.Lock()
        self._armed = list(plan.serving)
        self._warmup = plan.startup if plan.startup and plan.startup.phase is Phase.WARMUP else None
        self._requests = 0
        self._in_flight = 0
        self._answered = False
        self._health_failure_logged = False
        self._bursts = 0
        self._speed_factor = 1.0
        """This burst's draw of the scenario's `perf.noise` (a burst: requests from idle until idle again)."""
        self.warmup_began: float | None = None
        """time.monotonic() when the warm-up phase began (every rank ready): the server's own warm-up request is
        answered on the scenario's schedule from then, so starting to serve and the request's way in are part of
        the phase, as they are of a real server's."""

    def healthy(self) -> bool:
        """Ready and not stuck: what /health reports. The first check that finds it stuck logs SGLang's line."""
        if self.stuck and not self._health_failure_logged:
            self._health_failure_logged = True
            self.log.info(HEALTH_CHECK_FAILED.format(tic=time.strftime("%H:%M:%S")))
        return self.ready and not self.stuck

    def mark_ready(self) -> None:
        """Warm-up is over; a failure armed for `ready` strikes now."""
        with self._lock:
            self.ready = True
            due = self._take(lambda f: f.phase is Phase.READY)
        if due is not None:
            threading.Thread(target=self._strike, args=(due,), daemon=True).start()

    def generate(self, request: GenRequest, on_piece: Callable[[str], None] | None = None) -> answers.Answer:
        """Answer one request (blocking for its decode time); never returns if a failure strikes."""
        with self._lock:
            external = self.ready
            if external:
                if self._in_flight == 0:
                    self._new_burst()
                self._requests += 1
                self._in_flight += 1
            due = self._due(request, external)
        try:
            if due is not None:
                self._strike(due)
            if self.stuck:
                _block()
            answer = self._decode(request, external, on_piece)
        finally:
            if external:
                with self._lock:
                    self._in_flight -= 1
        if external:
            self._after_answer()
        return answer

    def _new_burst(self) -> None:
        self._bursts += 1
        noise = self.plan.noise
        draw = random.Random(f"{self.plan.noise_seed}:{self._bursts}").uniform(-noise, noise)
        self._speed_factor = 1.0 + draw

    def _token_s(self) -> float:
        """Seconds to the next token of a request: the server's `perf` speed shared by the requests in flight."""
        if self.plan.tok_s is None:
            return self.timing.decode_token_s
        return max(1, self._in_flight) / (self.plan.tok_s * self._speed_factor)

    def _due(self, request: GenRequest, external: bool) -> Failure | None:
        if not external:
            due, self._warmup = self._warmup, None
            # warmup_request_failed never reaches the server: the warm-up client fails on its own.
            return due if due is not None and due.kind != "warmup_request_failed" else None
        return self._take(lambda failure: self._meets(failure, greedy=request.temperature <= 0))

    def _meets(self, failure: Failure, *, greedy: bool) -> bool:
        """Whether the request being admitted sets `failure` off."""
        if failure.on_request is not None:
            return failure.on_request == self._requests
        conditions = {
            Phase.GREEDY_DECODE: greedy,
            Phase.SAMPLED_DECODE: not greedy,
            Phase.CONCURRENT_DECODE: self._in_flight >= 2,
            Phase.SERVING: True,
        }
        return conditions.get(failure.phase, False)

    def _take(self, condition: Callable[[Failure], bool]) -> Failure | None:
        for failure in self._armed:
            if condition(failure):
                self._armed.remove(failure)
                return failure
        return None

    def _after_answer(self) -> None:
        with self._lock:
            first, self._answered = not self._answered, True
            due = self._take(lambda f: f.phase is Phase.AFTER_DECODE and f.on_request is None) if first else None
        if due is not None:
            timer = threading.Timer(self.timing.after_decode_s, self._strike, args=(due,))
            timer.daemon = True
            timer.start()

    def _strike(self, failure: Failure) -> NoReturn:
        if failure.kind == "hang":
            self.stuck = True
        else:
            self.crash(failure)
        _block()

    def _garbage(self, greedy: bool, external: bool) -> bool:
        return self._spoiled(self.plan.garbage, greedy, external)

    def _spoiled(self, phases: frozenset[Phase], greedy: bool, external: bool) -> bool:
        # A garbage or drift rule at a serving phase spoils the answers that phase is about; at any other, all.
        when = {
            Phase.GREEDY_DECODE: external and greedy,
            Phase.SAMPLED_DECODE: external and not greedy,
            Phase.CONCURRENT_DECODE: external and self._in_flight >= 2,
            Phase.AFTER_DECODE: external and self._answered,
        }
        return any(when.get(phase, True) for phase in phases)

    def _decode(self, request: GenRequest, external: bool, on_piece: Callable[[str], None] | None) -> answers.Answer:
        greedy = request.temperature <= 0
        answer = answers.generate(
            request.prompt,
            max_new_tokens=request.max_new_tokens,
            temperature=request.temperature,
            seed=request.seed,
            garbage=self._garbage(greedy, external),
            drift=self._spoiled(self.plan.drift, greedy, external),
            ignore_eos=request.ignore_eos and self.plan.honours_ignore_eos,
        )
        prompt_tokens = answers.count_tokens(request.prompt)
        self.log.info(
            f"Prefill batch. #new-seq: 1, #new-token: {prompt_tokens}, #cached-token: 0, token usage: 0.00, "
            f"#running-req: {max(0, self._in_flight - 1)}, #queue-req: 0, "
        )
        arrived = time.monotonic() if external or self.warmup_began is None else self.warmup_began
        _sleep_until(arrived + self.timing.prefill_s + (0.0 if external else self.timing.warmup_s))
        started = time.monotonic()
        pieces = answers.split_tokens(answer.text)
        due = started
        for count, piece in enumerate(pieces, start=1):
            # Each token is due at its place in a steady decode, so small oversleeps never add up over an answer.
            due += self._token_s() if external else self.timing.decode_token_s
            _sleep_until(due)
            if on_piece is not None:
                on_piece(piece)
            if count % DECODE_LOG_INTERVAL == 0:
                rate = count / max(time.monotonic() - started, 1e-6)
                self.log.info(
                    f"Decode batch. #running-req: {max(1, self._in_flight)}, #token: {prompt_tokens + count}, "
                    f"token usage: 0.00, gen throughput (token/s): {rate:.2f}, #queue-req: 0, "
                )
        self.last_throughput = len(pieces) / max(time.monotonic() - started, 1e-6)
        return answer


def _sleep_until(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))


def _block() -> NoReturn:
    while True:
        time.sleep(3600)
