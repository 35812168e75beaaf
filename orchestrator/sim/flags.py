"""SGLang's renamed flags and value aliases, as the simulator knows them (its own copy, not the tool's).

SGLang renamed flags between releases (`--nsa-decode-backend` became `--dsa-decode-backend`, with no
alias in 0.5.23) and keeps deprecated value aliases (`--attention-backend nsa` means `dsa`). Scenario
rules match flags by these canonical spellings whatever spelling a launch used.
"""

from __future__ import annotations

from collections.abc import Mapping

FlagValue = str | int | float | bool | None

FLAG_RENAMES: dict[str, str] = {
    "nsa-decode-backend": "dsa-decode-backend",
    "nsa-prefill-backend": "dsa-prefill-backend",
    "tensor-parallel-size": "tp-size",
    "pipeline-parallel-size": "pp-size",
    "data-parallel-size": "dp-size",
    "model": "model-path",
    "expert-parallel-size": "ep-size",
    "ep": "ep-size",
    "attention-context-parallel-size": "attn-cp-size",
    "moe-data-parallel-size": "moe-dp-size",
    "speculative-draft-model": "speculative-draft-model-path",
    "nccl-init-addr": "dist-init-addr",
    "decode-context-parallel-size": "dcp-size",
    "attention-data-parallel-size": "attn-dp-size",
    "enable-hicache": "enable-hierarchical-cache",
}
"""Older or alias spelling -> canonical spelling (without leading dashes)."""

_ATTENTION_VALUE_ALIASES: dict[str, str] = {"nsa": "dsa", "compressed": "dsv4", "tokenspeed_mla": "cutedsl_mla"}

VALUE_ALIASES: dict[str, dict[str, str]] = {
    "attention-backend": _ATTENTION_VALUE_ALIASES,
    "prefill-attention-backend": _ATTENTION_VALUE_ALIASES,
    "decode-attention-backend": _ATTENTION_VALUE_ALIASES,
    "kv-cache-dtype": {"bfloat16": "bf16"},
}
"""Canonical flag -> {alias value: canonical value}."""


def canonical_name(name: str) -> str:
    """`--nsa-decode-backend` / `nsa_decode_backend` -> `dsa-decode-backend`."""
    bare = name.strip().lstrip("-").replace("_", "-")
    return FLAG_RENAMES.get(bare, bare)


def canonical_value(name: str, value: FlagValue) -> FlagValue:
    """The canonical spelling of a flag's value (`nsa` -> `dsa` for attention backends)."""
    if isinstance(value, str):
        return VALUE_ALIASES.get(canonical_name(name), {}).get(value, value)
    return value


def canonicalize(flags: Mapping[str, FlagValue]) -> dict[str, FlagValue]:
    """Canonical names and values for a whole flag set; key order is kept."""
    return {canonical_name(k): canonical_value(k, v) for k, v in flags.items()}


def spellings(canonical: str) -> list[str]:
    """Every known spelling of a canonical flag, canonical first (for translating to a host's grammar)."""
    return [canonical, *sorted(old for old, new in FLAG_RENAMES.items() if new == canonical)]


def value_spellings(canonical_flag: str, value: str) -> list[str]:
    """Every known spelling of a flag value, canonical first."""
    aliases = VALUE_ALIASES.get(canonical_flag, {})
    canonical = aliases.get(value, value)
    return [canonical, *sorted(old for old, new in aliases.items() if new == canonical)]
