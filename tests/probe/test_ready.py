"""wait_ready driven by a fake clock and fake callables: deterministic, no real sleeping."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from orchestrator.model import Phase
from orchestrator.probe.client import ProbeClient
from orchestrator.probe.ready import LogProgress, ReadyResult, wait_ready
from orchestrator.settings import Deadlines
from tests.probe.test_canned import Canned, serve

DEADLINES = Deadlines(model_load=5, memory_alloc=5, cuda_graph_capture=10, ready=60)


class World:
    """A fake clock, process, log and health endpoint; every call is recorded in `events`."""

    def __init__(
        self,
        health: Sequence[int | None] = (None,),
        alive_until: float = float("inf"),
        log: dict[float, LogProgress] | None = None,
        health_cost_s: float = 0.0,
    ) -> None:
        self.now = 0.0
        self.health = list(health)
        self.alive_until = alive_until
        self.log = log or {}
        self.health_cost_s = health_cost_s
        self.sleeps: list[float] = []
        self.events: list[str] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.events.append("sleep")
        self.now += seconds

    def is_alive(self) -> bool:
        self.events.append("alive")
        return self.now < self.alive_until

    def poll_log(self) -> LogProgress:
        """The latest progress whose time has come (the caller's detector is cumulative)."""
        self.events.append("log")
        due = [t for t in self.log if t <= self.now]
        return self.log[max(due)] if due else LogProgress()

    def health_generate(self, timeout: float = 1.0) -> int | None:
        self.events.append("health")
        self.now += self.health_cost_s
        return self.health.pop(0) if len(self.health) > 1 else self.health[0]

    def wait(
        self, deadlines: Deadlines = DEADLINES, poll_interval: float = 0.25, warmup_poll_interval: float | None = None
    ) -> ReadyResult:
        return wait_ready(
            self,
            is_alive=self.is_alive,
            poll_log=self.poll_log,
            deadlines=deadlines,
            clock=self.clock,
            sleep=self.sleep,
            poll_interval=poll_interval,
            warmup_poll_interval=poll_interval if warmup_poll_interval is None else warmup_poll_interval,
        )


def test_ready_after_some_polls() -> None:
    world = World(health=[None, None, 503, 200], log={0.0: LogProgress(Phase.WARMUP)})
    result = world.wait()
    assert result.ready and not result.died
    assert result.polls == 4
    assert result.ready_s == pytest.approx(0.75)
    assert result.phase is Phase.READY and result.last_status == 200
    assert world.sleeps == [0.25, 0.25, 0.25]
    assert world.events[:4] == ["alive", "log", "health", "sleep"]


def test_death_ends_the_wait_at_once_and_drains_the_log() -> None:
    fatal = "[2026-01-01 10:00:02 TP0] RuntimeError: CUDA error: an illegal memory access was encountered"
    world = World(
        health=[None],
        alive_until=1.1,
        log={0.0: LogProgress(Phase.MODEL_LOAD), 1.2: LogProgress(Phase.MODEL_LOAD, fatal)},
    )
    world.log[1.0] = LogProgress(Phase.MEMORY_ALLOC)
    result = world.wait()
    assert result.died and not result.ready and result.deadline_phase is None
    assert result.elapsed_s == pytest.approx(1.25)  # noticed at the first check after it died
    assert result.phase is Phase.MEMORY_ALLOC  # the furthest phase reached, not the drained one
    assert result.fatal_line == fatal
    assert world.events[-3:] == ["sleep", "alive", "log"]  # no health poll after the death


def test_fatal_line_ends_the_wait_while_still_alive() -> None:
    fatal = "[2026-01-01 10:00:02 TP0] Initialization failed. warmup error: Traceback (most recent call last):"
    world = World(health=[503], log={0.0: LogProgress(Phase.WARMUP), 0.5: LogProgress(Phase.WARMUP, fatal)})
    result = world.wait()
    assert (result.ready, result.died, result.fatal_line) == (False, False, fatal)
    assert result.polls == 2 and result.phase is Phase.WARMUP
    assert world.events[-2:] == ["alive", "log"]


def test_fatal_line_wins_over_a_health_answer_in_the_same_round() -> None:
    world = World(health=[200], log={0.0: LogProgress(Phase.WARMUP, "Killed")})
    result = world.wait()
    assert not result.ready and result.polls == 0 and result.fatal_line == "Killed"


def test_per_phase_deadline_runs_from_when_the_phase_began() -> None:
    world = World(health=[503], log={0.0: LogProgress(Phase.IMPORT), 1.0: LogProgress(Phase.MODEL_LOAD)})
    result = world.wait()
    assert result.deadline_phase is Phase.MODEL_LOAD and result.phase is Phase.MODEL_LOAD
    assert result.elapsed_s == pytest.approx(6.0)
    assert not result.ready and not result.died


def test_a_new_phase_gets_its_own_deadline() -> None:
    log = {0.0: LogProgress(Phase.MODEL_LOAD), 4.0: LogProgress(Phase.CUDA_GRAPH_CAPTURE)}
    result = World(health=[503], log=log).wait()
    assert result.deadline_phase is Phase.CUDA_GRAPH_CAPTURE
    assert result.elapsed_s == pytest.approx(14.0)


def test_overall_ready_deadline_covers_phases_without_their_own() -> None:
    deadlines = Deadlines(model_load=5, memory_alloc=5, cuda_graph_capture=10, ready=3)
    result = World(health=[503], log={0.0: LogProgress(Phase.WARMUP)}).wait(deadlines)
    assert result.deadline_phase is Phase.WARMUP
    assert result.elapsed_s == pytest.approx(3.0)


def test_no_marker_at_all_times_out_in_import() -> None:
    deadlines = Deadlines(ready=2)
    result = World(health=[None]).wait(deadlines)
    assert result.deadline_phase is Phase.IMPORT and result.phase is None and result.last_status is None


def test_phase_never_goes_back() -> None:
    log = {0.0: LogProgress(Phase.CUDA_GRAPH_CAPTURE), 0.5: LogProgress(Phase.MODEL_LOAD)}
    result = World(health=[503], log=log).wait(Deadlines(ready=2))
    assert result.phase is Phase.CUDA_GRAPH_CAPTURE


def test_slow_polls_are_not_followed_by_a_sleep() -> None:
    world = World(health=[None, None, None, 200], health_cost_s=1.0)
    result = world.wait()
    assert result.ready and world.sleeps == []  # each round already took its whole interval


def test_sleep_is_only_the_rest_of_the_interval() -> None:
    world = World(health=[503, 200], health_cost_s=0.1)
    world.wait(poll_interval=0.5)
    assert world.sleeps == [pytest.approx(0.4)]


def test_rounds_come_quicker_once_the_log_shows_the_warm_up() -> None:
    log = {0.0: LogProgress(Phase.CUDA_GRAPH_CAPTURE), 0.5: LogProgress(Phase.WARMUP)}
    world = World(health=[None, None, 503, 503, 200], log=log)
    result = world.wait(warmup_poll_interval=0.05)
    # Two slow rounds while graphs are captured; the round at 0.5 s reads the warm-up, and then they quicken.
    assert world.sleeps == [0.25, 0.25, pytest.approx(0.05), pytest.approx(0.05)]
    assert result.ready and result.ready_s == pytest.approx(0.6)


@pytest.mark.parametrize("interval", [0.0, 1.5])
@pytest.mark.parametrize("which", ["poll_interval", "warmup_poll_interval"])
def test_poll_interval_must_be_at_most_a_second(interval: float, which: str) -> None:
    with pytest.raises(ValueError, match=which):
        World().wait(**{which: interval})  # type: ignore[arg-type]


def test_against_a_real_server_with_the_real_clock() -> None:
    canned = Canned(health=[503, 503, 200])
    with serve(canned) as (url, _), ProbeClient(url) as client:
        result = wait_ready(
            client,
            is_alive=lambda: True,
            poll_log=lambda: LogProgress(Phase.WARMUP),
            deadlines=Deadlines(ready=10),
            poll_interval=0.01,
        )
    assert result.ready and result.polls == 3 and result.ready_s is not None and result.ready_s < 2
