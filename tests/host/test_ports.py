"""Choosing a launch's ports: the pure pick from a survey, and the survey of this machine's real sockets."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrator.config.load import load_hosts
from orchestrator.errors import HostBusy
from orchestrator.host import ports
from orchestrator.host.ports import PORT_SPACING, PortSurvey, parse_survey, pick_free
from orchestrator.host.session import HostSession
from tests import simhost


def test_the_pick_skips_busy_and_nearby_ports_and_puts_the_ephemeral_range_last() -> None:
    grid = [30000, 31100, 32200, 33300, 34400]
    survey = PortSurvey(frozenset({31100}), (32000, 33500))
    assert pick_free(survey, grid, 5, avoid=()) == [30000, 34400, 32200, 33300]
    assert pick_free(survey, grid, 2, avoid=[34000]) == [30000, 32200]
    assert pick_free(PortSurvey(frozenset(), (0, 0)), grid, 2, avoid=[29900]) == [31100, 32200]


def test_the_survey_text_is_read_line_by_line_and_unknown_lines_are_ignored() -> None:
    text = "range 32768 60999\nbusy 31100\nbusy x\nawk: warning\nbusy 45400\n"
    assert parse_survey(text) == PortSurvey(frozenset({31100, 45400}), (32768, 60999))
    assert parse_survey("") == PortSurvey(frozenset(), (0, 0))


def test_the_grid_stays_below_the_last_ports() -> None:
    grid = ports.candidates(60000)
    assert grid == [60000, 61100, 62200, 63300]  # 64400 would put SGLang's internal ports past 65000


@contextmanager
def listening(port: int) -> Iterator[socket.socket]:
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        pytest.skip(f"port {port} is taken on this machine")
    sock.listen()
    try:
        yield sock
    finally:
        sock.close()


def session_at(tmp_path: Path, port_base: int) -> HostSession:
    hosts = simhost.write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", port_base=port_base)
    return HostSession.open(load_hosts(hosts)["simhost"])


def test_a_port_something_listens_on_is_never_chosen_first_hand_or_from_the_background_survey(tmp_path: Path) -> None:
    session = session_at(tmp_path, simhost.random_port_base())
    base = session.config.port_base
    try:
        with listening(base):
            first = session.placement.free_ports(2, set())
            again = session.placement.free_ports(2, set())  # from the survey the first call left running
        assert base not in first and base not in again
        assert len(set(first)) == 2 and abs(first[0] - first[1]) >= PORT_SPACING
    finally:
        session.close()


def test_too_few_free_ports_is_host_busy_naming_the_host(tmp_path: Path) -> None:
    session = session_at(tmp_path, 63800)  # a grid of one port
    try:
        with listening(63800), pytest.raises(HostBusy, match=r"only 0 of 1 ports free on simhost among \[63800\]"):
            session.placement.free_ports(1, set())
        assert session.placement.free_ports(1, set()) == [63800]  # closed again: seen by the survey taken in the open
    finally:
        session.close()


def test_a_port_a_live_process_names_on_its_command_line_is_busy_before_anything_binds_it(tmp_path: Path) -> None:
    """Another pool entry's or user's server, still loading its weights: only its `--port` says the port is taken."""
    import subprocess
    import sys

    from orchestrator.host.ports import survey_command
    from orchestrator.transport.local import LocalTransport

    base = simhost.random_port_base()
    grid = ports.candidates(base)[:4]
    loading = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--port", str(grid[1])]),
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--port={grid[2]}"]),
    ]
    try:
        survey = parse_survey(LocalTransport().run(survey_command(grid)).text)
        assert {grid[1], grid[2]} <= survey.busy
        assert pick_free(survey, grid, 4, avoid=()) == [p for p in grid if p not in survey.busy]
    finally:
        for proc in loading:
            proc.kill()
            proc.wait()
    after = parse_survey(LocalTransport().run(survey_command(grid)).text)
    assert not {grid[1], grid[2]} & after.busy  # gone with the processes


def _time_wait_on(port: int, *, client: bool) -> None:
    """Leave a TIME_WAIT socket with local port `port`: a client's (bound there, no SO_REUSEADDR, closing first, as
    an outgoing connection from an ephemeral port does), or a server's (listening there with SO_REUSEADDR, as uvicorn
    does, closing its side of a connection first)."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0 if client else port))
        server.listen()
        with socket.socket() as peer:
            if client:
                peer.bind(("127.0.0.1", port))
            peer.connect(server.getsockname())
            accepted, _ = server.accept()
            first, second = (peer, accepted) if client else (accepted, peer)
            first.close()
            time.sleep(0.05)  # the other side's FIN after the first one's: the first closer keeps the TIME_WAIT
            second.close()


def _binds(port: int) -> bool:
    """Whether a server binding with SO_REUSEADDR (SGLang's uvicorn, the simulated host) gets `port` now."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_clients_time_wait_in_the_ephemeral_range_is_busy_and_a_servers_own_outside_it_is_not() -> None:
    """The demo's port race: 35500 (inside 32768-60999) was taken at bind time by a socket the survey ignored, as
    the TIME_WAIT of one of the ~600 probe connections a sweep keeps open to closing; a server's own is harmless."""
    from orchestrator.host.ports import survey_command
    from orchestrator.transport.local import LocalTransport

    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    inside = next((p for p in random.sample(range(low + 1000, high - 1000), 20) if _binds(p)), None)
    outside = next((p for p in (simhost.random_port_base() for _ in range(20)) if _binds(p)), None)
    if inside is None or outside is None or low <= outside <= high:
        pytest.skip(f"no free port found inside or outside {low}-{high} on this machine, or the range is unusual")
    _time_wait_on(inside, client=True)
    _time_wait_on(outside, client=False)
    assert not _binds(inside)  # what the server of a launch picked there would meet: [Errno 98]
    survey = parse_survey(LocalTransport().run(survey_command([inside, outside])).text)
    assert survey.ephemeral == (low, high)
    assert inside in survey.busy
    assert outside not in survey.busy and _binds(outside)
