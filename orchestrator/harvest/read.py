"""Evidence of a log file on this machine, read in binary chunks (bounded memory, any size)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.harvest.evidence import EvidenceBuilder
from orchestrator.harvest.records import Evidence

CHUNK = 1 << 20


def read_evidence(path: Path, chunk_size: int = CHUNK) -> Evidence:
    """The evidence of a log file; raises OSError when it cannot be read."""
    builder = EvidenceBuilder()
    with path.open("rb") as f:
        while chunk := f.read(chunk_size):
            builder.feed(chunk)
    return builder.finish()
