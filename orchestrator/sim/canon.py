"""Canonical flag names and values, so scenario rules match a flag under any release's spelling.

A small table of the renames that matter to the simulated releases (DIFF.md: nsa -> dsa, compressed -> dsv4,
tensor-parallel-size -> tp-size). Names are without leading dashes.
"""

from __future__ import annotations

_NAMES = {
    "nsa-decode-backend": "dsa-decode-backend",
    "nsa-prefill-backend": "dsa-prefill-backend",
    "tensor-parallel-size": "tp-size",
    "model": "model-path",
}
_ATTENTION_FLAGS = frozenset({"attention-backend", "prefill-attention-backend", "decode-attention-backend"})
_ATTENTION_VALUES = {"nsa": "dsa", "compressed": "dsv4", "tokenspeed_mla": "cutedsl_mla"}


def canonical_name(name: str) -> str:
    """The current name of a flag, without dashes: `--nsa-decode-backend` -> `dsa-decode-backend`."""
    bare = name.lstrip("-")
    return _NAMES.get(bare, bare)


def canonical_value(name: str, value: str) -> str:
    """The current spelling of a flag value: attention backend `nsa` -> `dsa`."""
    if canonical_name(name) in _ATTENTION_FLAGS:
        return _ATTENTION_VALUES.get(value, value)
    return value
