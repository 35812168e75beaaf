"""Starting cells per strategy and the cost line printed before a sweep."""

from __future__ import annotations

from itertools import product

from orchestrator.matrix.expand import cell_id
from orchestrator.model import Cell
from orchestrator.planning.estimate import worst_case_s
from orchestrator.planning.strategy import axis_values, cost_line, starting_cells
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


def test_cost_line_names_strategy_count_and_source() -> None:
    cells = _cells()
    line = cost_line(len(cells), cells, Deadlines())
    assert line.startswith("648 cells; strategy adaptive (the default for this size): launches ")
    assert "from deadlines" in line and "localisation" in line
    small = cost_line(30, cells[:30], Deadlines(), "full", past_durations_s=[600.0])
    assert "launches 30 cells, about 5.0 h" in small and "past runs (1)" in small
    assert worst_case_s(Deadlines()) == 2700 + 5 * 120 + 15 + 60
