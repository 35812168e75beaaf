"""orchestrator: sweep SGLang flag combinations on a GPU host, probe each launch, name each failure."""

from __future__ import annotations

from typing import Any

__all__ = ["Category", "Cell", "Phase", "ProbeOutcome", "ProbeResult", "Status", "Verdict", "__version__"]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The domain types on first use: the simulated server and the fake nvidia-smi import this package too, and
    # pay for nothing of the orchestrator's own (PEP 562).
    if name in __all__:
        from orchestrator import model

        return getattr(model, name)
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
