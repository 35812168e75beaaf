"""The simulator keeps its own copy of what SGLang does; these say where that copy and the tool's differ.

Two copies, so that a mistake in the tool's knowledge is not also in the simulated host that tests it; a
difference between them is then a decision to take (which side is right about SGLang), never silent drift.
"""

from __future__ import annotations

from orchestrator.matrix import flags as tool_flags
from orchestrator.model import Category
from orchestrator.model import Phase as ToolPhase
from orchestrator.sim import flags as sim_flags
from orchestrator.sim.phases import FAILURE_KINDS, Phase


def test_the_failure_kinds_a_scenario_names_are_the_taxonomy() -> None:
    assert {c.value for c in Category} == FAILURE_KINDS


def test_the_phases_are_the_same_and_in_the_same_order() -> None:
    assert [p.value for p in Phase] == [p.value for p in ToolPhase]
    assert [p.order for p in Phase] == [p.order for p in ToolPhase]


def test_both_know_the_same_renames_and_value_aliases() -> None:
    assert sim_flags.FLAG_RENAMES == tool_flags.FLAG_RENAMES
    assert sim_flags.VALUE_ALIASES == tool_flags.VALUE_ALIASES
