"""The launch phases and failure kinds the simulator plays out: the tool's own, never a copy.

The names are the contract the tool reads back from the simulated host's logs and answers (the phase a failure
happens in, the kind of failure a scenario asks for): one vocabulary, orchestrator/model.py.
"""

from __future__ import annotations

from orchestrator.model import Category, Phase

FAILURE_KINDS = frozenset(c.value for c in Category)
"""The failures a scenario can ask for by name: the category names of the taxonomy SGLang failures fall in."""

__all__ = ["FAILURE_KINDS", "Phase"]
