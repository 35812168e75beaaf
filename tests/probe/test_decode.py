"""run_probes against the canned SGLang (real loopback server; MockTransport for transport faults)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from orchestrator.model import Phase, ProbeResult
from orchestrator.probe.answers import implausibility, known_answer_problem
from orchestrator.probe.client import ProbeClient
from orchestrator.probe.decode import PROBE_ORDER, run_probes
from orchestrator.settings import Deadlines, KnownAnswer, ProbeSettings
from tests.probe.test_canned import CHAT, Canned, canned_transport, serve

SETTINGS = ProbeSettings(settle_s=0.5)
DEADLINES = Deadlines(probe=5)


@pytest.fixture
def canned() -> Canned:
    return Canned()


@pytest.fixture
def client(canned: Canned) -> Iterator[ProbeClient]:
    with serve(canned) as (url, _), ProbeClient(url, timeout=5.0) as probe_client:
        yield probe_client


def probe(
    client: ProbeClient,
    settings: ProbeSettings = SETTINGS,
    alive: bool = True,
    sleeps: list[float] | None = None,
    stop_on_failure: bool = True,
) -> tuple[ProbeResult, ...]:
    return run_probes(
        client,
        settings,
        is_alive=lambda: alive,
        deadlines=DEADLINES,
        sleep=(sleeps if sleeps is not None else []).append,
        stop_on_failure=stop_on_failure,
    )


def names(results: tuple[ProbeResult, ...]) -> list[str]:
    return [r.name for r in results]


def test_all_probes_pass_in_order(client: ProbeClient, canned: Canned) -> None:
    canned.delay_s[CHAT] = 0.2  # long enough for the concurrent batch to overlap on the server
    sleeps: list[float] = []
    results = probe(client, sleeps=sleeps)
    assert names(results) == list(PROBE_ORDER)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    greedy, sampled, stream, concurrent, alive_after = results
    assert greedy.text_excerpt is not None and "Paris" in greedy.text_excerpt
    assert greedy.request["sampling_params"] == {"temperature": 0, "max_new_tokens": SETTINGS.greedy_max_tokens}
    assert sampled.request["temperature"] == 0.7 and sampled.request["top_p"] == 0.95
    assert sampled.request["max_tokens"] >= 32 and sampled.request["model"] == canned.model
    assert stream.request["stream"] is True and stream.text_excerpt == canned.chat_text
    assert concurrent.request["concurrent"] == 8 and canned.peak_inflight == 8
    assert concurrent.tokens == 8 * len(canned.chat_text.split())
    assert concurrent.tokens_each == (len(canned.chat_text.split()),) * 8
    assert ProbeResult.from_dict(json.loads(json.dumps(concurrent.to_dict()))) == concurrent  # as the store keeps it
    assert alive_after.request["endpoint"] == "/health_generate"
    assert sleeps == [0.5]
    assert canned.calls["/v1/models"] == 1  # the model name is asked for once
    assert all(r.latency_s is not None and r.latency_s >= 0 for r in results)


def test_configured_model_skips_the_model_list(client: ProbeClient, canned: Canned) -> None:
    results = probe(client, ProbeSettings(model="served-name", settle_s=0))
    assert all(r.ok for r in results)
    assert canned.calls["/v1/models"] == 0
    assert {body["model"] for path, body in canned.bodies if path == CHAT} == {"served-name"}


def test_greedy_wrong_answer_stops_the_run(client: ProbeClient, canned: Canned) -> None:
    canned.greedy_text = " London, which is also a city."
    results = probe(client)
    assert names(results) == ["greedy"]
    (greedy,) = results
    assert not greedy.ok and greedy.wrong_answer and not greedy.timed_out
    assert greedy.error is not None and "Paris" in greedy.error and "London" in greedy.error
    assert greedy.phase is Phase.GREEDY_DECODE
    assert canned.calls[CHAT] == 0


def test_known_answer_is_case_insensitive_and_configurable(client: ProbeClient, canned: Canned) -> None:
    canned.greedy_text = " 4, of course."
    settings = ProbeSettings(greedy=KnownAnswer("2 + 2 =", ("four", "4")), settle_s=0)
    assert probe(client, settings)[0].ok
    assert known_answer_problem("PARIS!", ("paris",)) is None


def test_without_stop_on_failure_every_probe_runs(client: ProbeClient, canned: Canned) -> None:
    canned.greedy_text = " London."
    results = probe(client, stop_on_failure=False)
    assert names(results) == list(PROBE_ORDER)
    assert [r.ok for r in results] == [False, True, True, True, True]


def test_sampled_500_stops_before_later_probes(client: ProbeClient, canned: Canned) -> None:
    canned.fail[CHAT] = (500, '{"object":"error","message":"CUDA error: device-side assert triggered"}')
    results = probe(client, alive=False)
    assert names(results) == ["greedy", "sampled"]
    sampled = results[1]
    assert not sampled.ok and not sampled.wrong_answer and sampled.phase is Phase.SAMPLED_DECODE
    assert sampled.error is not None and "HTTP 500" in sampled.error and "device-side assert" in sampled.error
    assert canned.calls[CHAT] == 1 and canned.calls["/health_generate"] == 0


def test_error_mid_stream_fails_the_stream_probe(client: ProbeClient, canned: Canned) -> None:
    canned.stream_error_after = 2
    results = probe(client)
    assert names(results) == ["greedy", "sampled", "stream"]
    assert results[-1].error is not None and "error event after 2 chunks" in results[-1].error


def test_one_failed_concurrent_request_fails_the_batch(client: ProbeClient, canned: Canned) -> None:
    canned.fail_calls[CHAT] = {5}  # sampled and stream are requests 1 and 2
    results = probe(client)
    assert names(results) == ["greedy", "sampled", "stream", "concurrent"]
    concurrent = results[-1]
    assert not concurrent.ok and not concurrent.wrong_answer
    assert concurrent.error is not None and concurrent.error.startswith("1 of 8 concurrent requests failed")
    assert concurrent.tokens == 7 * len(canned.chat_text.split()) and len(concurrent.tokens_each) == 7


def test_alive_after_fails_when_the_process_group_is_gone(client: ProbeClient, canned: Canned) -> None:
    results = probe(client, alive=False)
    assert names(results) == list(PROBE_ORDER)
    last = results[-1]
    assert not last.ok and last.phase is Phase.AFTER_DECODE
    assert last.error == "the server's process group exited after answering"
    assert canned.calls["/health_generate"] == 0


def test_alive_after_fails_on_unhealthy(client: ProbeClient, canned: Canned) -> None:
    canned.health = [503]
    last = probe(client)[-1]
    assert not last.ok and last.error == "/health_generate answered 503"


@pytest.mark.parametrize(
    "garbage",
    ["!!!!!!!!!!!!!!!!!!!!!!!!", "", "   \n ", "<unk><unk><unk><unk><unk>", "nan nan nan nan", "\x00\x01\x02\x03 ab"],
)
def test_garbage_sampled_answer_is_a_wrong_answer(client: ProbeClient, canned: Canned, garbage: str) -> None:
    canned.chat_text = garbage
    results = probe(client)
    assert names(results) == ["greedy", "sampled"]
    assert results[-1].wrong_answer and not results[-1].ok


def test_timeout_is_recorded() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    with ProbeClient("http://127.0.0.1:30000", transport=httpx.MockTransport(handler)) as client:
        (greedy,) = probe(client)
    assert greedy.timed_out and not greedy.ok and not greedy.wrong_answer


def test_empty_model_list_fails_the_sampled_probe() -> None:
    canned = Canned(models_listed=False)
    with ProbeClient("http://127.0.0.1:30000", transport=canned_transport(canned)) as client:
        results = probe(client)
    assert names(results) == ["greedy", "sampled"]
    assert results[-1].error is not None and "lists no model" in results[-1].error


def test_results_serialise() -> None:
    with ProbeClient("http://127.0.0.1:30000", transport=canned_transport(Canned())) as client:
        results = probe(client)
    assert all(ProbeResult.from_dict(r.to_dict()) == r for r in results)


@pytest.mark.parametrize(
    "text",
    [
        "The ocean covers most of the planet. Its tides rise and fall twice a day.",
        "Sure.",
        "One, two, three, four, five.",
        "海洋覆盖了地球的大部分。",
        "Here is a rule:\n----------------------------------------\nand more text after it.",
        "NaN is a floating point value that means not a number, and inf means infinity here.",
    ],
)
def test_plausible_text_passes(text: str) -> None:
    assert implausibility(text) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("!!!!!!!!", "repeated"),
        ("the the the the the", "repeated"),
        ("The ocean is vast!!!!!!!!!!!!!!!!!!!!!!!", "run of"),
        ("\ufffd\ufffd\ufffd ocean", "unprintable"),
        ("nan inf nan value", "NaN-like"),
        ("the ocean is the sea " * 6, "loop"),
    ],
)
def test_implausible_text_is_named(text: str, reason: str) -> None:
    problem = implausibility(text)
    assert problem is not None and reason in problem
