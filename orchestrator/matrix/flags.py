"""Canonical flag names and values, so one combination has one identity across SGLang releases.

SGLang renamed flags between releases (`--nsa-decode-backend` became `--dsa-decode-backend`,
with no alias in 0.5.23) and keeps deprecated value aliases (`--attention-backend nsa` means
`dsa`). Cell ids, scenario rules and sweep comparisons all go through these two functions,
so a renamed flag never makes the same launch look like a new one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from orchestrator.model import FlagList, FlagValue

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

FLAG_SUCCESSORS: dict[str, tuple[str, ...]] = {
    "cuda-graph-bs": ("cuda-graph-bs-decode", "cuda-graph-bs-prefill"),
    "cuda-graph-max-bs": ("cuda-graph-max-bs-decode", "cuda-graph-max-bs-prefill"),
}
"""Flags split in two by a later release (0.5.23, fixtures/sglang/DIFF.md): not a rename, since the
one value may belong in either or both, so a cell is never translated, only told where the flag went."""

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
    if isinstance(value, FlagList):
        aliases = VALUE_ALIASES.get(canonical_name(name), {})
        return FlagList(aliases.get(v, v) if isinstance(v, str) else v for v in value)
    return value


def canonicalize(flags: Mapping[str, FlagValue]) -> dict[str, FlagValue]:
    """Canonical names and values for a whole flag set; key order is kept."""
    return {canonical_name(k): canonical_value(k, v) for k, v in flags.items()}


def spellings(canonical: str) -> list[str]:
    """Every known spelling of a canonical flag, canonical first (for translating to a host's grammar)."""
    return [canonical, *sorted(old for old, new in FLAG_RENAMES.items() if new == canonical)]


def related_flags(canonical: str) -> list[str]:
    """Flags that took this one's place in another release, or whose place it took (`cuda-graph-bs` and
    `cuda-graph-bs-decode`/`-prefill`)."""
    later = list(FLAG_SUCCESSORS.get(canonical, ()))
    earlier = [old for old, new in FLAG_SUCCESSORS.items() if canonical in new]
    return later + earlier


def value_spellings(canonical_flag: str, value: str) -> list[str]:
    """Every known spelling of a flag value, canonical first."""
    aliases = VALUE_ALIASES.get(canonical_flag, {})
    canonical = aliases.get(value, value)
    return [canonical, *sorted(old for old, new in aliases.items() if new == canonical)]


RENAMED_WORDS: dict[str, str] = {"nsa": "dsa"}
"""Words SGLang renamed throughout (flags, values, its own messages: `nsa_kv_cache_store_fp8` became
`dsa_...`): old -> new. Not derived from FLAG_RENAMES: `nccl-init-addr` became `dist-init-addr`, yet an
NCCL error is still an NCCL error."""
_RENAMED_WORD = re.compile(
    r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, RENAMED_WORDS)) + r")(?![A-Za-z0-9])", re.IGNORECASE
)


def canonical_words(text: str) -> str:
    """A message with renamed words in their new spelling, case kept: `nsa_kv_cache_store_fp8`, `NSA` -> dsa, DSA.

    Two releases print the same failure with the old and the new name; compared as they are, the
    rename alone would look like a different failure.
    """

    def new(match: re.Match[str]) -> str:
        word = match.group(1)
        target = RENAMED_WORDS[word.lower()]
        return target.upper() if word.isupper() else target.capitalize() if word[0].isupper() else target

    return _RENAMED_WORD.sub(new, text)
