"""The short standard load on a launch whose probes all passed: how fast it serves, when it serves right.

Timed as `sglang.bench_serving` times it, from the server's own stream: each request is a streamed chat
completion, its TTFT the arrival of the first content chunk, its inter-token latencies the gaps between
the chunks that follow, its output tokens the server's `usage` (else one per chunk). `requests` requests
go out `concurrency` at a time, greedy, asking exactly `output_len` tokens with `ignore_eos` (SGLang's
extension of the OpenAI body), and the whole set is repeated `repeat` times: the median is the figure,
the spread over the repeats the noise band.

A number is only kept when it is true (speed.py stores none otherwise, with why): every request of
every repeat answered, every answer had the tokens asked (a load that lost requests or got short
answers measures a different load), and the known-answer prompt of the greedy probe, asked again
within each repeat, still gets its known answer (a kernel that is fast because it is wrong is not fast).

One load at a time per host: a figure measured while a sibling cell's load runs on the same machine would
measure the two sharing its CPUs and PCIe rather than the cell, and eight loads side by side (a packed
host) would measure how fast this process reads their streams rather than how fast each server writes them.
A launch whose probes passed while another cell's load runs on its host waits for it (`waited_s`, not part of any
figure). The hosts of a pool load at once: one load per host is a few streams each, and no machine is shared.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import ProbeError
from orchestrator.probe.answers import known_answer_problem
from orchestrator.probe.client import ProbeClient
from orchestrator.probe.speed import RepeatFigures, measured, not_measured
from orchestrator.probe.wire import ChatReply, excerpt
from orchestrator.settings import LoadSettings, ProbeSettings

_HOST_LOCKS: dict[str, threading.Lock] = {}
"""Host -> the lock its loads take, one at a time (made on first use; a sweep names a handful of hosts)."""
_HOST_LOCKS_GUARD = threading.Lock()

_FILLER = (
    "measure", "serving", "speed", "with", "a", "steady", "stream", "of", "requests", "that", "ask", "for", "long",
    "answers", "about", "distant", "oceans", "mountains", "rivers", "cities", "markets", "libraries", "engines",
    "gardens", "forests", "islands", "bridges", "harbours", "and", "stars",
)  # fmt: skip


def load_prompt(index: int, words: int) -> str:
    """A prompt of about `words` tokens, different for every request (no prefix cache shared between them)."""
    body = [_FILLER[(index * 7 + i) % len(_FILLER)] for i in range(max(1, words - 4))]
    return f"Request {index}: " + " ".join(body) + ". Continue."


@dataclass(frozen=True)
class _Answer:
    """One load request's outcome: the reply, or the error that ended it."""

    reply: ChatReply | None
    error: ProbeError | None
    known: bool
    """Whether this request asked the greedy probe's known-answer prompt."""
    sent: bool = True
    """False for a request not sent because an earlier one of its repeat failed (a dead server costs one timeout)."""


class _Load:
    """One load's requests: what each sends, and what makes a repeat's figures unfit to keep."""

    def __init__(
        self, client: ProbeClient, probes: ProbeSettings, load: LoadSettings, timeout: float, model: str
    ) -> None:
        self.client, self.probes, self.load, self.timeout, self.model = client, probes, load, timeout, model
        self.failed = threading.Event()

    def body(self, index: int) -> tuple[str, bool]:
        # The first request of each repeat asks the greedy probe's prompt again: its answer is known.
        if index == 0:
            return self.probes.greedy.prompt, True
        return load_prompt(index, self.load.input_len), False

    def send(self, index: int) -> _Answer:
        prompt, known = self.body(index)
        if self.failed.is_set():
            return _Answer(None, None, known, sent=False)
        try:
            reply = self.client.chat_stream(
                [{"role": "user", "content": prompt}],
                model=self.model,
                temperature=0.0,
                top_p=1.0,
                max_tokens=self.load.output_len,
                timeout=self.timeout,
                extra={"ignore_eos": True},
            )
        except ProbeError as exc:
            self.failed.set()
            return _Answer(None, exc, known)
        return _Answer(reply, None, known)

    def problem(self, answers: list[_Answer], repeat: int) -> str | None:
        """Why this repeat's figures cannot be kept, or None."""
        where = f"repeat {repeat + 1} of {self.load.repeat}"
        total = len(answers)
        failed = [a.error for a in answers if a.error is not None]
        if failed:
            unsent = sum(not a.sent for a in answers)
            left = f", {unsent} not sent after it" if unsent else ""
            return f"{len(failed)} of {total} load requests failed ({where}{left}); first: {failed[0]}"
        asked = self.load.output_len
        counts = [a.reply.completion_tokens or 0 for a in answers if a.reply is not None]
        short = [n for n in counts if n != asked]
        if short:
            return (
                f"{len(short)} of {total} answers did not have the {asked} tokens asked ({where}); "
                f"got {sorted(set(short))[:5]}"
            )
        for answer in answers:
            if answer.known and answer.reply is not None:
                wrong = known_answer_problem(answer.reply.text, self.probes.greedy.expect_any)
                if wrong is not None:
                    return f"the greedy answer under load disagrees with the correctness probe ({where}): {wrong}"
        return None


def _figures(answers: list[_Answer], span_s: float) -> RepeatFigures:
    replies = [a.reply for a in answers if a.reply is not None]
    ttfts = tuple(r.chunk_times[0] for r in replies if r.chunk_times)
    itls = tuple(b - a for r in replies for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False))
    tokens = sum(r.completion_tokens or 0 for r in replies)
    return RepeatFigures(span_s, len(replies), tokens, ttfts, itls)


def run_load(
    client: ProbeClient,
    probes: ProbeSettings,
    load: LoadSettings,
    *,
    timeout: float,
    host: str = "",
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """Run the load on a ready server that passed its probes; the `speed` object (probe/speed.py).

    It waits for any other load on `host` (the host entry the server runs on) to end first; callers that
    name no host share one lock, the safe side: their loads never overlap.
    """
    asked = clock()
    with host_lock(host):
        began = clock()
        speed = _measure(client, probes, load, timeout, clock)
    return {**speed, "waited_s": round(began - asked, 4)}


def host_lock(host: str) -> threading.Lock:
    """The lock of one host's loads: the same object for every caller that names that host."""
    with _HOST_LOCKS_GUARD:
        return _HOST_LOCKS.setdefault(host, threading.Lock())


def _measure(
    client: ProbeClient, probes: ProbeSettings, load: LoadSettings, timeout: float, clock: Callable[[], float]
) -> dict[str, Any]:
    began = clock()
    spans = 0.0
    settings = load.to_dict()
    try:
        model = probes.model or _served_model(client)
    except ProbeError as exc:
        return not_measured(f"no model to send the load to: {exc}", settings, clock() - began)
    runner = _Load(client, probes, load, timeout, model)
    repeats: list[RepeatFigures] = []
    with ThreadPoolExecutor(max_workers=max(1, load.concurrency), thread_name_prefix="load") as pool:
        for repeat in range(load.repeat):
            started = clock()
            answers = list(pool.map(runner.send, range(load.requests)))
            span = clock() - started
            spans += span
            why = runner.problem(answers, repeat)
            if why is not None:
                # One bad repeat makes every figure of the load doubtful: no number at all.
                return not_measured(excerpt(why, 400), settings, clock() - began - spans)
            repeats.append(_figures(answers, span))
    return measured(repeats, settings, clock() - began - spans)


def _served_model(client: ProbeClient) -> str:
    ids = client.models()
    if not ids:
        raise ProbeError("GET /v1/models lists no model")
    return ids[0]
