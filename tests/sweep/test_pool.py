"""A pool of hosts, the pure parts: host groups in hosts.yaml, lanes, host-axis cell ids, a cell that fails on
one host and passes on another (table, JSON, explain), and the store's migration to the `cells.host` column."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.analysis.explain import explain
from orchestrator.config.hosts import load_groups, load_hosts
from orchestrator.errors import ConfigErrors
from orchestrator.matrix.expand import cell_id
from orchestrator.model import Category, Phase, Status
from orchestrator.planning.cells import CellPlan
from orchestrator.report.table import axis_columns, status_text
from orchestrator.report.views import cell_outcome
from orchestrator.store.records import RunRecord
from orchestrator.store.results import aggregate
from orchestrator.store.schema import SCHEMA_VERSION
from orchestrator.store.sqlite import Store
from orchestrator.sweep.hostdown import HostWatch
from orchestrator.sweep.lanes import Member, laned, pool_lanes
from orchestrator.sweep.preflight import Preflight
from orchestrator.transport import HostBreaker
from tests.analysis.test_inputs import cell, view
from tests.store.test_records import make_cell, make_outcome, make_run, make_verdict

CELL = make_cell()
HOSTS = """a: {transport: sim, gpus: 8}
b: {transport: sim, gpus: 8}
pool: {group: [a, b]}
"""


def test_a_group_names_hosts_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text(HOSTS)
    assert set(load_hosts(path)) == {"a", "b"}
    assert load_groups(path) == {"pool": ["a", "b"]}


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("[a, c]", "group 'pool' names 'c', which is not a host of this file (hosts: a, b)"),
        ("a", "group 'pool' is not a list of host names"),
        ("[a, a]", "group 'pool' names a host twice"),
    ],
)
def test_a_bad_group_is_reported_with_its_line(tmp_path: Path, group: str, message: str) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text(HOSTS.replace("[a, b]", group))
    with pytest.raises(ConfigErrors) as caught:
        load_hosts(path)
    assert f"{path}:3: {message}" in str(caught.value)


def test_a_group_with_other_keys_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text(HOSTS.replace("{group: [a, b]}", "{group: [a, b], gpus: 8}"))
    with pytest.raises(ConfigErrors, match="unknown key 'gpus' in host group 'pool'"):
        load_hosts(path)


def _member(name: str, version: str, gpu: str) -> Member:
    from orchestrator.config.hosts import builtin_sim_host

    member = Member(replace(builtin_sim_host(), name=name), HostBreaker(name))
    member.preflight = Preflight([CellPlan(CELL, ())], {"sglang": version}, {"gpu_name": gpu})
    return member


def test_alike_hosts_form_one_lane_and_different_ones_are_an_axis() -> None:
    same = pool_lanes([_member("a", "0.5.9", "B200"), _member("b", "0.5.9", "B200")])
    assert [(lane.name, [m.name for m in lane.members]) for lane in same] == [("", ["a", "b"])]
    mixed = pool_lanes([_member("a", "0.5.9", "B200"), _member("b", "0.5.10", "B200"), _member("c", "0.5.9", "B200")])
    assert [(lane.name, [m.name for m in lane.members]) for lane in mixed] == [("a+c", ["a", "c"]), ("b", ["b"])]
    gpu = pool_lanes([_member("a", "0.5.9", "B200"), _member("b", "0.5.9", "H200")])
    assert [lane.name for lane in gpu] == ["a", "b"]
    unreachable = _member("d", "0.5.9", "B200")
    unreachable.preflight = None
    assert [lane.name for lane in pool_lanes([_member("a", "0.5.9", "B200"), unreachable])] == [""]


def test_a_cell_on_a_lane_of_the_host_axis_has_its_own_id_and_label() -> None:
    assert laned(CELL, "") is CELL
    on_b = laned(CELL, "b")
    assert on_b.cell_id == cell_id(CELL.flags, CELL.install, "b") != CELL.cell_id
    assert cell_id(CELL.flags, CELL.install) == cell_id(CELL.flags, CELL.install, None)  # ids without a lane unchanged
    assert on_b.label.startswith("host=b, ")


def _run(attempt: int, host: str, status: Status) -> RunRecord:
    return make_run(
        CELL, attempt, state="done", verdict=make_verdict(status), outcome=make_outcome(30.0), host=host,
        run_id=f"r-{attempt}",
    )  # fmt: skip


def test_a_cell_failing_on_one_host_and_passing_on_another_is_not_flaky() -> None:
    result = aggregate(CELL, [_run(1, "a", Status.FAIL), _run(2, "b", Status.PASS)], retries_allowed=1)
    assert (result.status, result.flaky, result.passes_on, result.fails_on) == (Status.FAIL, False, ("b",), ("a",))
    assert (result.run_id, result.host, result.hosts, result.needs_run) == ("r-1", "a", ("a", "b"), False)
    assert status_text(result) == "fail on a (passes on b)"
    assert result.to_dict()["passes_on"] == ["b"] and result.to_dict()["host"] == "a"
    assert axis_columns([result])[0] == "host"
    # Both runs on one host disagreeing is flakiness, as before.
    same = aggregate(CELL, [_run(1, "a", Status.FAIL), _run(2, "a", Status.PASS), _run(3, "b", Status.PASS)])
    assert same.flaky and not same.passes_on
    lone = aggregate(CELL, [_run(1, "sim", Status.PASS)])
    assert "host" not in axis_columns([lone])
    outcome = cell_outcome(result)
    assert (outcome.host, outcome.passes_on, outcome.flaky) == ("a", ("b",), False)


def test_explain_names_the_host_that_separates_fail_from_pass() -> None:
    bad = (Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, "RuntimeError: probability tensor contains nan")
    cells = []
    for backend in ("flashinfer", "triton", "fa3"):
        for kv in ("bf16", "fp8_e4m3"):
            flags = {"attention-backend": backend, "kv-cache-dtype": kv}
            if backend != "fa3" and kv == "bf16":  # failed on b, then passed its retry on a
                split = cell(flags, bad, attempts=2, passes=1)
                cells.append(replace(split, host="b", passes_on=("a",), fails_on=("b",)))
            else:
                cells.append(replace(cell(flags), host="a"))
    report = explain(view(cells))
    assert not report.flaky
    (group,) = report.groups
    top = group.findings[0]
    assert (top.text, top.fail_with, top.pass_with) == ("host=b", 2, 0), group.findings
    assert report.pass_total == 6  # the four clean passes and each split cell's pass on a


def test_a_store_of_schema_1_gains_the_cell_host_column(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with Store(db):
        pass
    conn = sqlite3.connect(db)
    conn.executescript(
        "ALTER TABLE cells DROP COLUMN host; ALTER TABLE cells DROP COLUMN origin; DELETE FROM schema_version;"
        " INSERT INTO schema_version VALUES (1);"
    )
    conn.close()
    with Store(db) as store:
        columns = {row["name"] for row in store._rows("PRAGMA table_info(cells)")}
        versions = [row["version"] for row in store._rows("SELECT version FROM schema_version")]
    assert {"host", "origin"} <= columns and max(versions) == SCHEMA_VERSION


def test_compare_matches_each_lane_of_the_host_axis_to_the_same_lane() -> None:
    from orchestrator.analysis.compare import compare

    bad = (Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, "RuntimeError: probability tensor contains nan")
    flags = {"attention-backend": "triton"}
    on_a = replace(cell(flags), cell_id="ca", host="a", lane="a")
    on_b = replace(cell(flags), cell_id="cb", host="b", lane="b")
    before = view([on_a, on_b])
    after = view([on_a, replace(cell(flags, bad), cell_id="cb", host="b", lane="b")])
    result = compare(before, after)
    assert result.matched == 2  # by lane: the same flags on the other host are another cell
    assert [c.label for c in result.regressions] == ["host=b, attention-backend=triton"]
    swapped = compare(before, view([replace(on_a, lane="b", host="b"), replace(on_b, lane="a", host="a")]))
    assert swapped.matched == 2 and not swapped.regressions


def test_a_host_of_a_pool_that_goes_down_is_said_once_even_with_nothing_queued_for_it() -> None:
    said: list[str] = []
    breaker = HostBreaker("b")
    watch = HostWatch("b", breaker, check=lambda: None, announce=lambda _h, line: said.append(line), pooled=True)
    assert watch.up() and not watch.say_down() and said == []
    breaker.trip("gave up after 6 attempts: connection refused")
    # Its last cell in flight failed and the other hosts had taken every queued cell: its scheduler ends
    # without another round of starts, and says so on the way out.
    assert watch.say_down("nothing else was queued for it")
    assert not watch.up() and watch.say_down()
    assert said == ["host b is down (gave up after 6 attempts: connection refused); nothing else was queued for it"]

    said.clear()
    other = HostWatch("b", HostBreaker("b"), check=lambda: None, announce=lambda _h, line: said.append(line),
                      pooled=True)  # fmt: skip
    other.breaker.trip("connection refused")
    assert not other.up() and not other.up()
    assert said == ["host b is down (connection refused); the pool's hosts still up run its queued cells "
                    "(pass --wait-for-host DURATION to wait for it)"]  # fmt: skip
