"""orchestrator: sweep SGLang flag combinations on a GPU host, probe each launch, name each failure."""

from orchestrator.model import Category, Cell, Phase, ProbeOutcome, ProbeResult, Status, Verdict

__all__ = ["Category", "Cell", "Phase", "ProbeOutcome", "ProbeResult", "Status", "Verdict", "__version__"]

__version__ = "0.1.0"
