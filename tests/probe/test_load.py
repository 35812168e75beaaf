"""run_load: the standard load's figures, and no figure (with why) when the load was not what was asked.

The canned SGLang (real loopback server) answers every chat with the same text, so what it gets wrong is set
by the test; the simulated SGLang (a real server process) serves at its scenario's `perf` speed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.probe.client import ProbeClient
from orchestrator.probe.load import load_prompt, run_load
from orchestrator.probe.speed import band_of
from orchestrator.settings import LoadSettings, ProbeSettings
from tests.probe.test_canned import CHAT, Canned, serve
from tests.sim.test_server import launch  # noqa: F401 (the fixture)

PROBES = ProbeSettings()
SIXTEEN = "Paris is the capital of France and the largest city of the country on the river."
"""16 chunks as the canned server cuts them, and the greedy probe's known answer in it."""


@pytest.fixture
def canned() -> Canned:
    return Canned(chat_text=SIXTEEN)


@pytest.fixture
def client(canned: Canned) -> Iterator[ProbeClient]:
    with serve(canned) as (url, _), ProbeClient(url, timeout=5.0) as probe_client:
        yield probe_client


def test_a_load_that_went_as_asked_has_its_figures(client: ProbeClient, canned: Canned) -> None:
    load = LoadSettings(requests=6, concurrency=3, input_len=20, output_len=16, repeat=2)
    speed = run_load(client, PROBES, load, timeout=5)
    assert speed["valid"] is True and speed["why"] is None
    band = band_of(speed)
    assert band is not None and 0 < band.low <= band.median <= band.high
    assert speed["ttft_ms"]["p50"] <= speed["ttft_ms"]["p99"] and speed["itl_ms"]["p50"] >= 0
    assert [r["output_tokens"] for r in speed["repeats"]] == [6 * 16, 6 * 16]
    assert speed["load"] == load.to_dict() and speed["overhead_s"] >= 0
    chats = [body for path, body in canned.bodies if path == CHAT]
    assert len(chats) == 12 and all(b["ignore_eos"] is True and b["max_tokens"] == 16 for b in chats)
    assert all(b["temperature"] == 0 and b["stream"] is True for b in chats)
    # Each repeat asks the greedy probe's prompt once; the others are long prompts of their own.
    prompts = [b["messages"][0]["content"] for b in chats]
    assert prompts.count(PROBES.greedy.prompt) == 2 and len(set(prompts)) == 6


def test_short_answers_give_no_figure_and_say_why(client: ProbeClient) -> None:
    speed = run_load(client, PROBES, LoadSettings(requests=4, concurrency=2, output_len=64, repeat=3), timeout=5)
    assert speed["valid"] is False and speed["output_tok_s"] is None and band_of(speed) is None
    assert "4 of 4 answers did not have the 64 tokens asked (repeat 1 of 3); got [16]" in speed["why"]


def test_a_lost_request_gives_no_figure_and_says_why(client: ProbeClient, canned: Canned) -> None:
    canned.fail_calls[CHAT] = {7}
    speed = run_load(client, PROBES, LoadSettings(requests=4, concurrency=1, output_len=16, repeat=3), timeout=5)
    assert speed["valid"] is False and speed["ttft_ms"] is None
    assert speed["why"].startswith("1 of 4 load requests failed (repeat 2 of 3, 1 not sent after it); first: ")
    assert "HTTP 500" in speed["why"]
    # The load stopped at the failure: no third repeat.
    assert sum(1 for path, _ in canned.bodies if path == CHAT) == 7


def test_a_wrong_greedy_answer_under_load_gives_no_figure(client: ProbeClient, canned: Canned) -> None:
    canned.chat_text = SIXTEEN.replace("Paris", "Lyon")
    speed = run_load(client, PROBES, LoadSettings(requests=2, concurrency=2, output_len=16, repeat=1), timeout=5)
    assert speed["valid"] is False
    assert speed["why"].startswith("the greedy answer under load disagrees with the correctness probe (repeat 1 of 1)")


def test_load_prompts_are_about_input_len_words_and_differ() -> None:
    prompts = [load_prompt(i, 256) for i in range(1, 9)]
    assert len(set(prompts)) == 8 and all(250 <= len(p.split()) <= 260 for p in prompts)


PERF_SCENARIO = """
version: 0.5.9
gpus: 4
timing: {{import_s: 0.01, init_s: 0.01, load_weights_s: 0.02, memory_alloc_s: 0.01, capture_cuda_graph_s: 0.01,
          warmup_s: 0.01, prefill_s: 0.001}}
perf:
  tok_s: {tok_s}
  noise: 0.0
  rules:
    - when: {{attention-backend: fa3}}
      factor: 2
rules: {rules}
"""


def _sim_speed(start: Any, tmp_path: Path, backend: str, rules: str = "[]") -> dict[str, Any]:
    path = tmp_path / f"perf-{backend}.yaml"
    path.write_text(PERF_SCENARIO.format(tok_s=300, rules=rules))
    sim = start(path, "--model-path", "/models/m", "--attention-backend", backend)
    sim.wait_healthy()
    try:
        with ProbeClient(sim.url, timeout=10) as probe_client:
            return run_load(probe_client, PROBES, LoadSettings(8, 4, 32, 24, 2), timeout=10)
    finally:
        sim.kill()  # its GPUs free for the next launch of the test


def test_the_simulated_host_serves_at_its_perf_speed_and_honours_ignore_eos(launch: Any, tmp_path: Path) -> None:  # noqa: F811
    plain, fast = _sim_speed(launch, tmp_path, "triton"), _sim_speed(launch, tmp_path, "fa3")
    assert plain["valid"] is True and fast["valid"] is True, (plain["why"], fast["why"])
    slow_band, fast_band = band_of(plain), band_of(fast)
    assert slow_band is not None and fast_band is not None
    # 300 tok/s shared by 4 requests in flight (less the prefills and the last wave's tail); fa3 twice that.
    assert 200 < slow_band.median <= 310
    assert 1.7 < fast_band.median / slow_band.median < 2.3


def test_a_drifting_greedy_answer_on_the_simulated_host_has_no_speed(launch: Any, tmp_path: Path) -> None:  # noqa: F811
    drift = "[{when: {attention-backend: triton}, fail: {at: serving, kind: drift}}]"
    speed = _sim_speed(launch, tmp_path, "triton", drift)
    assert speed["valid"] is False and "expected one of ['Paris']" in speed["why"]


def test_two_loads_of_a_packed_sweep_run_one_after_the_other(client: ProbeClient, canned: Canned) -> None:
    canned.delay_s[CHAT] = 0.05
    load = LoadSettings(requests=4, concurrency=2, input_len=8, output_len=16, repeat=1)
    speeds: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: speeds.append(run_load(client, PROBES, load, timeout=5)))
               for _ in range(2)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(s["valid"] for s in speeds) and canned.peak_inflight <= 2
    # The second waited for the first's two rounds of 50 ms requests, and that wait is in no figure.
    assert max(s["waited_s"] for s in speeds) >= 0.09 and min(s["waited_s"] for s in speeds) < 0.05
