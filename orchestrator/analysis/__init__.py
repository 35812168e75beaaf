"""analysis layer (see DESIGN.md data flow): pure comparison and attribution over stored verdicts."""

from orchestrator.analysis.compare import Comparison, compare, compare_installs, split_by_install
from orchestrator.analysis.explain import Explanation, explain
from orchestrator.analysis.inputs import CellOutcome, SweepView
from orchestrator.analysis.render import render_comparison, render_explanation

__all__ = [
    "CellOutcome",
    "Comparison",
    "Explanation",
    "SweepView",
    "compare",
    "compare_installs",
    "explain",
    "render_comparison",
    "render_explanation",
    "split_by_install",
]
