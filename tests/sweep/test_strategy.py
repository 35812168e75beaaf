"""Starting cells per strategy and the cost line printed before a sweep."""

from __future__ import annotations

from itertools import product

from orchestrator.matrix.cost import Estimate
from orchestrator.matrix.expand import cell_id
from orchestrator.model import Cell
from orchestrator.planning.estimate import launch_estimate, worst_case_s
from orchestrator.planning.strategy import axis_values, planned_cost, starting_cells
from orchestrator.settings import Deadlines

AXES = {
    "attention-backend": ["triton", "flashinfer", "fa3"],
    "kv-cache-dtype": ["bf16", "fp8_e4m3", "fp8_e5m2"],
    "fp8-gemm-backend": ["auto", "cutlass", "deep_gemm", "triton"],
    "moe-runner-backend": ["auto", "triton", "cutlass"],
    "page-size": ["1", "16", "64"],
    "chunked-prefill-size": ["4096", "8192"],
}


def _cells() -> list[Cell]:
    out = []
    for values in product(*AXES.values()):
        flags = dict(zip(AXES, values, strict=True))
        out.append(Cell(cell_id=cell_id(flags), flags=dict(flags), axes=tuple(AXES)))
    return out


def test_pairwise_start_is_a_small_subset_of_valid_cells() -> None:
    cells = _cells()
    assert len(cells) == 648 and axis_values(cells) == AXES
    start = starting_cells("pairwise", cells)
    assert 12 <= len(start) <= 40
    assert {c.cell_id for c in start} <= {c.cell_id for c in cells}
    assert starting_cells("full", cells) == cells
    assert starting_cells("pairwise", cells, already_run=start) == []


def test_planned_cost_names_strategy_count_and_source() -> None:
    cells = _cells()

    def cold(n: int) -> Estimate:
        return launch_estimate(n, 1, Deadlines(), [], cells, False, None)

    line = planned_cost(len(cells), cells, 0, None, None, (), cold).text()
    assert line.startswith("648 cells; strategy adaptive (the default for this size): launches at most ")
    assert "from deadlines" in line and "localisation" in line
    start = starting_cells("adaptive", cells)
    adaptive = planned_cost(len(cells), cells, 3, None, None, (), cold)
    assert adaptive.start == len(start) and adaptive.most == max(64, len(start) + 2 * len(axis_values(cells)))
    assert adaptive.estimate.cells == adaptive.most and "3 invalid (rejected before launch)" in adaptive.text()
    # Known-bad cells leave the first cells; a --budget replaces the default one.
    bad = {start[0].cell_id, start[1].cell_id}
    budgeted = planned_cost(len(cells), cells, 0, "adaptive", 20, bad, cold)
    assert (budgeted.start, budgeted.known_bad, budgeted.most) == (len(start) - 2, 2, 20)
    assert "2 known bad from past sweeps" in budgeted.text()
    small = planned_cost(30, cells[:30], 0, "full", None, (), cold)
    assert small.text().startswith("30 cells; strategy full: launches 30 cells, about ")
    assert small.estimate.per_cell_s == worst_case_s(Deadlines())
    assert worst_case_s(Deadlines()) == 2700 + 5 * 120 + 15 + 60
