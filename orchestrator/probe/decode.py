"""Decode probes against a ready server: greedy, sampled, streamed, concurrent, then liveness.

SGLang's own warm-up is greedy (temperature 0, 8 tokens), and greedy decoding never reaches the
sampler's multinomial, where NaN logits crash the server (DESIGN.md, lessons from the incident).
So the probes go further, in this order: `greedy` (known answer), `sampled` (temperature and
top_p, plausible text), `stream`, `concurrent` (a batch of sampled requests at once) and
`alive_after` (the process group and `/health_generate` still fine after a short settle).

By default the first failure ends the run and later probes are not sent: a dead server answers
nothing, and the verdict's phase is where it stopped. A wrong answer stops it too, even with the
server alive, so the result reads "wrong output at greedy_decode" rather than a mix of causes.
`stop_on_failure=False` runs every probe, for diagnosis. An exception from the caller's
`is_alive` (a lost SSH connection) is not caught: that is an infra failure, not the server's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from orchestrator.errors import ProbeError
from orchestrator.model import ProbeResult
from orchestrator.probe.answers import implausibility, known_answer_problem
from orchestrator.probe.client import ProbeClient
from orchestrator.probe.errors import BadAnswer, ProbeTimeout
from orchestrator.probe.wire import ChatReply, GenerateReply, excerpt
from orchestrator.settings import Deadlines, ProbeSettings

PROBE_ORDER = ("greedy", "sampled", "stream", "concurrent", "alive_after")
MIN_SAMPLED_TOKENS = 32
"""Sampled probes ask for at least this many tokens: enough decode steps for the sampler to fail."""
CHAT = "/v1/chat/completions"


def run_probes(
    client: ProbeClient,
    settings: ProbeSettings,
    *,
    is_alive: Callable[[], bool],
    deadlines: Deadlines,
    sleep: Callable[[float], None] = time.sleep,
    stop_on_failure: bool = True,
    on_probe: Callable[[str], None] | None = None,
) -> tuple[ProbeResult, ...]:
    """Run the probes in PROBE_ORDER; by default stop after the first that fails."""
    probes = _Probes(client, settings, is_alive=is_alive, timeout=deadlines.probe, sleep=sleep)
    steps: dict[str, Callable[[], ProbeResult]] = {
        "greedy": probes.greedy,
        "sampled": probes.sampled,
        "stream": probes.stream,
        "concurrent": probes.concurrent,
        "alive_after": probes.alive_after,
    }
    results: list[ProbeResult] = []
    for name in PROBE_ORDER:
        if on_probe is not None:
            on_probe(name)
        results.append(steps[name]())
        if stop_on_failure and not results[-1].ok:
            break
    return tuple(results)


def _failed(name: str, request: dict[str, Any], exc: ProbeError, latency_s: float) -> ProbeResult:
    timed_out = isinstance(exc, ProbeTimeout)
    return ProbeResult(name, ok=False, latency_s=latency_s, error=str(exc), request=request, timed_out=timed_out)


def _judged(name: str, request: dict[str, Any], reply: GenerateReply | ChatReply, problem: str | None) -> ProbeResult:
    return ProbeResult(
        name,
        ok=problem is None,
        latency_s=reply.latency_s,
        tokens=reply.completion_tokens,
        text_excerpt=excerpt(reply.text),
        error=problem,
        request=request,
        wrong_answer=problem is not None,
    )


class _Probes:
    """The five probes of one run, sharing the client, the settings and the chat model name."""

    def __init__(
        self,
        client: ProbeClient,
        settings: ProbeSettings,
        *,
        is_alive: Callable[[], bool],
        timeout: float,
        sleep: Callable[[float], None],
    ) -> None:
        self.client = client
        self.settings = settings
        self.is_alive = is_alive
        self.timeout = timeout
        self.sleep = sleep
        self._model = settings.model

    def greedy(self) -> ProbeResult:
        """`/generate` at temperature 0; the answer must contain the known word."""
        known = self.settings.greedy
        params = {"temperature": 0, "max_new_tokens": self.settings.greedy_max_tokens}
        request = {"endpoint": "/generate", "text": known.prompt, "sampling_params": params}
        started = time.perf_counter()
        try:
            reply = self.client.generate(known.prompt, params, timeout=self.timeout)
        except ProbeError as exc:
            return _failed("greedy", request, exc, time.perf_counter() - started)
        return _judged("greedy", request, reply, known_answer_problem(reply.text, known.expect_any))

    def sampled(self) -> ProbeResult:
        """A sampled chat completion; the answer must look like text."""
        return self._chat_probe("sampled", self.settings.sampled_prompt, stream=False)

    def stream(self) -> ProbeResult:
        """A sampled, streamed chat completion read to `[DONE]`; the answer must look like text."""
        return self._chat_probe("stream", self.settings.stream_prompt, stream=True)

    def concurrent(self) -> ProbeResult:
        """`concurrent_requests` sampled chat completions at once; all must answer plausibly."""
        count = self.settings.concurrent_requests
        started = time.perf_counter()
        try:
            body = self._chat_body(self.settings.sampled_prompt, self.settings.concurrent_max_tokens)
        except ProbeError as exc:
            return _failed("concurrent", {"endpoint": "/v1/models"}, exc, time.perf_counter() - started)
        request = {"endpoint": CHAT, "concurrent": count, **body}
        with ThreadPoolExecutor(max_workers=max(1, count), thread_name_prefix="probe") as pool:
            outcomes = list(pool.map(lambda _: self._chat_or_error(body), range(count)))
        latency = time.perf_counter() - started
        errors = [o for o in outcomes if isinstance(o, ProbeError)]
        replies = [o for o in outcomes if isinstance(o, ChatReply)]
        problems = [p for p in (implausibility(r.text) for r in replies) if p is not None]
        error = None
        if errors:
            error = f"{len(errors)} of {count} concurrent requests failed; first: {errors[0]}"
        elif problems:
            error = f"{len(problems)} of {count} concurrent answers implausible; first: {problems[0]}"
        return ProbeResult(
            "concurrent",
            ok=error is None,
            latency_s=latency,
            tokens=sum(r.completion_tokens or 0 for r in replies),
            tokens_each=tuple(r.completion_tokens or 0 for r in replies),
            text_excerpt=excerpt(replies[0].text) if replies else None,
            error=error,
            request=request,
            timed_out=any(isinstance(e, ProbeTimeout) for e in errors),
            wrong_answer=not errors and bool(problems),
        )

    def alive_after(self) -> ProbeResult:
        """After `settle_s`, the process group alive and `/health_generate` 200."""
        request = {"endpoint": "/health_generate", "settle_s": self.settings.settle_s}
        # A crash caused by the answers (a device-side assert) can land just after the last reply.
        self.sleep(self.settings.settle_s)
        started = time.perf_counter()
        error = None
        if not self.is_alive():
            error = "the server's process group exited after answering"
        else:
            status = self.client.health_generate(timeout=self.timeout)
            if status != 200:
                error = f"/health_generate answered {status}" if status else "/health_generate: no answer"
        return ProbeResult(
            "alive_after", ok=error is None, latency_s=time.perf_counter() - started, error=error, request=request
        )

    def _chat_probe(self, name: str, prompt: str, *, stream: bool) -> ProbeResult:
        started = time.perf_counter()
        try:
            body = self._chat_body(prompt, self.settings.sampled_max_tokens)
        except ProbeError as exc:
            return _failed(name, {"endpoint": "/v1/models"}, exc, time.perf_counter() - started)
        request = {"endpoint": CHAT, "stream": stream, **body}
        call = self.client.chat_stream if stream else self.client.chat
        try:
            reply = call(**body, timeout=self.timeout)
        except ProbeError as exc:
            return _failed(name, request, exc, time.perf_counter() - started)
        return _judged(name, request, reply, implausibility(reply.text))

    def _chat_body(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        return {
            "messages": [{"role": "user", "content": prompt}],
            "model": self._model_name(),
            "temperature": self.settings.sampled_temperature,
            "top_p": self.settings.sampled_top_p,
            "max_tokens": max(MIN_SAMPLED_TOKENS, max_tokens),
        }

    def _chat_or_error(self, body: dict[str, Any]) -> ChatReply | ProbeError:
        try:
            return self.client.chat(**body, timeout=self.timeout)
        except ProbeError as exc:
            return exc

    def _model_name(self) -> str:
        if self._model is None:
            ids = self.client.models()
            if not ids:
                raise BadAnswer("GET /v1/models: lists no model to send chat requests to")
            self._model = ids[0]
        return self._model
